//! The import rule of the host crate (docs/development.md, "Module layers"): every top-level
//! module sits in one layer of [`LAYERS`] and imports only modules of the layers below it, and
//! within a module directory no two submodules import each other, directly or round a cycle.
//!
//! Read from the source: every `crate::<module>` and `super::<sibling>` path outside comments
//! and `#[cfg(test)] mod tests` blocks, including the names inside `crate::{...}` groups.
//! Items of the crate root (`crate::Error`, `crate::Result`, `crate::error_chain`) are not
//! modules and are allowed everywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The host's top-level modules, bottom layer first. A module may import only modules of the
/// layers before its own; a new module must be placed here.
const LAYERS: &[&[&str]] = &[
    // Foundations: constants, text and timing helpers, the scope of the API calls, the
    // process's memory, the async runtime.
    &[
        "backoff",
        "code_pages",
        "consts",
        "heap",
        "memory",
        "runtime",
        "scope",
        "telemetry",
        "text",
    ],
    // The AppService type.
    &["crd"],
    // The guest runtime, the local checks of the CRD, and test fixtures built from the type.
    &["fixtures", "guest", "validation"],
    // What builds on the guest: the host's stamp, Pod Security levels, OCI pulls, metrics,
    // and the test guests.
    &["metrics", "namespaces", "oci", "stamp", "testing"],
    // Whether the API server answers (counted in the metrics).
    &["reachability"],
    // What /readyz says.
    &["readiness"],
    // The parts the operator is made of besides the controller.
    &["leader", "server", "swap"],
    // The controller, which renders through the guests in force.
    &["controller"],
    // The operator assembled.
    &["operator"],
    // The command line.
    &["cli"],
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The code of `path` without comments and without its `#[cfg(test)] mod tests` block.
fn code(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => &text[..],
    };
    text.lines()
        .map(|line| line.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first segments of the paths that follow `prefix` (e.g. `crate::`) in `code`: `a` for
/// `crate::a::b`, and `a`, `c` for `crate::{a::b, c}`.
fn imported(code: &str, prefix: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut rest = code;
    while let Some(at) = rest.find(prefix) {
        // NB: `my_crate::x` is not `crate::x`.
        let before = rest[..at].chars().next_back();
        rest = &rest[at + prefix.len()..];
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut start_of_item = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 1 => start_of_item = true,
                    c if c.is_whitespace() => {}
                    _ if depth == 1 && start_of_item => {
                        names.insert(ident(&group[i..]));
                        start_of_item = false;
                    }
                    _ => {}
                }
                if depth == 0 {
                    break;
                }
            }
        } else {
            names.insert(ident(rest));
        }
    }
    names.remove("");
    names.remove("self");
    names
}

/// The `.rs` files under `dir`, recursively.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).expect("readable source directory") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            out.extend(files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// The top-level modules: each `foo.rs` and `foo/` under src/, but the crate roots.
fn top_level_modules() -> BTreeSet<String> {
    fs::read_dir(src())
        .expect("src/")
        .map(|e| e.expect("an entry").path())
        .filter_map(|p| {
            let stem = p.file_stem()?.to_str()?.to_owned();
            (p.is_dir() || p.extension().is_some_and(|e| e == "rs")).then_some(stem)
        })
        .filter(|m| m != "lib" && m != "main")
        .collect()
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

#[test]
fn every_module_has_a_layer_and_imports_only_layers_below_it() {
    let modules = top_level_modules();
    let unplaced: Vec<_> = modules.iter().filter(|m| layer_of(m).is_none()).collect();
    assert!(
        unplaced.is_empty(),
        "modules missing from LAYERS: {unplaced:?}"
    );
    let mut wrong = Vec::new();
    for module in &modules {
        let root = src().join(module);
        let mut paths = if root.is_dir() {
            files(&root)
        } else {
            Vec::new()
        };
        paths.push(root.with_extension("rs"));
        for path in paths.iter().filter(|p| p.is_file()) {
            for target in imported(&code(path), "crate::") {
                if !modules.contains(&target) || &target == module {
                    continue;
                }
                if layer_of(&target) >= layer_of(module) {
                    let file = path.strip_prefix(src()).unwrap_or(path).display();
                    wrong.push(format!("{file} imports {target}"));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports of a module in the same or a higher layer:\n{}",
        wrong.join("\n")
    );
}

/// A cycle in `edges`, as the path round it, if any.
fn cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut round = path[at..].to_vec();
            round.push(node.to_owned());
            return Some(round);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(round) = visit(next, edges, done, path) {
                return Some(round);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|node| visit(node, edges, &mut done, &mut Vec::new()))
}

#[test]
fn no_two_submodules_import_each_other() {
    let mut cycles = Vec::new();
    for module in top_level_modules() {
        let dir = src().join(&module);
        if !dir.is_dir() {
            continue;
        }
        let siblings: BTreeSet<String> = fs::read_dir(&dir)
            .expect("a module directory")
            .filter_map(|e| {
                let path = e.ok()?.path();
                let stem = path.file_stem()?.to_str()?.to_owned();
                (path.is_dir() || path.extension().is_some_and(|e| e == "rs")).then_some(stem)
            })
            .filter(|s| s != "mod" && s != "tests")
            .collect();
        let mut edges = BTreeMap::<String, BTreeSet<String>>::new();
        for sibling in &siblings {
            let file = dir.join(format!("{sibling}.rs"));
            if !file.is_file() {
                continue;
            }
            let code = code(&file);
            let uses = imported(&code, "super::")
                .into_iter()
                .chain(imported(&code, &format!("crate::{module}::")));
            let targets = uses.filter(|t| t != sibling && siblings.contains(t));
            edges.entry(sibling.clone()).or_default().extend(targets);
        }
        if let Some(round) = cycle(&edges) {
            cycles.push(format!("{module}: {}", round.join(" -> ")));
        }
    }
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
}

#[test]
fn the_reader_finds_grouped_and_nested_imports() {
    let code = "use crate::{a::{b, c}, d, e::f};\nlet x = crate::g::h();\nuse super::{i, j::k};";
    let found: Vec<_> = imported(code, "crate::").into_iter().collect();
    assert_eq!(found, ["a", "d", "e", "g"]);
    let found: Vec<_> = imported(code, "super::").into_iter().collect();
    assert_eq!(found, ["i", "j"]);
    assert!(imported("use my_crate::x;", "crate::").is_empty());
    let mut edges = BTreeMap::new();
    edges.insert("x".to_owned(), BTreeSet::from(["y".to_owned()]));
    edges.insert("y".to_owned(), BTreeSet::from(["x".to_owned()]));
    assert_eq!(
        cycle(&edges),
        Some(vec!["x".into(), "y".into(), "x".into()])
    );
    edges.remove("y");
    assert_eq!(cycle(&edges), None);
}

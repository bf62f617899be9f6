//! `app-operator guest inspect`: what a guest component is and what it imports.

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::Result;
use crate::guest::{self, Inspection};

/// Arguments of `app-operator guest inspect`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The guest component (`.wasm`), or a reference pinned by digest
    /// (`registry/repository@sha256:<hex>`, pulled and verified).
    pub file: PathBuf,
    /// How to reach the registry, for a guest given by reference.
    #[command(flatten)]
    pub registry: super::registry::RegistryArgs,
}

/// Runs the subcommand: prints digest, size, world and version, exports and imports.
pub async fn exec(args: Args) -> Result<()> {
    super::init_stderr_logging();
    let wasm = super::registry::read_guest(&args.file, &args.registry).await?;
    let runtime = guest::Runtime::new(guest::Config::default())?;
    let inspection = runtime.inspect(wasm).await?;
    print!("{}", format(&inspection));
    Ok(())
}

/// The inspection as aligned text.
pub fn format(i: &Inspection) -> String {
    let mut out = String::new();
    let world = i
        .world
        .as_deref()
        .unwrap_or("none (does not export kudevops:appservice/policy)");
    let _ = writeln!(
        out,
        "digest:  {}\nsize:    {} bytes\nworld:   {world}",
        i.digest, i.size
    );
    let _ = writeln!(out, "exports:");
    for e in &i.exports {
        let _ = writeln!(out, "  {e}");
    }
    let _ = writeln!(out, "imports:");
    let width = i.imports.iter().map(|m| m.name.len()).max().unwrap_or(0);
    for m in &i.imports {
        let verdict = if m.granted { "granted" } else { "denied" };
        let _ = writeln!(out, "  {:width$}  {verdict}: {}", m.name, m.how);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guest::Import;

    #[test]
    fn format_lists_imports_with_their_fate() {
        let i = Inspection {
            digest: "sha256:ab".into(),
            size: 3,
            world: None,
            exports: vec!["x".into()],
            imports: vec![
                Import {
                    name: "kudevops:appservice/host@0.1.0".into(),
                    granted: true,
                    how: "the contract".into(),
                },
                Import {
                    name: "wasi:cli/stdin@0.2.6".into(),
                    granted: false,
                    how: "closed".into(),
                },
            ],
        };
        let text = format(&i);
        assert!(text.contains("world:   none"), "{text}");
        assert!(
            text.contains("  kudevops:appservice/host@0.1.0  granted: the contract\n"),
            "{text}"
        );
        assert!(
            text.contains("  wasi:cli/stdin@0.2.6            denied: closed\n"),
            "{text}"
        );
    }
}

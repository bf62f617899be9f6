//! What a guest component is: digest, size, the contract it implements, and what it imports.

use wasmtime::Engine;
use wasmtime::component::Component;

use super::bindings::{EXPORT_PREFIX, WORLD};
use super::wasi;

/// A description of a guest component, for `app-operator guest inspect`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inspection {
    /// `sha256:<hex>` of the bytes.
    pub digest: String,
    /// Size of the component, in bytes.
    pub size: usize,
    /// The contract's world and version the guest implements, if it exports it.
    pub world: Option<String>,
    /// Export names, e.g. `kudevops:appservice/policy@0.1.0`.
    pub exports: Vec<String>,
    /// Imports, each with whether the host provides it.
    pub imports: Vec<Import>,
}

/// One import of a guest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Import {
    /// e.g. `kudevops:appservice/host@0.1.0` or `wasi:cli/stdout@0.2.6`.
    pub name: String,
    /// `true` when the host grants what it asks for; `false` when it is denied: calls to it
    /// trap, or fail or find nothing as [`Import::how`] says.
    pub granted: bool,
    /// How it is granted or denied, e.g. `stdout -> guest log (info), 4 KiB/call, ...`.
    pub how: String,
}

/// Describes a compiled component.
pub(super) fn inspect(
    engine: &Engine,
    component: &Component,
    digest: &str,
    size: usize,
) -> Inspection {
    let ty = component.component_type();
    let exports: Vec<String> = ty
        .exports(engine)
        .map(|(name, _)| name.to_owned())
        .collect();
    let world = exports
        .iter()
        .find_map(|e| e.strip_prefix(EXPORT_PREFIX))
        .map(
            |version| match version.starts_with("0.1.") || version.starts_with("0.2.") {
                true => format!("{WORLD}@{version}"),
                false => {
                    format!("{WORLD}@{version} (unsupported: this host speaks 0.1.x and 0.2.x)")
                }
            },
        );
    let imports = ty
        .imports(engine)
        .map(|(name, _)| {
            let (granted, how) = if name.starts_with("kudevops:appservice/") {
                (true, "the contract, provided by the host".to_owned())
            } else {
                wasi::grant(name)
                    .unwrap_or((false, "not provided: the guest does not load".to_owned()))
            };
            Import {
                name: name.to_owned(),
                granted,
                how,
            }
        })
        .collect();
    Inspection {
        digest: digest.to_owned(),
        size,
        world,
        exports,
        imports,
    }
}

//! `app-operator guest inspect`: what a guest component is and what it imports.

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::Result;
use crate::guest::{self, Inspection};

/// Arguments of `app-operator guest inspect`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The guest component (`.wasm`).
    pub file: PathBuf,
}

/// Runs the subcommand: prints digest, size, world and version, exports and imports.
pub async fn exec(args: Args) -> Result<()> {
    super::init_stderr_logging();
    let wasm = super::render::read(&args.file)?;
    let runtime = guest::Runtime::new(guest::Config::default())?;
    let inspection = tokio::task::block_in_place(|| runtime.inspect(&wasm))?;
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
        let how = if m.provided {
            "provided by the host"
        } else {
            "denied: traps if called"
        };
        let _ = writeln!(out, "  {:width$}  {how}", m.name);
    }
    out
}

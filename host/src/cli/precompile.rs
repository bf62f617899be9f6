//! `app-operator guest precompile`: compile guests ahead of time into a directory that
//! `run --guest-precompiled-dir` loads them from, as the image build does for the default guest.

use std::path::PathBuf;

use crate::Result;
use crate::guest;

/// Arguments of `app-operator guest precompile`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where to write the artifacts (`<hex digest>-<engine hash>.cwasm`); created if missing.
    #[arg(long)]
    pub out_dir: PathBuf,
    /// The engine flags of the `run` that is to load them: an artifact loads only into an engine
    /// of the same settings (and CPU features: see the operations guide).
    #[command(flatten)]
    pub engine: super::EngineArgs,
    /// The guest components (`.wasm`). Default: the embedded default guest.
    pub files: Vec<PathBuf>,
}

/// Runs the subcommand: one artifact per guest, its path printed on a line.
pub fn exec(args: &Args) -> Result<()> {
    super::init_stderr_logging();
    let mut config = guest::Config::default();
    args.engine.apply(&mut config);
    let runtime = guest::Runtime::new(config)?;
    if args.files.is_empty() {
        let path = runtime.precompile(guest::default_guest(), &args.out_dir)?;
        println!("{}", path.display());
    }
    for file in &args.files {
        let wasm = super::read(file)?;
        let path = runtime.precompile(&wasm, &args.out_dir)?;
        println!("{}", path.display());
    }
    Ok(())
}

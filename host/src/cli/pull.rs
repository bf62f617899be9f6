//! `app-operator guest pull`: fetches a guest by its pinned reference, verified, to a file, for
//! local `render`, `plan` and tests.

use std::path::PathBuf;

use super::registry::RegistryArgs;
use crate::oci::Pinned;
use crate::{Error, Result};

/// Arguments of `app-operator guest pull`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The reference, pinned by digest: `registry/repository@sha256:<hex>`.
    pub reference: String,
    /// Where to write the component. Default: the repository's last part, `.wasm`.
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
    /// How to reach the registry.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// Runs the subcommand.
pub async fn exec(args: Args) -> Result<()> {
    super::init_stderr_logging();
    let pinned = Pinned::parse(&args.reference)?;
    let pulled = args.registry.registry()?.pull(&pinned).await?;
    let output = args.output.clone().unwrap_or_else(|| {
        let name = pinned.repository().rsplit('/').next().unwrap_or("guest");
        PathBuf::from(format!("{name}.wasm"))
    });
    std::fs::write(&output, &pulled.wasm).map_err(|source| Error::Write {
        path: output.clone(),
        source,
    })?;
    println!(
        "pulled {pinned} ({} bytes, component {}) to {}",
        pulled.wasm.len(),
        crate::guest::digest(&pulled.wasm),
        output.display()
    );
    Ok(())
}

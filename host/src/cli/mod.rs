//! Command-line interface: one submodule per subcommand.

pub mod compile;
pub mod conformance;
mod connect;
pub mod crd;
mod engine;
mod http2;
pub mod inspect;
pub mod plan;
mod policy;
pub mod precompile;
pub mod pull;
pub mod push;
pub mod registry;
pub mod render;
pub mod run;
pub mod sign;

use std::path::Path;

use clap::{Parser, Subcommand};

use crate::{Error, Result};

pub use connect::Connection;
pub use engine::EngineArgs;
pub use policy::PolicyArgs;

/// app-operator: AppService in, Deployment and Service out, with the policy in a WebAssembly guest.
#[derive(Debug, Parser)]
#[command(name = "app-operator", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the controller against a cluster.
    Run(Box<run::Args>),
    /// Render an AppService through a guest and print what the controller would apply.
    Render(render::Args),
    /// Work with guest components.
    #[command(subcommand)]
    Guest(GuestCommand),
    /// Render every live AppService through a candidate guest and print the diff with the live
    /// children, writing nothing.
    Plan(plan::Args),
    /// Print the AppService CustomResourceDefinition as YAML.
    Crd(crd::Args),
}

/// `app-operator guest ...`
#[derive(Debug, Subcommand)]
pub enum GuestCommand {
    /// Print a guest's digest, size, world, version and imports.
    Inspect(inspect::Args),
    /// Put a guest into the operator's guest ConfigMap, as the stable guest or a canary; with
    /// `--to`, push it to an OCI registry and put its digest reference there instead.
    Push(push::Args),
    /// Fetch a guest from an OCI registry by its pinned reference, verified, to a file.
    Pull(pull::Args),
    /// Sign a guest with an Ed25519 private key, for an operator run with
    /// `--guest-trusted-key`.
    Sign(sign::Args),
    /// Compile guests ahead of time, for `run --guest-precompiled-dir` (the image ships the
    /// default guest's).
    Precompile(precompile::Args),
    /// The child process that compiles a guest for the operator (internal).
    #[command(hide = true)]
    Compile(compile::Args),
    /// Run a directory of cases (input.yaml and expected.yaml or expected-error.txt each)
    /// through a guest and show what differs.
    Test(conformance::Args),
}

/// Sends `tracing` events (guest logs among them) to stderr, filtered by `RUST_LOG` (default
/// `warn`), for the local subcommands. Does nothing if a subscriber is already set.
fn init_stderr_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Runs the parsed command line.
pub async fn exec(cli: Cli) -> crate::Result<()> {
    match cli.command {
        Command::Run(args) => run::exec(*args).await,
        Command::Render(args) => render::exec(args).await,
        Command::Guest(GuestCommand::Inspect(args)) => inspect::exec(args).await,
        Command::Guest(GuestCommand::Push(args)) => push::exec(args).await,
        Command::Guest(GuestCommand::Pull(args)) => pull::exec(args).await,
        Command::Guest(GuestCommand::Sign(args)) => sign::exec(args).await,
        Command::Guest(GuestCommand::Precompile(args)) => precompile::exec(&args),
        Command::Guest(GuestCommand::Compile(args)) => {
            // NB: main() answers for the child before calling this; a library caller gets the
            // child's exit status as an error.
            match compile::exec(&args) {
                code if code == std::process::ExitCode::SUCCESS => Ok(()),
                _ => Err(crate::Error::Input("guest compile failed".into())),
            }
        }
        Command::Guest(GuestCommand::Test(args)) => conformance::exec(args).await,
        Command::Plan(args) => plan::exec(args).await,
        Command::Crd(args) => crd::exec(args).await,
    }
}

/// Reads a file, or standard input for `-`.
pub(super) fn read(path: &Path) -> Result<Vec<u8>> {
    let read = if path == Path::new("-") {
        std::io::read_to_string(std::io::stdin()).map(String::into_bytes)
    } else {
        std::fs::read(path)
    };
    read.map_err(|source| Error::Read {
        path: path.to_owned(),
        source,
    })
}

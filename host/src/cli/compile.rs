//! `app-operator guest compile` (hidden): the child process that compiles a guest for the
//! operator ([`crate::guest::compiler`]). Not meant to be run by hand.

use std::process::ExitCode;

use crate::guest;

/// What the parent passes: the settings its engine was built with.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The parent's `guest::Config::memory_limit`.
    #[arg(long)]
    pub memory_limit_bytes: usize,
    /// The parent's `guest::Config::memory_budget`.
    #[arg(long)]
    pub memory_budget_bytes: usize,
    /// Whether the parent's engine meters fuel.
    #[arg(long)]
    pub fuel: bool,
}

/// Reads the component on stdin and writes the artifact on stdout.
pub fn exec(args: &Args) -> ExitCode {
    let config = guest::Config {
        memory_limit: args.memory_limit_bytes,
        memory_budget: args.memory_budget_bytes,
        fuel: args.fuel.then_some(1),
        ..guest::Config::default()
    };
    guest::compiler::serve(&config)
}

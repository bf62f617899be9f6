//! The `app-operator` binary: parses the command line and hands off to the library.

use std::process::ExitCode;

use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = app_operator::cli::Cli::parse();
    match app_operator::cli::exec(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line: the error and its causes, `: `-separated.
            eprintln!("error: {:#}", anyhow::Error::from(e));
            ExitCode::FAILURE
        }
    }
}

//! The `app-operator` binary: parses the command line and hands off to the library.

use std::process::ExitCode;

use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = app_operator::cli::Cli::parse();
    // NB: the guest compile child answers with an exit code of its own (guest::compiler).
    if let app_operator::cli::Command::Guest(app_operator::cli::GuestCommand::Compile(args)) =
        &cli.command
    {
        return app_operator::cli::compile::exec(args);
    }
    match app_operator::cli::exec(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line: the error and its causes, `: `-separated, with any line breaks in a
            // cause's text (e.g. wasmtime's parse errors) folded.
            let message = format!("{:#}", anyhow::Error::from(e));
            eprintln!(
                "error: {}",
                message.split_whitespace().collect::<Vec<_>>().join(" ")
            );
            ExitCode::FAILURE
        }
    }
}

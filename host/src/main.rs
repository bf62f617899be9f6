//! The `app-operator` binary: parses the command line and hands off to the library.

use std::process::ExitCode;

use clap::Parser;

// NB: one thread runs everything async. The controller's future (watches, queue, reconciles)
// already ran on the thread that blocks on `main`, with only the HTTP/2 connection and the
// servers on worker threads, so every request crossed threads twice; on one thread it does not,
// for about a tenth less CPU and RSS (docs/development.md, "One thread"). Guest calls still run
// on the blocking pool, so a slow guest never holds the thread.
#[tokio::main(flavor = "current_thread")]
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

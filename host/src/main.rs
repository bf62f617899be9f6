//! The `app-operator` binary: parses the command line and hands off to the library.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

fn main() -> ExitCode {
    let cli = app_operator::cli::Cli::parse();
    // NB: the guest compile child answers with an exit code of its own (guest::compiler).
    if let app_operator::cli::Command::Guest(app_operator::cli::GuestCommand::Compile(args)) =
        &cli.command
    {
        return app_operator::cli::compile::exec(args);
    }
    // NB: only the operator waits before it sleeps; a one-shot command's requests follow each
    // other, and each would wait for nothing (app_operator::runtime).
    let pause = match &cli.command {
        app_operator::cli::Command::Run(args) => Duration::from_millis(args.wake_pause_ms),
        _ => Duration::ZERO,
    };
    match app_operator::runtime::build(pause) {
        Ok(runtime) => runtime.block_on(exec(cli)),
        Err(e) => {
            eprintln!("error: failed to start the async runtime: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs `cli`'s command; one line on stderr if it fails.
async fn exec(cli: app_operator::cli::Cli) -> ExitCode {
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

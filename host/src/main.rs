//! The `app-operator` binary: parses the command line and hands off to the library.

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = app_operator::cli::Cli::parse();
    app_operator::cli::exec(cli).await?;
    Ok(())
}

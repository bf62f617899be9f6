//! `app-operator render` (placeholder: being written, see the issue).

/// Arguments of `app-operator render`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs the subcommand.
pub async fn exec(_args: Args) -> crate::Result<()> {
    todo!("app-operator render")
}

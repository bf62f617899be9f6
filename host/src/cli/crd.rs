//! `app-operator crd`: prints the AppService CustomResourceDefinition.

/// Arguments of `app-operator crd`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Prints the CRD as YAML on stdout, ready for `kubectl apply -f -`.
pub async fn exec(_args: Args) -> crate::Result<()> {
    print!("{}", crate::crd::crd_yaml());
    Ok(())
}

//! The registry flags of the local subcommands (`guest push --to`, `guest pull`, and `render`,
//! `plan`, `guest inspect` given a reference), and reading a guest that is a file or a
//! reference.

use std::path::{Path, PathBuf};

use crate::oci::{self, Pinned};
use crate::{Error, Result};

/// How to reach the registry: credentials, CA, size bound.
#[derive(Clone, Debug, clap::Args)]
pub struct RegistryArgs {
    /// Docker config file with the registry credentials (`auths`). Default:
    /// `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`, when it exists; else anonymous.
    #[arg(long, value_name = "config.json", env = "APP_OPERATOR_REGISTRY_CONFIG")]
    pub registry_config: Option<PathBuf>,
    /// CA bundle (PEM) to trust, besides the system's, for a registry with a private CA.
    #[arg(long, value_name = "CA.pem", env = "APP_OPERATOR_REGISTRY_CA")]
    pub registry_ca: Option<PathBuf>,
    /// The largest guest pulled, in bytes.
    #[arg(long, default_value_t = oci::DEFAULT_MAX_GUEST_BYTES)]
    pub max_guest_bytes: u64,
}

impl Default for RegistryArgs {
    fn default() -> Self {
        Self {
            registry_config: None,
            registry_ca: None,
            max_guest_bytes: oci::DEFAULT_MAX_GUEST_BYTES,
        }
    }
}

impl RegistryArgs {
    /// The docker config file to read, if any.
    fn config_file(&self) -> Option<PathBuf> {
        if let Some(path) = &self.registry_config {
            return Some(path.clone());
        }
        let dir = std::env::var_os("DOCKER_CONFIG")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker")))?;
        Some(dir.join("config.json")).filter(|p| p.is_file())
    }

    /// The registry client these flags describe.
    pub fn registry(&self) -> Result<oci::Registry> {
        let credentials = match self.config_file() {
            Some(path) => oci::Credentials::from_file(&path)?,
            None => oci::Credentials::default(),
        };
        Ok(oci::Registry::new(oci::client::Options {
            credentials,
            ca_file: self.registry_ca.clone(),
            limits: oci::Limits {
                max_guest_bytes: self.max_guest_bytes,
            },
        })?)
    }
}

/// Whether `arg` names a guest by reference rather than a file: it parses as a pinned
/// reference and no file of that name exists.
pub fn reference(arg: &Path) -> Option<Pinned> {
    let text = arg.to_str()?;
    (text.contains('@') && !arg.exists())
        .then(|| Pinned::parse(text).ok())
        .flatten()
}

/// The guest `arg` names: pulled and verified when it is a reference, else read from the file
/// (`-`: stdin).
pub async fn read_guest(arg: &Path, registry: &RegistryArgs) -> Result<Vec<u8>> {
    match reference(arg) {
        Some(pinned) => Ok(registry.registry()?.pull(&pinned).await?.wasm),
        None if arg
            .to_str()
            .is_some_and(|t| t.contains('@') && !arg.exists()) =>
        {
            // NB: looks like a reference but does not parse: say why, not "no such file".
            let text = arg.to_string_lossy();
            Err(Pinned::parse(&text)
                .map(|_| ())
                .map_err(Error::from)
                .unwrap_err())
        }
        None => super::read(arg),
    }
}

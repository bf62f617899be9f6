//! app-operator: a Kubernetes operator whose reconcile policy runs as a sandboxed WebAssembly guest.

pub mod cli;
pub mod consts;
pub mod crd;
pub mod guest;
pub mod stamp;

/// Every error the app-operator library reports.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The guest runtime failed (load, trap, limit, invalid output, policy error).
    #[error(transparent)]
    Guest(#[from] guest::Error),
    /// A file could not be read.
    #[error("failed to read {path}")]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The input is not what the command expects, e.g. not an AppService.
    #[error("{0}")]
    Input(String),
    /// A YAML document could not be parsed or printed.
    #[error("invalid YAML in {what}")]
    Yaml {
        /// What was being parsed, e.g. a file name.
        what: String,
        /// Why.
        #[source]
        source: serde_yaml_ng::Error,
    },
}

/// Result with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

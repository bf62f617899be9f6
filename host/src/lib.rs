//! app-operator: a Kubernetes operator whose reconcile policy runs as a sandboxed WebAssembly guest.

pub mod backoff;
pub mod cli;
pub mod code_pages;
pub mod consts;
pub mod controller;
pub mod crd;
#[cfg(test)]
mod fixtures;
pub mod guest;
pub mod heap;
pub mod leader;
pub mod memory;
pub mod metrics;
pub mod namespaces;
pub mod oci;
pub mod operator;
pub mod reachability;
pub mod readiness;
pub mod runtime;
pub mod scope;
pub mod server;
pub mod stamp;
pub mod swap;
pub mod telemetry;
#[cfg(any(test, feature = "test-guests"))]
pub mod testing;
pub mod text;
pub mod validation;

use std::net::SocketAddr;
use std::path::PathBuf;

/// Every error the app-operator library reports.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The guest runtime failed (load, trap, limit, invalid output, policy error).
    #[error(transparent)]
    Guest(#[from] guest::Error),
    /// Listing the children the operator manages failed.
    #[error("failed to list the managed {kind}s")]
    ListChildren {
        /// Kind of the children.
        kind: &'static str,
        /// What the API server said.
        #[source]
        source: kube::Error,
    },
    /// The API server does not know AppServices: the CRD is not installed.
    #[error(
        "failed to list AppServices: the CRD is not installed (`app-operator crd | kubectl apply -f -`)"
    )]
    CrdNotInstalled(#[source] kube::Error),
    /// AppServices could not be listed for another reason (no answer, forbidden, ...).
    #[error("failed to list AppServices")]
    ListAppServices(#[source] kube::Error),
    /// No usable Kubernetes client configuration.
    #[error("failed to load the Kubernetes client configuration")]
    KubeConfig(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// Building the Kubernetes client failed.
    #[error("failed to create the Kubernetes client")]
    Client(#[source] kube::Error),
    /// A file could not be read.
    #[error("failed to read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file could not be written.
    #[error("failed to write {path}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A guest could not be signed with a private key file.
    #[error("failed to sign with {path}")]
    SigningKey {
        /// The key file.
        path: PathBuf,
        /// Why.
        #[source]
        source: swap::trust::Error,
    },
    /// A file given as a guest's signature is not one.
    #[error("{path} is not a guest signature file")]
    SignatureFile {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: swap::trust::Error,
    },
    /// The guest memory budget does not fit the process's memory limit.
    #[error(transparent)]
    Memory(#[from] memory::Error),
    /// The keys of `--guest-trusted-key` could not be loaded.
    #[error("failed to load the trusted guest keys")]
    TrustedKeys(#[source] swap::trust::Error),
    /// The input is not what the command expects, e.g. not an AppService.
    #[error("{0}")]
    Input(String),
    /// An AppService the API server would refuse (its CRD's schema and CEL rules, checked
    /// locally by [`validation`]).
    #[error("{what} is not a valid AppService (the API server would refuse it)")]
    InvalidApp {
        /// Where it comes from, e.g. a file name.
        what: String,
        /// Every failure, each naming its field.
        #[source]
        source: validation::Invalid,
    },
    /// A YAML document could not be parsed or printed.
    #[error("invalid YAML in {what}")]
    Yaml {
        /// What was being parsed, e.g. a file name.
        what: String,
        /// Why.
        #[source]
        source: serde_yaml_ng::Error,
    },
    /// The namespaces' Pod Security labels could not be read.
    #[error("failed to read the namespaces' Pod Security labels")]
    Namespaces(#[source] kube::Error),
    /// A guest could not be pulled from or pushed to a registry.
    #[error(transparent)]
    Oci(#[from] oci::Error),
    /// The guest ConfigMap could not be read.
    #[error("failed to read the guest ConfigMap")]
    GuestSource(#[source] kube::Error),
    /// Leader election failed, or this replica lost the leader Lease.
    #[error(transparent)]
    Leader(#[from] leader::Error),
    /// An HTTP endpoint could not be served.
    #[error("failed to serve HTTP on {addr}")]
    Serve {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// The error of a failed list of AppServices: [`Error::CrdNotInstalled`] when the API server
    /// does not know the resource (404), else [`Error::ListAppServices`].
    pub fn listing_apps(source: kube::Error) -> Self {
        match &source {
            kube::Error::Api(status) if status.code == 404 => Error::CrdNotInstalled(source),
            _ => Error::ListAppServices(source),
        }
    }
}

/// Result with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error and its sources on one line: `failed to apply Service web: failed to allocate a
/// nodePort: range is full (500 InternalError)`.
///
/// NB: kube's `Error::Api` displays the whole `Status` in debug form; here it is its message,
/// code and reason, which is what a condition or an Event should carry.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut message = String::new();
    let mut next = Some(error);
    while let Some(cause) = next {
        let text = match cause.downcast_ref::<kube::Error>() {
            Some(kube::Error::Api(status)) => {
                next = None;
                format!("{} ({} {})", status.message, status.code, status.reason)
            }
            _ => {
                next = cause.source();
                cause.to_string()
            }
        };
        if message.is_empty() {
            message = text;
        } else if !message.ends_with(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_api_error_is_its_message_code_and_reason() {
        let status = kube::core::Status::failure(
            "Internal error occurred: failed to allocate a nodePort: range is full",
            "InternalError",
        )
        .with_code(500);
        let error = controller::Error::Apply {
            kind: "Service",
            name: "web".into(),
            source: kube::Error::Api(Box::new(status)),
        };
        assert_eq!(
            error_chain(&error),
            "failed to apply Service web: Internal error occurred: failed to allocate a \
             nodePort: range is full (500 InternalError)"
        );
    }
}

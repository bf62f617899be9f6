//! app-operator: a Kubernetes operator whose reconcile policy runs as a sandboxed WebAssembly guest.

pub mod cli;
pub mod crd;
pub mod guest;

/// Every error the app-operator library reports.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The guest runtime failed (load, trap, limit, invalid output, policy error).
    #[error(transparent)]
    Guest(#[from] guest::Error),
}

/// Result with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

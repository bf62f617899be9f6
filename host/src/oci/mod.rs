//! Guests from an OCI registry: references pinned by digest, the wasm OCI artifact layout, the
//! registry client (pull verified and bounded, push), credentials and the on-disk cache.
//!
//! Nothing here trusts the registry: the manifest must hash to the pinned digest and the layer to
//! the digest its manifest names, and no more than [`Limits::max_guest_bytes`] is read. Nothing
//! here trusts the disk either: a cached component is hashed again when it is read.

pub mod artifact;
pub mod cache;
pub mod client;
pub mod credentials;
pub mod fetch;
pub mod reference;

use std::path::PathBuf;

pub use client::Registry;
pub use credentials::Credentials;
pub use fetch::Fetcher;
pub use reference::Pinned;

/// The default [`Limits::max_guest_bytes`]: 64 MiB, over three times the 18 MB Python guest.
pub const DEFAULT_MAX_GUEST_BYTES: u64 = 64 * 1024 * 1024;

/// Bounds on what is read from a registry.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// The largest component pulled; a larger layer (declared or actually sent) is cut off and
    /// rejected.
    pub max_guest_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_guest_bytes: DEFAULT_MAX_GUEST_BYTES,
        }
    }
}

/// What went wrong pulling, pushing or caching a guest.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Not a reference this operator runs: it must be pinned by a sha256 digest.
    #[error(
        "`{reference}` is not an OCI reference pinned by digest (registry/repository@sha256:<64 hex digits>): {why}"
    )]
    Reference {
        /// The reference as written.
        reference: String,
        /// What is wrong with it.
        why: String,
    },
    /// The registry credentials could not be read.
    #[error("failed to read the registry credentials from {from}: {why}")]
    Credentials {
        /// Where they were read from (a file, a Secret).
        from: String,
        /// Why.
        why: String,
    },
    /// The CA bundle could not be read.
    #[error("failed to read the registry CA bundle {path}")]
    Ca {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The registry refused the credentials (or their absence).
    #[error("the registry refused access to {reference} (wrong or missing credentials)")]
    Unauthorized {
        /// The reference.
        reference: String,
        /// What the client said.
        #[source]
        source: oci_client::errors::OciDistributionError,
    },
    /// The registry does not hold the manifest or a blob.
    #[error("the registry has no {what} for {reference}")]
    NotFound {
        /// The reference.
        reference: String,
        /// The manifest or a blob.
        what: &'static str,
        /// What the client said.
        #[source]
        source: oci_client::errors::OciDistributionError,
    },
    /// The registry could not be reached or failed: worth trying again later.
    #[error("failed to talk to the registry for {reference}")]
    Registry {
        /// The reference.
        reference: String,
        /// What the client said.
        #[source]
        source: oci_client::errors::OciDistributionError,
    },
    /// The manifest the registry sent does not hash to the pinned digest.
    #[error("the manifest of {reference} hashes to {actual}, not to its pinned digest")]
    ManifestDigest {
        /// The reference.
        reference: String,
        /// The digest of what was received.
        actual: String,
    },
    /// The component does not hash to the digest its manifest names.
    #[error(
        "the wasm layer of {reference} hashes to {actual}, not to {expected} as its manifest says"
    )]
    LayerDigest {
        /// The reference.
        reference: String,
        /// The manifest's layer digest.
        expected: String,
        /// The digest of what was received.
        actual: String,
    },
    /// The component is larger than [`Limits::max_guest_bytes`].
    #[error(
        "the wasm layer of {reference} is over the maximum guest size of {limit} bytes ({seen})"
    )]
    TooLarge {
        /// The reference.
        reference: String,
        /// The limit.
        limit: u64,
        /// What gave it away: the declared size or the bytes received.
        seen: String,
    },
    /// The artifact is not a wasm OCI artifact (an image, several wasm layers, ...).
    #[error("{reference} is not a wasm OCI artifact: {why}")]
    NotWasm {
        /// The reference.
        reference: String,
        /// Why.
        why: String,
    },
    /// The on-disk cache could not be read or written.
    #[error("failed to use the guest cache at {path}")]
    Cache {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// Whether trying again later may succeed: the registry was unreachable or failed. A refusal,
    /// a digest mismatch or a bad artifact stays what it is.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Registry { .. })
    }

    /// A fixed label for metrics and Event reasons.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Reference { .. } => "reference",
            Error::Credentials { .. } | Error::Ca { .. } => "registry_config",
            Error::Unauthorized { .. } => "unauthorized",
            Error::NotFound { .. } => "not_found",
            Error::Registry { .. } => "registry_unreachable",
            Error::ManifestDigest { .. } | Error::LayerDigest { .. } => "digest_mismatch",
            Error::TooLarge { .. } => "too_large",
            Error::NotWasm { .. } => "not_wasm",
            Error::Cache { .. } => "cache",
        }
    }
}

//! The sandboxed guest runtime: the only module that touches wasmtime.
//!
//! PLACEHOLDER: the public API below is the contract other modules code against; the bodies are
//! being written (issue 2).

use std::path::PathBuf;
use std::time::Duration;

use crate::crd::AppService;

/// Errors of the guest runtime.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Placeholder.
    #[error("guest runtime not implemented yet")]
    Unimplemented,
}

/// Limits and settings of the runtime.
#[derive(Clone, Debug)]
pub struct Config {
    /// Wall-clock budget of one guest call.
    pub deadline: Duration,
    /// Cap on the guest's linear memory, in bytes.
    pub memory_limit: usize,
    /// Optional fuel budget per call.
    pub fuel: Option<u64>,
    /// Where precompiled guests are cached; `None` disables the disk cache.
    pub cache_dir: Option<PathBuf>,
    /// `(apiVersion, kind)` pairs a guest may emit.
    pub allowed_kinds: Vec<(String, String)>,
    /// Cap on the total size of one call's output, in bytes.
    pub max_output_bytes: usize,
}

impl Default for Config {
    /// PLACEHOLDER defaults (controller branch), replaced by the guest-runtime branch.
    fn default() -> Self {
        Self {
            deadline: Duration::from_millis(100),
            memory_limit: 64 << 20,
            fuel: None,
            cache_dir: None,
            allowed_kinds: vec![
                ("apps/v1".into(), "Deployment".into()),
                ("v1".into(), "Service".into()),
            ],
            max_output_bytes: 1 << 20,
        }
    }
}

/// PLACEHOLDER (controller branch): the embedded default guest, provided by the guest-runtime branch.
pub fn default_guest() -> &'static [u8] {
    &[]
}

/// One object a guest wants to exist, before the host stamps ownership.
#[derive(Clone, Debug, PartialEq)]
pub struct DesiredObject {
    /// e.g. `apps/v1`.
    pub api_version: String,
    /// e.g. `Deployment`.
    pub kind: String,
    /// Object name (DNS-1123).
    pub name: String,
    /// The full object as JSON (validated).
    pub body: serde_json::Value,
}

/// The process-wide runtime: one engine, a compile cache. Cheap to clone.
#[derive(Clone)]
pub struct Runtime {}

impl Runtime {
    /// Builds the engine.
    pub fn new(_config: Config) -> Result<Self, Error> {
        Err(Error::Unimplemented)
    }

    /// Loads (compiles or fetches from cache) and pre-links a guest component.
    pub fn load(&self, _wasm: &[u8]) -> Result<Policy, Error> {
        Err(Error::Unimplemented)
    }
}

/// A loaded guest, ready to be called. Cheap to clone.
#[derive(Clone)]
pub struct Policy {}

impl Policy {
    /// `sha256:<hex>` of the guest's bytes.
    pub fn digest(&self) -> &str {
        ""
    }

    /// Renders an AppService into validated desired objects, in a fresh sandbox, off the async runtime.
    pub async fn render(&self, _app: &AppService) -> Result<Vec<DesiredObject>, Error> {
        Err(Error::Unimplemented)
    }
}

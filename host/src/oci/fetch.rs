//! A guest by reference: from the on-disk cache when it holds it, else pulled from the registry
//! (and cached). What the guest source and the CLI call.

use std::sync::Arc;

use tracing::{info, warn};

use super::cache::Cache;
use super::{Error, Pinned, Registry};

/// Where a fetched guest came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The on-disk cache: the registry was not asked.
    Cache,
    /// The registry.
    Registry,
}

/// A verified component.
#[derive(Clone, Debug)]
pub struct Fetched {
    /// The component.
    pub wasm: Arc<[u8]>,
    /// Where it came from.
    pub origin: Origin,
}

/// The registry and the cache in front of it.
pub struct Fetcher {
    registry: Registry,
    cache: Option<Cache>,
}

impl Fetcher {
    /// Fetches through `cache`, when there is one.
    pub fn new(registry: Registry, cache: Option<Cache>) -> Self {
        Self { registry, cache }
    }

    /// The component `reference` pins. A failure to write the cache only costs a pull next
    /// time; it is logged, not returned.
    pub async fn fetch(&self, reference: &Pinned) -> Result<Fetched, Error> {
        if let Some(hit) = self.cache.as_ref().and_then(|c| c.get(reference)) {
            return Ok(Fetched {
                wasm: hit.wasm.into(),
                origin: Origin::Cache,
            });
        }
        let pulled = self.registry.pull(reference).await?;
        info!(reference = %reference, bytes = pulled.wasm.len(), "pulled guest from the registry");
        if let Some(cache) = &self.cache
            && let Err(err) = cache.put(reference, &pulled)
        {
            warn!(error = %crate::error_chain(&err), "failed to cache the pulled guest");
        }
        Ok(Fetched {
            wasm: pulled.wasm.into(),
            origin: Origin::Registry,
        })
    }

    /// The registry client, for pushes.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }
}

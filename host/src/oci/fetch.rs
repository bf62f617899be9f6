//! A guest by reference: from the on-disk cache when it holds it, else pulled from the registry
//! (and cached). What the guest source and the CLI call.
//!
//! Credentials can be rotated without a restart: when the registry refuses a pull, the fetcher
//! builds its client again from where the credentials live ([`Refresh`], the operator's Secret)
//! and tries once more. Nothing is re-read while pulls succeed.

use std::sync::{Arc, RwLock};

use futures::future::BoxFuture;
use tracing::{info, warn};

use super::cache::Cache;
use super::client::Options;
use super::{Credentials, Error, Pinned, Registry};

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

/// Builds the registry client again with the current credentials (for example from a Secret
/// that was rotated).
pub type Refresh = Box<dyn Fn() -> BoxFuture<'static, Result<Registry, Error>> + Send + Sync>;

/// The registry and the cache in front of it.
pub struct Fetcher {
    registry: RwLock<Arc<Registry>>,
    cache: Option<Cache>,
    refresh: Option<Refresh>,
}

impl Fetcher {
    /// Fetches through `cache`, when there is one.
    pub fn new(registry: Registry, cache: Option<Cache>) -> Self {
        Self {
            registry: RwLock::new(Arc::new(registry)),
            cache,
            refresh: None,
        }
    }

    /// A fetcher whose credentials are those of Secret `namespace/name` (type
    /// `kubernetes.io/dockerconfigjson`): read now, and again when the registry refuses a pull,
    /// so a rotated Secret is taken without a restart. `options.credentials` is ignored.
    pub async fn from_secret(
        client: &kube::Client,
        namespace: &str,
        name: &str,
        options: Options,
        cache: Option<Cache>,
    ) -> Result<Self, Error> {
        let (client, namespace, name) = (client.clone(), namespace.to_owned(), name.to_owned());
        let build = move || {
            let (client, namespace, name) = (client.clone(), namespace.clone(), name.clone());
            let mut options = options.clone();
            Box::pin(async move {
                options.credentials = Credentials::from_secret(&client, &namespace, &name).await?;
                Registry::new(options)
            }) as BoxFuture<'static, _>
        };
        let registry = build().await?;
        Ok(Self::new(registry, cache).with_refresh(Box::new(build)))
    }

    /// After a refusal, builds the registry client again with `refresh` and tries once more.
    #[must_use]
    pub fn with_refresh(mut self, refresh: Refresh) -> Self {
        self.refresh = Some(refresh);
        self
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
        let pulled = match self.registry().pull(reference).await {
            Err(Error::Unauthorized { .. }) if self.refresh.is_some() => {
                self.refreshed().await?.pull(reference).await?
            }
            other => other?,
        };
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

    fn registry(&self) -> Arc<Registry> {
        self.registry
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The registry client built again by [`Fetcher::with_refresh`]'s function, now in use.
    async fn refreshed(&self) -> Result<Arc<Registry>, Error> {
        let refresh = self.refresh.as_ref().expect("checked by the caller");
        info!("the registry refused access; reading the registry credentials again");
        let registry = Arc::new(refresh().await?);
        *self
            .registry
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = registry.clone();
        Ok(registry)
    }
}

//! The operator assembled from its parts, one way for every caller: `app-operator run`, the e2e
//! harness and the benchmarks build it with [`Operator::builder`] and run it with
//! [`Operator::run`].
//!
//! The parts: a [`guest::Runtime`] and the base guest, loaded into the [`swap::Guests`] in force;
//! optionally the guest ConfigMap [`swap::source::Source`] that swaps them; and the
//! [`controller`], sharing one client, one [`Metrics`] and one [`Readiness`]. What stays with the
//! caller is what differs between a process and a test: the client's construction, the HTTP
//! servers and leader election.

use std::future::Future;
use std::sync::Arc;

use tokio::task::JoinHandle;
use tracing::info;

use crate::controller;
use crate::guest;
use crate::metrics::Metrics;
use crate::oci;
use crate::readiness::Readiness;
use crate::swap::{self, source::Source};
use crate::{Error, Result};

/// Sets up an [`Operator`]: start with [`Operator::builder`], end with [`Builder::build`].
pub struct Builder {
    client: kube::Client,
    runtime: guest::Runtime,
    base: Arc<[u8]>,
    controller: controller::Config,
    source: Option<swap::source::Config>,
    fetcher: Option<oci::Fetcher>,
    metrics: Metrics,
    readiness: Arc<Readiness>,
}

impl Builder {
    /// The base guest's component: what renders when no ConfigMap names a guest. Default: the
    /// embedded default guest.
    #[must_use]
    pub fn base_guest(mut self, wasm: impl Into<Arc<[u8]>>) -> Self {
        self.base = wasm.into();
        self
    }

    /// The controller's settings (namespace, concurrency, resync, settle window, reporter).
    /// Default: [`controller::Config::default`], every namespace.
    #[must_use]
    pub fn controller(mut self, config: controller::Config) -> Self {
        self.controller = config;
        self
    }

    /// Reads guests from the ConfigMap `config` names (validated, canaried and rolled back as
    /// [`swap::source`] describes). Default: none; the base guest renders every AppService.
    #[must_use]
    pub fn guest_source(mut self, config: swap::source::Config) -> Self {
        self.source = Some(config);
        self
    }

    /// Fetches the ConfigMap's guests given by reference with `fetcher` (its credentials, CA
    /// and cache). Default: anonymous pulls, no cache.
    #[must_use]
    pub fn fetcher(mut self, fetcher: oci::Fetcher) -> Self {
        self.fetcher = Some(fetcher);
        self
    }

    /// Records into `metrics` (e.g. registered on the registry `/metrics` serves). Default: a
    /// set registered nowhere.
    #[must_use]
    pub fn metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// Reports to `readiness` (what `/readyz` answers). Default: a fresh one.
    #[must_use]
    pub fn readiness(mut self, readiness: Arc<Readiness>) -> Self {
        self.readiness = readiness;
        self
    }

    /// Loads the base guest and wires the parts; nothing runs until [`Operator::run`].
    pub async fn build(self) -> Result<Operator> {
        let Self {
            client,
            runtime,
            base,
            controller,
            source,
            fetcher,
            metrics,
            readiness,
        } = self;
        let guests = swap::Guests::new(runtime.load(base.clone()).await?);
        let source = source.map(|config| {
            let source = Source::new(
                client.clone(),
                runtime,
                base,
                guests.clone(),
                metrics.clone(),
                controller.reporter(),
                config,
            )
            .with_readiness(readiness.clone());
            match fetcher {
                Some(fetcher) => source.with_fetcher(fetcher),
                None => source,
            }
        });
        let current = guests.current();
        info!(digest = current.stable.digest(), "guest loaded");
        let canary = current.canary.as_ref().map(|c| c.policy.digest());
        metrics.guests_active(current.stable.digest(), canary);
        readiness.guest_loaded();
        Ok(Operator {
            client,
            guests,
            metrics,
            readiness,
            controller,
            source,
        })
    }
}

/// The operator, built and not yet running.
pub struct Operator {
    client: kube::Client,
    guests: swap::Guests,
    metrics: Metrics,
    readiness: Arc<Readiness>,
    controller: controller::Config,
    source: Option<Source>,
}

impl Operator {
    /// A builder of the operator that talks to the cluster through `client` and runs its guests
    /// on `runtime`.
    pub fn builder(client: kube::Client, runtime: guest::Runtime) -> Builder {
        Builder {
            client,
            runtime,
            base: guest::default_guest().into(),
            controller: controller::Config::default(),
            source: None,
            fetcher: None,
            metrics: Metrics::default(),
            readiness: Arc::new(Readiness::default()),
        }
    }

    /// The guests in force, shared with the running operator.
    pub fn guests(&self) -> &swap::Guests {
        &self.guests
    }

    /// The metrics it records.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// What `/readyz` answers for it.
    pub fn readiness(&self) -> &Arc<Readiness> {
        &self.readiness
    }

    /// Runs until `stop` completes: first the guests in force are restored from the ConfigMap's
    /// record (waiting, if need be, for a registry that is down), then the ConfigMap source and
    /// the controller run side by side. The reconciliations in flight finish before it returns.
    ///
    /// Dropping the future (e.g. aborting its task) stops both: the source runs on a task of its
    /// own that is aborted with it.
    pub async fn run<S>(self, stop: S) -> Result<()>
    where
        S: Future<Output = ()> + Clone + Send + Sync + 'static,
    {
        let source = match self.source {
            Some(mut source) => {
                tokio::select! {
                    synced = source.sync_once() => synced.map_err(Error::GuestSource)?,
                    () = stop.clone() => return Ok(()),
                }
                Some(AbortOnDrop(tokio::spawn(source.run(stop.clone()))))
            }
            None => None,
        };
        controller::run(
            self.client,
            self.guests,
            self.metrics,
            self.readiness,
            self.controller,
            stop,
        )
        .await?;
        if let Some(mut source) = source {
            // NB: the source stops on the same signal; it returns nothing to report.
            let _ = (&mut source.0).await;
        }
        Ok(())
    }
}

/// A task aborted when this is dropped.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

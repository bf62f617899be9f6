//! Leader election on a `coordination.k8s.io` Lease: only the holder runs the controller.
//!
//! A replica waits as a standby until it holds the Lease, then runs the controller until the
//! shutdown signal or until it loses the Lease. Losing it (another replica took it, or a renewal
//! failed) stops the controller and ends the process with [`Error::Lost`], so that a replica never
//! reconciles without holding the Lease; the Pod's restart makes it a standby again. On a
//! graceful shutdown the Lease is released, so a standby takes over at once.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use kube::Client;
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder, LeaseManagerError};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::consts::{FIELD_MANAGER, LEADER_LEASE};
use crate::server::Readiness;

/// Pause between attempts after a failed Lease read or write while standing by.
const RETRY: Duration = Duration::from_secs(2);

/// Why leader election failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Lease could not be read or created.
    #[error("failed to set up leader election on Lease {namespace}/{name}")]
    Setup {
        /// Namespace of the Lease.
        namespace: String,
        /// Name of the Lease.
        name: String,
        /// What the API server said.
        #[source]
        source: LeaseManagerError,
    },
    /// The replica lost the Lease while leading; it stopped reconciling.
    #[error("lost leadership of Lease {namespace}/{name}; stopped reconciling")]
    Lost {
        /// Namespace of the Lease.
        namespace: String,
        /// Name of the Lease.
        name: String,
    },
}

/// The stop signal handed to the leader's work: completes on shutdown or on losing the Lease.
pub type Stop = Shared<BoxFuture<'static, ()>>;

/// How a replica takes part in leader election.
#[derive(Clone, Debug)]
pub struct Config {
    /// Name of the Lease.
    pub lease_name: String,
    /// Namespace of the Lease: the operator's own.
    pub namespace: String,
    /// This replica's identity, unique among the replicas (the Pod name in a cluster).
    pub identity: String,
    /// How long the Lease stays valid after the holder's last renewal; a standby takes over at
    /// most this long after the leader stops renewing.
    pub lease_duration: Duration,
    /// The holder renews this long before the Lease expires.
    pub renew_grace: Duration,
}

impl Config {
    /// Defaults for `namespace`: Lease [`LEADER_LEASE`], 15 s duration, renewed 5 s before expiry,
    /// identity from [`default_identity`].
    pub fn new(namespace: impl Into<String>) -> Self {
        Self {
            lease_name: LEADER_LEASE.to_owned(),
            namespace: namespace.into(),
            identity: default_identity(),
            lease_duration: Duration::from_secs(15),
            renew_grace: Duration::from_secs(5),
        }
    }
}

/// `$POD_NAME` when set (unique per Pod), else `<$HOSTNAME or app-operator>-<pid>`.
pub fn default_identity() -> String {
    if let Some(pod) = std::env::var("POD_NAME").ok().filter(|s| !s.is_empty()) {
        return pod;
    }
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| FIELD_MANAGER.to_owned());
    format!("{host}-{}", std::process::id())
}

/// Registers `app_operator_leader` (1 while this replica holds the Lease) in `registry`.
pub fn register(registry: &mut Registry) -> Gauge {
    let gauge = Gauge::default();
    registry.register(
        "leader",
        "1 while this replica holds the leader Lease and reconciles, else 0",
        gauge.clone(),
    );
    gauge
}

/// Runs `lead` only while this replica holds the Lease; see the module docs.
///
/// `lead` receives a stop signal that completes on `shutdown` or on losing the Lease; it must
/// stop reconciling when it completes. While standing by, `readiness` reports a standby and
/// `leader` is 0. Returns `Ok` after `shutdown`, or [`Error::Lost`] after losing the Lease.
pub async fn run<S, L, F>(
    client: Client,
    config: Config,
    readiness: Arc<Readiness>,
    leader: Gauge,
    shutdown: S,
    lead: L,
) -> crate::Result<()>
where
    S: Future<Output = ()> + Clone + Send + Sync + Unpin + 'static,
    L: FnOnce(Stop) -> F,
    F: Future<Output = crate::Result<()>>,
{
    let lost = || Error::Lost {
        namespace: config.namespace.clone(),
        name: config.lease_name.clone(),
    };
    let manager = Arc::new(build(client, &config).await?);
    readiness.set_standby(true);
    info!(identity = %config.identity, lease = %config.lease_name, namespace = %config.namespace, "standing by for the leader Lease");
    tokio::select! {
        () = acquire(&manager) => {}
        () = shutdown.clone() => {
            readiness.set_standby(false);
            return Ok(());
        }
    }
    readiness.set_standby(false);
    leader.set(1);
    info!(identity = %config.identity, "acquired the leader Lease; reconciling");

    let (lost_tx, mut lost_rx) = watch::channel(false);
    let keeper = {
        let manager = manager.clone();
        tokio::spawn(async move {
            hold(&manager).await;
            let _ = lost_tx.send(true);
        })
    };
    let stop = {
        let mut lost_rx = lost_rx.clone();
        let lost = async move {
            let _ = lost_rx.wait_for(|lost| *lost).await;
        };
        futures::future::select(shutdown, lost.boxed())
            .map(|_| ())
            .boxed()
            .shared()
    };
    let result = lead(stop).await;
    leader.set(0);
    keeper.abort();
    if *lost_rx.borrow_and_update() {
        return Err(crate::Error::Leader(lost()));
    }
    // NB: released only after the controller stopped, so two replicas never reconcile at once.
    match manager.release().await {
        Ok(()) => info!("released the leader Lease"),
        Err(err) => warn!(error = %crate::error_chain(&err), "failed to release the leader Lease"),
    }
    result
}

async fn build(client: Client, config: &Config) -> Result<LeaseManager, Error> {
    LeaseManagerBuilder::new(client, &config.lease_name)
        .with_namespace(&config.namespace)
        .with_identity(&config.identity)
        // NB: one field manager per replica, as the crate asks.
        .with_field_manager(format!("{FIELD_MANAGER}-{}", config.identity))
        .with_duration(config.lease_duration.as_secs().max(2))
        .with_grace(
            config
                .renew_grace
                .as_secs()
                .clamp(1, config.lease_duration.as_secs().max(2) - 1),
        )
        .build()
        .await
        .map_err(|source| Error::Setup {
            namespace: config.namespace.clone(),
            name: config.lease_name.clone(),
            source,
        })
}

/// Completes once this replica holds the Lease; API errors are logged and retried.
async fn acquire(manager: &LeaseManager) {
    loop {
        match manager.changed().await {
            Ok(true) => return,
            Ok(false) => {}
            Err(err) => {
                warn!(error = %crate::error_chain(&err), "leader election failed; retrying");
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}

/// Keeps renewing the Lease; completes when it is lost or a renewal fails.
///
/// NB: a failed renewal counts as lost: the holder cannot know whether its Lease is still
/// valid, and a standby may take it once it expires.
async fn hold(manager: &LeaseManager) {
    loop {
        match manager.changed().await {
            Ok(true) => {}
            Ok(false) => {
                warn!("the leader Lease was taken by another replica");
                return;
            }
            Err(err) => {
                warn!(error = %crate::error_chain(&err), "failed to renew the leader Lease");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_prefers_the_pod_name() {
        // NB: the only test in this crate that reads POD_NAME or HOSTNAME.
        let identity = default_identity();
        match std::env::var("POD_NAME") {
            Ok(pod) if !pod.is_empty() => assert_eq!(identity, pod),
            _ => assert!(identity.ends_with(&format!("-{}", std::process::id()))),
        }
    }

    #[test]
    fn defaults_follow_controller_runtime() {
        let config = Config::new("ops");
        assert_eq!(config.lease_name, LEADER_LEASE);
        assert_eq!(config.namespace, "ops");
        assert!(config.renew_grace < config.lease_duration);
    }
}

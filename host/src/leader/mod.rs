//! Leader election on a `coordination.k8s.io` Lease: only the holder runs the controller.
//!
//! A replica waits as a standby until it holds the Lease, then runs the controller until the
//! shutdown signal or until it loses the Lease. Losing it (another replica took it, or no renewal
//! succeeded within the renew deadline; a failed renewal is retried until then) stops the
//! controller and ends the process with [`Error::Lost`]; the Pod's restart makes it a standby
//! again. On a graceful shutdown the Lease is released, so a standby takes over at once.
//!
//! Every write of the replica's client goes through a [`Fence`], which refuses it once the last
//! confirmed renewal is older than the renew deadline: in-flight reconciles and a running guest
//! swap stop writing before a new leader can start (the timing argument is in [`fence`]).

pub mod fence;

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

pub use self::fence::Fence;
use crate::consts::{FIELD_MANAGER, LEADER_LEASE};
use crate::readiness::Readiness;

/// Pause between attempts after a failed Lease read or write while standing by.
const RETRY: Duration = Duration::from_secs(2);

/// Pause between attempts after a failed renewal while leading.
const RENEW_RETRY: Duration = Duration::from_millis(500);

/// Least margin between the renew deadline and the lease duration: see [`fence`].
pub const MIN_MARGIN: Duration = Duration::from_secs(1);

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
    /// The timings cannot fence: see [`Config::check`].
    #[error("invalid leader election timing: {0}")]
    Timing(String),
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
    /// The holder stops writing this long after its last confirmed renewal (retrying failed
    /// renewals until then); less than `lease_duration`, by at least [`MIN_MARGIN`].
    pub renew_deadline: Duration,
}

impl Config {
    /// Defaults for `namespace`: Lease [`LEADER_LEASE`], 15 s duration, renewed 5 s before expiry,
    /// a 13 s renew deadline, identity from [`default_identity`].
    pub fn new(namespace: impl Into<String>) -> Self {
        Self {
            lease_name: LEADER_LEASE.to_owned(),
            namespace: namespace.into(),
            identity: default_identity(),
            lease_duration: Duration::from_secs(15),
            renew_grace: Duration::from_secs(5),
            renew_deadline: Self::default_renew_deadline(
                Duration::from_secs(15),
                Duration::from_secs(5),
            ),
        }
    }

    /// The renew deadline for `lease` and `grace` when none is given: `lease - max(1 s, grace / 2)`
    /// in whole seconds (13 s for 15 s and 5 s): renewals are tried during the first half of the
    /// grace, and the second half is the margin of [`fence`].
    pub fn default_renew_deadline(lease: Duration, grace: Duration) -> Duration {
        lease.saturating_sub(MIN_MARGIN.max(Duration::from_secs(grace.as_secs() / 2)))
    }

    /// Checks that the renewal is due before the renew deadline (`lease - grace < deadline`, so
    /// a failed one can be retried) and that the deadline leaves the margin of [`fence`]
    /// (`deadline + MIN_MARGIN <= lease`).
    pub fn check(&self) -> Result<(), Error> {
        let (lease, grace, deadline) = (self.lease_duration, self.renew_grace, self.renew_deadline);
        if grace >= lease || lease - grace >= deadline {
            return Err(Error::Timing(format!(
                "the renewal is due {:?} after the last one, not before the renew deadline of                  {deadline:?} (lease {lease:?}, renew grace {grace:?})",
                lease.saturating_sub(grace)
            )));
        }
        if deadline + MIN_MARGIN > lease {
            return Err(Error::Timing(format!(
                "the renew deadline of {deadline:?} leaves less than {MIN_MARGIN:?} before the                  lease of {lease:?} expires for a standby"
            )));
        }
        Ok(())
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
/// `client` must carry `fence`'s layer ([`Fence::layer`]), and `fence` must have `config`'s
/// identity and renew deadline. `lead` receives a stop signal that completes on `shutdown` or on
/// losing the Lease; it must stop reconciling when it completes, and its writes are refused from
/// then on. While standing by, `readiness` reports a standby and `leader` is 0. Returns `Ok`
/// after `shutdown`, or [`Error::Lost`] after losing the Lease.
pub async fn run<S, L, F>(
    client: Client,
    config: Config,
    fence: Fence,
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
    config.check().map_err(crate::Error::Leader)?;
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
    fence.arm();
    leader.set(1);
    info!(identity = %config.identity, "acquired the leader Lease; reconciling");

    let (lost_tx, mut lost_rx) = watch::channel(false);
    let keeper = {
        let manager = manager.clone();
        let fence = fence.clone();
        tokio::spawn(async move {
            hold(&manager, &fence).await;
            fence.close();
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
    fence.close();
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

/// Keeps renewing the Lease; completes when another replica holds it, or when no renewal was
/// confirmed within the renew deadline (the fence expired). A failed renewal is retried until
/// then: the holder cannot know whether the Lease is still valid, but the fence knows how long
/// it surely is.
async fn hold(manager: &LeaseManager, fence: &Fence) {
    loop {
        tokio::select! {
            changed = manager.changed() => match changed {
                Ok(true) => {}
                Ok(false) => {
                    warn!("the leader Lease was taken by another replica");
                    return;
                }
                Err(err) => {
                    warn!(error = %crate::error_chain(&err), retry_in = ?RENEW_RETRY, "failed to renew the leader Lease; retrying until the renew deadline");
                    tokio::select! {
                        () = tokio::time::sleep(RENEW_RETRY) => {}
                        () = fence.expired() => {}
                    }
                }
            },
            () = fence.expired() => {
                warn!("no renewal of the leader Lease confirmed within the renew deadline; giving it up");
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
        config.check().expect("the defaults fence");
    }

    #[test]
    fn timing_needs_a_retry_window_and_a_margin() {
        let secs = Duration::from_secs;
        let timing = |lease, grace, deadline| Config {
            lease_duration: secs(lease),
            renew_grace: secs(grace),
            renew_deadline: secs(deadline),
            ..Config::new("ops")
        };
        timing(6, 2, 5)
            .check()
            .expect("renew at 4 s, deadline 5 s, 1 s margin");
        let err = timing(15, 2, 13)
            .check()
            .expect_err("renewal due at 13 s: no retry");
        assert!(
            err.to_string().contains("not before the renew deadline"),
            "{err}"
        );
        timing(15, 5, 14).check().expect("a 1 s margin is enough");
        for (lease, grace, deadline) in [(15, 5, 13), (6, 2, 5), (60, 20, 50)] {
            let default = Config::default_renew_deadline(secs(lease), secs(grace));
            assert_eq!(default, secs(deadline));
            timing(lease, grace, deadline)
                .check()
                .expect("the default fences");
        }
        let err = timing(15, 5, 15).check().expect_err("no margin");
        assert!(err.to_string().contains("leaves less than"), "{err}");
        assert!(
            timing(5, 5, 4).check().is_err(),
            "grace as long as the lease"
        );
    }
}

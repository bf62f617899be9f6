//! The controller: watches AppServices, owns their Deployments and Services, and keeps them in
//! sync with what the guest renders.

pub mod apply;
mod by_uid;
mod cache;
mod child;
mod echo;
mod error;
mod events;
mod per_app;
mod reconcile;
mod rendered;
mod reported;
#[cfg(test)]
mod scenario;
mod settle;
pub mod status;
mod trigger;
mod uptodate;
pub mod view;
mod watches;
mod written;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::api::ListParams;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, ResourceExt};
use tokio::sync::watch;
use tracing::{debug, info, warn};

pub use child::ChildKind;
pub use error::Error;
pub use reconcile::reconcile;

use crate::crd::AppService;
use crate::error_chain;
use crate::guest::admission;
use crate::metrics::Metrics;
use crate::namespaces;
use crate::readiness::Readiness;
use crate::swap;
use apply::Children;
use per_app::PerApp;
use watches::SyncTracker;

/// First retry delay after a failed reconcile; doubled on each further failure.
const BACKOFF_BASE: Duration = Duration::from_millis(500);
/// Longest retry delay after failed reconciles.
const BACKOFF_MAX: Duration = Duration::from_secs(300);

/// [`Config::debounce`] by default: at 1000 new AppServices, 43 % fewer reconciles and 16 %
/// less CPU than none, with every status as soon (docs/development.md).
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(500);

/// How the controller runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// Watch only this namespace; `None` watches all namespaces.
    pub namespace: Option<String>,
    /// Most reconciliations running at once.
    pub concurrency: u16,
    /// Reconcile every AppService at least this often, even without changes.
    pub resync: Duration,
    /// Name reported as the source of Events.
    pub reporter: String,
    /// Longest time the status of a rollout under way is held back, waiting for readiness, so
    /// that both become one status write; counted from when the Deployment controller has seen
    /// the spec, and never more than five times this after the change (fifteen while the
    /// Deployment controller is seen far behind; zero: write every step).
    pub status_settle: Duration,
    /// How long a reconcile request waits for more of the same AppService before it runs
    /// (kube-runtime's trailing-edge debounce; zero: at once). A new Deployment's status
    /// changes several times within a second (observed, replica set created, pods starting);
    /// each used to cost a reconcile and a guest call that wrote nothing.
    pub debounce: Duration,
}

impl Config {
    /// The Event recorder for this operator: [`Config::reporter`], and the Pod name (`POD_NAME`)
    /// as the instance.
    pub fn recorder(&self, client: &Client) -> Recorder {
        Recorder::new(client.clone(), self.reporter())
    }

    /// Who the Events say reported them: this controller, and the Pod (`POD_NAME`) if known.
    pub fn reporter(&self) -> Reporter {
        Reporter {
            controller: self.reporter.clone(),
            instance: std::env::var("POD_NAME").ok(),
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            namespace: None,
            concurrency: 16,
            resync: Duration::from_secs(600),
            reporter: "app-operator".into(),
            status_settle: Duration::from_secs(2),
            debounce: DEFAULT_DEBOUNCE,
        }
    }
}

/// What every reconciliation shares.
pub struct Context {
    /// The Kubernetes client.
    pub client: Client,
    /// The resident guests; [`swap::Guests::select`] picks the one for each AppService.
    pub guests: swap::Guests,
    /// Publishes Events on AppServices.
    pub recorder: Recorder,
    /// Prometheus metrics.
    pub metrics: Metrics,
    /// Caches of the owned children.
    pub children: Children,
    /// The Pod Security level each namespace enforces.
    pub levels: namespaces::Levels,
    /// The controller's settings.
    pub config: Config,
    /// What is remembered per AppService between reconciles (failures, held statuses, guest
    /// Events, the status written last), forgotten when it is deleted.
    per_app: Arc<PerApp>,
    /// Becomes true once every watch cache has listed its objects.
    synced: watch::Receiver<bool>,
}

impl Context {
    /// The guest that renders `app` now, and its fallback.
    pub fn select(&self, app: &AppService) -> swap::Selected {
        self.guests.select(app)
    }

    /// The Pod Security level `app`'s namespace enforces, if it sets one.
    pub fn namespace_level(&self, app: &AppService) -> Option<admission::Level> {
        self.levels.get(&app.namespace()?)
    }

    /// Whether `app`'s namespace is being deleted.
    fn namespace_terminating(&self, app: &AppService) -> bool {
        app.namespace()
            .is_some_and(|ns| self.levels.terminating(&ns))
    }

    /// Waits until the caches have listed once, so pruning sees every child.
    async fn caches_synced(&self) {
        // NB: fails only if the sender is gone, i.e. during shutdown.
        let _ = self.synced.clone().wait_for(|synced| *synced).await;
    }
}

/// Retry delay after the `attempt`-th failure in a row: 0.5 s, 1 s, 2 s, ... up to 5 minutes.
pub fn backoff(attempt: u32) -> Duration {
    let factor = 2u32.saturating_pow(attempt.saturating_sub(1).min(20));
    BACKOFF_BASE.saturating_mul(factor).min(BACKOFF_MAX)
}

/// The AppServices whose last reconcile failed, each time the API server is reachable again
/// after it was not (`unreachable_since` turns `None`), so that they are retried at once rather
/// than when their backoff, grown during the outage, runs out.
fn failed_on_return(
    unreachable_since: watch::Receiver<Option<std::time::Instant>>,
    ctx: Arc<Context>,
) -> impl Stream<Item = ObjectRef<AppService>> + Send + 'static {
    futures::stream::unfold(unreachable_since, |mut since| async move {
        loop {
            since.changed().await.ok()?;
            if since.borrow_and_update().is_none() {
                return Some(((), since));
            }
        }
    })
    .flat_map(move |()| {
        let failing = ctx.per_app.failing();
        if !failing.is_empty() {
            info!(
                count = failing.len(),
                "API server back: retrying failed reconciles now"
            );
        }
        futures::stream::iter(failing)
    })
}

/// Logs and counts a failed reconcile and schedules a retry with exponential backoff.
pub fn error_policy(app: Arc<AppService>, error: &Error, ctx: Arc<Context>) -> Action {
    let attempt = ctx.per_app.record_failure(&app);
    let delay = backoff(attempt);
    warn!(
        namespace = %app.namespace().unwrap_or_default(),
        name = %app.name_any(),
        error = %error_chain(error),
        attempt,
        retry_in = ?delay,
        "reconcile failed"
    );
    ctx.metrics.reconcile_failed(error.metric_label());
    Action::requeue(delay)
}

/// Runs the controller until `shutdown` completes, then finishes the reconciliations in flight.
///
/// `readiness` is marked synced once every watch has listed its objects. Every AppService is
/// reconciled again whenever `guests` gets a new set of guests.
pub async fn run(
    client: Client,
    guests: impl Into<swap::Guests>,
    metrics: Metrics,
    readiness: Arc<Readiness>,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> crate::Result<()> {
    let ns = config.namespace.as_deref();
    let apps: Api<AppService> = crate::scope::api(&client, ns);
    apps.list(&ListParams::default().limit(1))
        .await
        .map_err(crate::Error::listing_apps)?;

    let unreachable_since = readiness.api().subscribe();
    let tracker = SyncTracker::new(
        &["appservices", "deployments", "services", "namespaces"],
        readiness,
    );
    let per_app = Arc::new(PerApp::new(config.status_settle));
    let (app_store, app_stream) = watches::apps(
        &client,
        ns,
        tracker.clone(),
        per_app.clone(),
        metrics.clone(),
    );
    let own_writes = Arc::<echo::OwnWrites>::default();
    let (vanished, owners_of_vanished) = futures::channel::mpsc::unbounded();
    let (deployments, deployment_stream) = watches::children::<view::DeploymentView>(
        &client,
        ns,
        tracker.clone(),
        ChildKind::Deployment,
        own_writes.clone(),
        metrics.clone(),
        vanished.clone(),
    );
    let (services, service_stream) = watches::children::<view::ServiceView>(
        &client,
        ns,
        tracker.clone(),
        ChildKind::Service,
        own_writes.clone(),
        metrics.clone(),
        vanished,
    );
    let (namespace_store, namespace_stream) =
        watches::namespaces(&client, ns, tracker.clone(), metrics.clone());
    let children = Children {
        deployments,
        services,
        last_applied: Arc::default(),
        own_writes,
    };
    let recorder = config.recorder(&client);
    let (concurrency, debounce) = (config.concurrency, config.debounce);
    let guests = guests.into();
    let swapped = guests.take_trigger();
    let ctx = Arc::new(Context {
        client,
        guests,
        recorder,
        metrics,
        children,
        levels: namespaces::Levels::new(namespace_store),
        per_app,
        config,
        synced: tracker.subscribe(),
    });

    info!(concurrency, ?debounce, "controller starting");
    // NB: a namespace's enforce label changing re-renders its AppServices under the new level.
    let apps_in = app_store.clone();
    let apps_by_uid = app_store.clone();
    let mut controller = Controller::for_stream(app_stream, app_store)
        .owns_stream(deployment_stream)
        .owns_stream(service_stream)
        .watches_stream(namespace_stream, move |ns| {
            let name = ns.name_any();
            apps_in
                .state()
                .into_iter()
                .filter(|app| app.namespace().as_deref() == Some(name.as_str()))
                .map(|app| ObjectRef::from_obj(&*app))
                .collect::<Vec<_>>()
        });
    if let Some(swapped) = swapped {
        controller = controller.reconcile_all_on(swapped);
    }
    controller = controller.reconcile_on(failed_on_return(unreachable_since, ctx.clone()));
    controller = controller.reconcile_on(apps_of(owners_of_vanished, apps_by_uid));
    controller
        .with_config(
            controller::Config::default()
                .concurrency(concurrency)
                .debounce(debounce),
        )
        // NB: the watches retry on their own and pass no errors on (`watches::retried`).
        .trigger_backoff(crate::backoff::WatchBackoff::default())
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            match result {
                Ok((app, _)) => debug!(name = %app.name, "reconciled"),
                // NB: reconcile errors are logged by error_policy.
                Err(controller::Error::ReconcilerFailed(..)) => {}
                // NB: routine when an AppService goes: its children's deletions trigger it.
                Err(controller::Error::ObjectNotFound(app)) => {
                    debug!(%app, "AppService gone before its reconcile");
                }
                Err(err) => warn!(error = %error_chain(&err), "controller error"),
            }
        })
        .await;
    info!("controller stopped");
    Ok(())
}

/// The AppServices with the uids of each batch of `uids`, found in `apps`.
///
/// NB: a child deleted while its watch was away (an outage, a 410 Gone) shows only as missing
/// from the re-list, with no event: its owner's reconcile, triggered by the other children of
/// the re-list, may already have run on the cache from before it, and nothing else would
/// trigger one until the resync.
fn apps_of(
    uids: impl Stream<Item = Vec<String>> + Send + 'static,
    apps: Store<AppService>,
) -> impl Stream<Item = ObjectRef<AppService>> + Send + 'static {
    uids.flat_map(move |uids| {
        let uids: std::collections::HashSet<String> = uids.into_iter().collect();
        let owners: Vec<_> = apps
            .state()
            .iter()
            .filter(|app| app.uid().is_some_and(|uid| uids.contains(&uid)))
            .map(|app| ObjectRef::from_obj(&**app))
            .collect();
        futures::stream::iter(owners)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        assert_eq!(backoff(1), Duration::from_millis(500));
        assert_eq!(backoff(2), Duration::from_secs(1));
        assert_eq!(backoff(4), Duration::from_secs(4));
        assert_eq!(backoff(30), BACKOFF_MAX);
        assert_eq!(backoff(u32::MAX), BACKOFF_MAX);
    }
}

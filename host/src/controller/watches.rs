//! The controller's watches: AppServices, and the Deployments and Services it manages, each
//! feeding a cache and the reconcile triggers, and reporting when all have listed once.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use futures::channel::mpsc::UnboundedSender;
use futures::{Stream, StreamExt, TryStreamExt, future};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::Namespace;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{Predicate, WatchStreamExt, predicates, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tracing::{info, warn};

use super::cache::{Cache, OwnerIndex};
use super::child::ChildKind;
use super::echo::OwnWrites;
use super::per_app::PerApp;
use super::trigger::{Relevant, Triggers};
use super::view::ParsedAppService;
use crate::backoff::WatchBackoff;
use crate::crd::AppService;
use crate::error_chain;
use crate::metrics::Metrics;
use crate::readiness::Readiness;
use crate::scope::api;
use crate::stamp::managed_selector;

/// Records which watches have listed their objects once; when all have, marks the operator's
/// readiness and flips the `synced` flag reconciles wait on.
///
/// NB: this reads the watch streams instead of `Store::wait_until_ready`, because a kube-runtime
/// Store wakes only the last task that waited on it, and the controller itself waits on the
/// AppService store.
pub(super) struct SyncTracker {
    pending: Mutex<BTreeSet<&'static str>>,
    synced: watch::Sender<bool>,
    readiness: Arc<Readiness>,
}

impl SyncTracker {
    /// A tracker of the watches named in `watches`.
    pub(super) fn new(watches: &[&'static str], readiness: Arc<Readiness>) -> Arc<Self> {
        Arc::new(Self {
            pending: Mutex::new(watches.iter().copied().collect()),
            synced: watch::Sender::new(false),
            readiness,
        })
    }

    /// A receiver that becomes `true` once every watch has listed.
    pub(super) fn subscribe(&self) -> watch::Receiver<bool> {
        self.synced.subscribe()
    }

    /// An `inspect_ok` callback for watch `name`'s event stream: records the watch as listed at
    /// its first `InitDone`, and after every list returns the memory it freed ([`crate::heap`]).
    fn on_listed<K>(
        tracker: Arc<Self>,
        name: &'static str,
    ) -> impl Fn(&watcher::Event<K>) + Send + Sync + 'static {
        move |event| {
            if matches!(event, watcher::Event::InitDone) {
                // NB: a (re-)list decodes every object at once and frees most of the buffers.
                crate::heap::trim();
                tracker.listed(name);
            }
        }
    }

    fn listed(&self, name: &'static str) {
        let mut pending = self
            .pending
            .lock()
            .expect("sync tracker lock is never poisoned");
        if pending.remove(name) && pending.is_empty() {
            info!("caches synced");
            self.readiness.caches_synced();
            self.synced.send_replace(true);
        }
    }
}

/// Watch `name`'s `events`, the objects they carry counted in `metrics`, each error logged and
/// counted there and followed by a pause before the watch's next try ([`WatchBackoff`]).
fn retried<K>(
    events: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
    name: &'static str,
    metrics: Metrics,
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send {
    let delivered = metrics.watch_events(name);
    events
        .inspect_ok(move |event| {
            if let watcher::Event::Apply(_)
            | watcher::Event::InitApply(_)
            | watcher::Event::Delete(_) = event
            {
                delivered.inc();
            }
        })
        .inspect_err(move |error| {
            metrics.watch_error(name);
            warn!(watch = name, error = %error_chain(error), "watch failed; retrying");
        })
        .backoff(WatchBackoff::default())
}

/// Drops the errors [`retried`] has handled, at the end of a trigger stream.
///
/// NB: passed on, an error would make the controller pause every trigger stream at once with
/// its own backoff (client-go's, up to 30 s), which is what made recovery from an API server
/// outage take tens of seconds.
fn without_errors<T>(item: &Result<T, watcher::Error>) -> future::Ready<bool> {
    future::ready(item.is_ok())
}

/// The AppService cache and the stream of AppServices whose generation, labels or annotations
/// changed; what `per_app` remembers of an AppService is forgotten when the watch sees it go.
pub(super) fn apps(
    client: &Client,
    namespace: Option<&str>,
    tracker: Arc<SyncTracker>,
    per_app: Arc<PerApp>,
    metrics: Metrics,
) -> (
    Store<AppService>,
    impl Stream<Item = Result<AppService, watcher::Error>> + Send + 'static,
) {
    let (store, writer) = reflector::store();
    let config = watcher::Config::default().any_semantic();
    // NB: the controller never reads managedFields; they are most of a small object's size, so
    // they are not parsed ([`ParsedAppService`]).
    let events = watcher(api::<ParsedAppService>(client, namespace), config).map_ok(unparsed);
    let stream = retried(events, "appservices", metrics)
        .reflect(writer)
        .inspect_ok(per_app.on_app_event(store.clone()))
        .inspect_ok(SyncTracker::on_listed(tracker, "appservices"))
        .applied_objects()
        // NB: status writes do not bump the generation; without this filter every status write
        // would trigger another reconcile. Labels and annotations do not bump it either, but they
        // are part of what the guest renders (and labels choose the guest: a canary's selector).
        .predicate_filter(
            predicates::generation
                .combine(predicates::labels)
                .combine(predicates::annotations),
            Default::default(),
        )
        .filter(without_errors);
    (store, stream)
}

/// The AppService of each object of `event`.
fn unparsed(event: watcher::Event<ParsedAppService>) -> watcher::Event<AppService> {
    use watcher::Event;
    match event {
        Event::Apply(ParsedAppService(app)) => Event::Apply(app),
        Event::Delete(ParsedAppService(app)) => Event::Delete(app),
        Event::Init => Event::Init,
        Event::InitApply(ParsedAppService(app)) => Event::InitApply(app),
        Event::InitDone => Event::InitDone,
    }
}

/// A cache of the operator-managed children of kind `kind` (`K`), indexed by owner, and the
/// stream that keeps it, which also triggers a reconcile of the owner on the changes that can
/// matter to it ([`Triggers`]: deletions included; not the echoes of the operator's own applies,
/// `own_writes`, nor updates of nothing a reconcile reads), counted in `metrics`. After a
/// re-list, the uids of the owners of children it no longer shows (deleted while the watch was
/// away, which no event reports) go to `vanished`.
pub(super) fn children<K>(
    client: &Client,
    namespace: Option<&str>,
    tracker: Arc<SyncTracker>,
    kind: ChildKind,
    own_writes: Arc<OwnWrites>,
    metrics: Metrics,
    vanished: UnboundedSender<Vec<String>>,
) -> (
    Cache<K>,
    impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
)
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()> + Relevant,
    K: Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    let (store, writer) = reflector::store();
    let owners = OwnerIndex::default();
    let config = watcher::Config::default()
        .labels(&managed_selector())
        .any_semantic();
    let index = owners.clone();
    let triggers = Triggers::new(kind, own_writes.clone(), metrics.clone());
    let stream = retried(
        watcher(api::<K>(client, namespace), config),
        kind.plural(),
        metrics,
    )
    // NB: the views parse no managedFields ([`super::view`]).
    .reflect(writer)
    .inspect_ok(move |event| {
        let gone = index.apply_watcher_event(event);
        if !gone.is_empty() {
            info!(
                watch = kind.plural(),
                owners = gone.len(),
                "children gone from the re-list (deleted while the watch was away); reconciling their owners"
            );
            // NB: fails only once the controller, which reads the other end, has stopped.
            let _ = vanished.unbounded_send(gone);
        }
        own_writes.observe(kind, event);
    })
    .inspect_ok(SyncTracker::on_listed(tracker, kind.plural()))
    .try_filter_map(move |event| future::ready(Ok(triggers.on_event(event))))
    .filter(without_errors);
    (Cache::new(store, owners), stream)
}

/// A cache of the metadata of every namespace (or of `only`), for the Pod Security level their
/// labels enforce, and the stream that keeps it, which yields a namespace when its labels
/// change.
pub(super) fn namespaces(
    client: &Client,
    only: Option<&str>,
    tracker: Arc<SyncTracker>,
    metrics: Metrics,
) -> (
    Store<PartialObjectMeta<Namespace>>,
    impl Stream<Item = Result<PartialObjectMeta<Namespace>, watcher::Error>> + Send + 'static,
) {
    let (store, writer) = reflector::store();
    let mut config = watcher::Config::default().any_semantic();
    if let Some(name) = only {
        config = config.fields(&format!("metadata.name={name}"));
    }
    // NB: an `Api` of `PartialObjectMeta` makes metadata-only requests.
    let stream = retried(
        watcher(
            Api::<PartialObjectMeta<Namespace>>::all(client.clone()),
            config,
        ),
        "namespaces",
        metrics,
    )
    .reflect(writer)
    .inspect_ok(SyncTracker::on_listed(tracker, "namespaces"))
    .applied_objects()
    .predicate_filter(predicates::labels, Default::default())
    .filter(without_errors);
    (store, stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_only_once_every_watch_listed() {
        let readiness = Arc::new(Readiness::default());
        readiness.guest_loaded();
        let tracker = SyncTracker::new(&["a", "b"], readiness.clone());
        let synced = tracker.subscribe();
        tracker.listed("a");
        tracker.listed("a");
        assert!(!readiness.is_ready() && !*synced.borrow());
        tracker.listed("b");
        assert!(readiness.is_ready() && *synced.borrow());
    }
}

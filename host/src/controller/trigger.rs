//! Which child watch events trigger a reconcile of their owner.
//!
//! A reconcile reads of a child its [`Fingerprint`](super::uptodate::Fingerprint) (does it still
//! hold what was applied) and, of a Deployment, the rollout figures the AppService's status is made
//! of ([`super::status::hash_inputs`]). The Deployment controller updates a Deployment's status
//! more often than those change (condition reasons and timestamps, `unavailableReplicas`): at 1000
//! new AppServices, a third of the Deployment events the operator did not cause changed nothing it
//! reads. Such an event, and the echo of the operator's own apply ([`super::echo`]), updates the
//! cache but triggers no reconcile. A deletion, an object seen for the first time and every object
//! of a re-list always do.

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard};

use kube::ResourceExt;
use kube::runtime::watcher;

use super::child::ChildKind;
use super::echo::OwnWrites;
use super::status;
use super::view::{DeploymentView, ServiceView};
use crate::metrics::Metrics;

/// A child kind whose watch events [`Triggers`] sorts.
pub(super) trait Relevant: kube::Resource {
    /// False when what a reconcile reads includes the resourceVersion, which every update
    /// changes: then no update is compared, and nothing is remembered per child.
    const COMPARED: bool = true;

    /// Feeds `state` everything of this child a reconcile of its owner reads.
    fn hash_relevant(&self, state: &mut impl Hasher);
}

impl Relevant for DeploymentView {
    fn hash_relevant(&self, state: &mut impl Hasher) {
        self.fingerprint.hash(state);
        status::hash_inputs(self, state);
    }
}

impl Relevant for ServiceView {
    // NB: a Service's fingerprint covers its resourceVersion (`Fingerprint::of`).
    const COMPARED: bool = false;

    fn hash_relevant(&self, state: &mut impl Hasher) {
        self.fingerprint.hash(state);
    }
}

/// Sorts the watch events of one child kind into those that trigger a reconcile of the owner
/// and those that do not, remembering what each child last showed.
pub(super) struct Triggers {
    kind: ChildKind,
    own_writes: Arc<OwnWrites>,
    metrics: Metrics,
    /// The hash of what a reconcile reads of each child, as its last event showed it, by the
    /// hash of the child's namespace and name. NB: two children whose names hash alike share
    /// a slot, and then each one's update compares with the other's hash, which differs (it
    /// covers the uid): an event is passed on, never dropped, for it.
    seen: Mutex<HashMap<u64, u64>>,
}

impl Triggers {
    /// The triggers of the children of kind `kind`, whose echoes `own_writes` knows; what is
    /// dropped is counted in `metrics`.
    pub(super) fn new(kind: ChildKind, own_writes: Arc<OwnWrites>, metrics: Metrics) -> Self {
        Self {
            kind,
            own_writes,
            metrics,
            seen: Mutex::default(),
        }
    }

    /// The child of `event` when it triggers a reconcile of its owner: not an echo of this
    /// process's own apply, and, for an update, with something a reconcile reads changed.
    pub(super) fn on_event<K: Relevant>(&self, event: watcher::Event<K>) -> Option<K> {
        let (obj, update) = match event {
            watcher::Event::Apply(obj) => (obj, true),
            watcher::Event::InitApply(obj) => (obj, false),
            watcher::Event::Delete(obj) => {
                self.seen().remove(&slot(&obj));
                return Some(obj);
            }
            watcher::Event::Init => {
                // NB: the re-list shows every child again, and each triggers a reconcile.
                self.seen().clear();
                return None;
            }
            watcher::Event::InitDone => return None,
        };
        let key = (
            self.kind,
            obj.namespace().unwrap_or_default(),
            obj.name_any(),
        );
        if self
            .own_writes
            .is_echo(&key, obj.resource_version().as_deref())
        {
            self.metrics.child_echo_skipped();
            self.remember(&obj);
            return None;
        }
        if self.remember(&obj) && update {
            self.metrics.child_event_unchanged();
            return None;
        }
        Some(obj)
    }

    /// Records what a reconcile reads of `obj`; true when that is what its last event showed.
    fn remember<K: Relevant>(&self, obj: &K) -> bool {
        if !K::COMPARED {
            return false;
        }
        let mut hasher = DefaultHasher::new();
        obj.hash_relevant(&mut hasher);
        let relevant = hasher.finish();
        self.seen().insert(slot(obj), relevant) == Some(relevant)
    }

    fn seen(&self) -> MutexGuard<'_, HashMap<u64, u64>> {
        self.seen.lock().expect("trigger lock is never poisoned")
    }
}

/// The slot of `obj` in [`Triggers::seen`]: a hash of its namespace and name.
fn slot(obj: &impl kube::Resource) -> u64 {
    let meta = obj.meta();
    let mut hasher = DefaultHasher::new();
    (&meta.namespace, &meta.name).hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn deployment(version: &str, ready: i32, reason: &str) -> DeploymentView {
        serde_json::from_value(deployment_json(version, ready, reason))
            .expect("a Deployment parses")
    }

    fn deployment_json(version: &str, ready: i32, reason: &str) -> serde_json::Value {
        json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "u1", "generation": 1,
                         "resourceVersion": version, "labels": {"app": "web"}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}},
            "status": {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1,
                       "readyReplicas": ready, "availableReplicas": ready,
                       "conditions": [{"type": "Progressing", "status": "True",
                                       "reason": reason}]}
        })
    }

    fn triggers() -> (Triggers, Metrics) {
        let metrics = Metrics::default();
        let kind = ChildKind::Deployment;
        let triggers = Triggers::new(kind, Arc::new(OwnWrites::default()), metrics.clone());
        (triggers, metrics)
    }

    fn triggered(triggers: &Triggers, event: watcher::Event<DeploymentView>) -> bool {
        triggers.on_event(event).is_some()
    }

    #[test]
    fn an_update_triggers_only_when_something_a_reconcile_reads_changed() {
        use watcher::Event::{Apply, Delete};
        let (triggers, metrics) = triggers();
        assert!(
            triggered(&triggers, Apply(deployment("1", 0, "A"))),
            "first seen"
        );
        assert!(
            !triggered(&triggers, Apply(deployment("2", 0, "B"))),
            "a condition reason the status does not read"
        );
        assert!(
            triggered(&triggers, Apply(deployment("3", 1, "B"))),
            "ready"
        );
        let mut labelled = deployment_json("4", 1, "B");
        labelled["metadata"]["labels"]["team"] = "x".into();
        let labelled: DeploymentView = serde_json::from_value(labelled).expect("parses");
        assert!(triggered(&triggers, Apply(labelled)), "a label someone set");
        assert!(triggered(&triggers, Delete(deployment("5", 1, "B"))));
        assert!(
            triggered(&triggers, Apply(deployment("6", 1, "B"))),
            "re-created: first seen again"
        );
        assert_eq!(metrics.child_events_unchanged.get(), 1);
    }

    #[test]
    fn every_object_of_a_re_list_triggers() {
        use watcher::Event::{Apply, Init, InitApply, InitDone};
        let (triggers, _) = triggers();
        assert!(triggered(&triggers, Apply(deployment("1", 1, "A"))));
        assert!(!triggered(&triggers, Init));
        assert!(triggered(&triggers, InitApply(deployment("1", 1, "A"))));
        assert!(!triggered(&triggers, InitDone));
        assert!(
            !triggered(&triggers, Apply(deployment("2", 1, "B"))),
            "after the re-list, updates are compared with what it showed"
        );
    }

    #[test]
    fn every_service_update_triggers_and_none_is_remembered() {
        let metrics = Metrics::default();
        let kind = ChildKind::Service;
        let triggers = Triggers::new(kind, Arc::new(OwnWrites::default()), metrics.clone());
        let service = |version: &str| -> ServiceView {
            serde_json::from_value(json!({
                "metadata": {"name": "web", "namespace": "ns", "resourceVersion": version}
            }))
            .expect("a Service parses")
        };
        for version in ["1", "2", "2"] {
            let event = watcher::Event::Apply(service(version));
            assert!(triggers.on_event(event).is_some(), "version {version}");
        }
        assert!(triggers.seen().is_empty());
        assert_eq!(metrics.child_events_unchanged.get(), 0);
    }

    #[test]
    fn an_echo_of_the_operators_own_apply_triggers_nothing() {
        use watcher::Event::Apply;
        let (triggers, metrics) = triggers();
        let key = (ChildKind::Deployment, "ns".to_owned(), "web".to_owned());
        let written = super::super::echo::Written {
            version: "7".into(),
            uid: "u1".into(),
            before: None,
            object: Arc::new(deployment("7", 0, "A")),
        };
        triggers.own_writes.wrote(key, written);
        assert!(!triggered(&triggers, Apply(deployment("7", 0, "A"))));
        assert_eq!(metrics.child_echoes_skipped.get(), 1);
        assert!(triggered(&triggers, Apply(deployment("8", 1, "A"))));
    }
}

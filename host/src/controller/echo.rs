//! Recognising a child's watch event that only echoes the operator's own apply.
//!
//! Every apply that changes a child comes back through the child watch as an event carrying the
//! resourceVersion the apply returned. Reconciling the owner for it would render and compare
//! again for nothing, so the controller drops it. Any other version (a status update by the
//! Deployment controller, someone's edit, a deletion) still triggers a reconcile.
//!
//! The watch and the apply use different connections, so an echo can arrive before the apply's
//! response is read. The versions the watch shows while an apply of the child is in flight
//! ([`OwnWrites::begin`]) are kept, and a write whose echo has already passed is not recorded:
//! no recorded write outlives its echo. A re-list ([`OwnWrites::observe`]) forgets the writes of
//! its kind, since it may not show them again; so does a deletion of the child.
//!
//! A recorded write also tells [`super::apply`] that the cache is behind the operator's own
//! write: a child missing from the cache is applied on the uid the write returned instead of
//! being created again ([`OwnWrites::unseen`]), and the same body is not applied a second time
//! while the cache still shows what was there before the write ([`OwnWrites::pending`]).

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use kube::runtime::watcher;
use kube::{Resource, ResourceExt};

use super::child::{ChildKey, ChildKind};

/// The writes of this process that the child watches have not echoed yet, and the versions the
/// watches showed for children whose apply is in flight.
#[derive(Debug, Default)]
pub struct OwnWrites(Mutex<State>);

#[derive(Debug, Default)]
struct State {
    written: HashMap<ChildKey, Written>,
    /// Versions the watch showed for each child while an apply of it was in flight.
    in_flight: HashMap<ChildKey, Vec<String>>,
}

/// One write of this process that the child watch has not echoed yet.
#[derive(Clone)]
pub struct Written {
    /// The resourceVersion the write returned.
    pub version: String,
    /// The uid of the child written.
    pub uid: String,
    /// The resourceVersion the cache showed before the write; `None` when the write created
    /// the child.
    pub before: Option<String>,
    /// The child as the write returned it (a `Deployment` or `Service`).
    pub object: Arc<dyn Any + Send + Sync>,
}

impl fmt::Debug for Written {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Written")
            .field("version", &self.version)
            .field("uid", &self.uid)
            .field("before", &self.before)
            .finish_non_exhaustive()
    }
}

/// An apply of one child in flight ([`OwnWrites::begin`]); dropping it ends the flight.
pub struct Flight<'a> {
    writes: &'a OwnWrites,
    key: ChildKey,
}

impl Drop for Flight<'_> {
    fn drop(&mut self) {
        self.writes.lock().in_flight.remove(&self.key);
    }
}

impl OwnWrites {
    /// Marks an apply of child `key` as in flight, so that an echo arriving before its
    /// response is known as such when [`OwnWrites::wrote`] records the write.
    pub fn begin(&self, key: &ChildKey) -> Flight<'_> {
        self.lock().in_flight.insert(key.clone(), Vec::new());
        Flight {
            writes: self,
            key: key.clone(),
        }
    }

    /// Records the write to child `key`, unless the watch already showed its version while the
    /// apply was in flight (its echo has passed).
    pub fn wrote(&self, key: ChildKey, written: Written) {
        let mut state = self.lock();
        let seen = state.in_flight.get_mut(&key).map(std::mem::take);
        if seen.is_some_and(|seen| seen.contains(&written.version)) {
            state.written.remove(&key);
        } else {
            state.written.insert(key, written);
        }
    }

    /// The write to child `key` whose echo has not arrived yet, if any: the cache does not
    /// show it yet.
    pub fn unseen(&self, key: &ChildKey) -> Option<Written> {
        self.lock().written.get(key).cloned()
    }

    /// The child `key` as this process's last write returned it, when the cache still shows
    /// what was there before that write: not cached (`cached_version` `None`) for a write that
    /// created it, else the version the write started from.
    pub fn pending<K: Send + Sync + 'static>(
        &self,
        key: &ChildKey,
        cached_version: Option<&str>,
    ) -> Option<Arc<K>> {
        let state = self.lock();
        let written = state.written.get(key)?;
        if written.before.as_deref() != cached_version {
            return None;
        }
        written.object.clone().downcast::<K>().ok()
    }

    /// True when `version` of child `key` is the echo of this process's last write to it, which
    /// it then forgets.
    pub fn is_echo(&self, key: &ChildKey, version: Option<&str>) -> bool {
        let mut state = self.lock();
        if let (Some(seen), Some(version)) = (state.in_flight.get_mut(key), version) {
            seen.push(version.to_owned());
        }
        match (state.written.get(key), version) {
            (Some(written), Some(version)) if written.version == version => {
                state.written.remove(key);
                true
            }
            _ => false,
        }
    }

    /// Forgets what a child watch event makes stale: every write of `kind` when the watch
    /// re-lists (a re-list shows only what exists now), the child's write when it is deleted.
    pub fn observe<K>(&self, kind: ChildKind, event: &watcher::Event<K>)
    where
        K: Resource,
    {
        match event {
            watcher::Event::Init => self.lock().written.retain(|key, _| key.0 != kind),
            watcher::Event::Delete(obj) => {
                self.forget(&(kind, obj.namespace().unwrap_or_default(), obj.name_any()));
            }
            watcher::Event::Apply(_) | watcher::Event::InitApply(_) | watcher::Event::InitDone => {}
        }
    }

    /// Forgets child `key`, e.g. after deleting it.
    pub fn forget(&self, key: &ChildKey) {
        self.lock().written.remove(key);
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().expect("own-writes lock is never poisoned")
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Service;

    use super::*;

    fn key() -> ChildKey {
        (ChildKind::Deployment, "ns".into(), "web".into())
    }

    fn written(version: &str, before: Option<&str>) -> Written {
        Written {
            version: version.into(),
            uid: "u".into(),
            before: before.map(Into::into),
            object: Arc::new(service(version)),
        }
    }

    fn service(version: &str) -> Service {
        let mut service = Service::default();
        service.metadata.name = Some("web".into());
        service.metadata.namespace = Some("ns".into());
        service.metadata.resource_version = Some(version.into());
        service
    }

    #[test]
    fn only_the_version_the_apply_returned_is_an_echo_and_only_once() {
        let writes = OwnWrites::default();
        assert!(!writes.is_echo(&key(), Some("5")), "nothing written yet");
        writes.wrote(key(), written("5", None));
        assert_eq!(writes.unseen(&key()).map(|w| w.uid), Some("u".into()));
        assert!(!writes.is_echo(&key(), Some("6")), "someone else's version");
        assert!(!writes.is_echo(&key(), None));
        assert!(writes.is_echo(&key(), Some("5")));
        assert!(
            !writes.is_echo(&key(), Some("5")),
            "an echo is recognised once"
        );
        assert!(writes.unseen(&key()).is_none(), "the cache has seen it");
        writes.wrote(key(), written("7", Some("5")));
        writes.forget(&key());
        assert!(!writes.is_echo(&key(), Some("7")));
    }

    #[test]
    fn an_echo_that_passes_before_the_response_leaves_no_write_behind() {
        let writes = OwnWrites::default();
        let flight = writes.begin(&key());
        assert!(
            !writes.is_echo(&key(), Some("5")),
            "not known to be ours yet"
        );
        writes.wrote(key(), written("5", None));
        drop(flight);
        assert!(writes.unseen(&key()).is_none());
        assert!(writes.pending::<Service>(&key(), None).is_none());

        let flight = writes.begin(&key());
        assert!(!writes.is_echo(&key(), Some("6")), "an older event");
        writes.wrote(key(), written("7", Some("6")));
        drop(flight);
        assert!(writes.unseen(&key()).is_some(), "its echo is still to come");
        assert!(writes.is_echo(&key(), Some("7")));
    }

    #[test]
    fn the_write_is_pending_only_while_the_cache_shows_what_was_before_it() {
        let writes = OwnWrites::default();
        writes.wrote(key(), written("5", None));
        let pending = writes.pending::<Service>(&key(), None);
        assert_eq!(
            pending.and_then(|s| s.metadata.resource_version.clone()),
            Some("5".into())
        );
        assert!(writes.pending::<Service>(&key(), Some("4")).is_none());
        assert!(
            writes
                .pending::<k8s_openapi::api::apps::v1::Deployment>(&key(), None)
                .is_none(),
            "another type is never returned"
        );
        writes.wrote(key(), written("8", Some("7")));
        assert!(writes.pending::<Service>(&key(), Some("7")).is_some());
        assert!(
            writes.pending::<Service>(&key(), None).is_none(),
            "deleted since"
        );
        assert!(
            writes.pending::<Service>(&key(), Some("9")).is_none(),
            "changed since"
        );
    }

    #[test]
    fn a_relist_or_a_deletion_forgets_the_writes_it_makes_stale() {
        let writes = OwnWrites::default();
        let other = (ChildKind::Service, "ns".into(), "web".into());
        writes.wrote(key(), written("5", None));
        writes.wrote(other.clone(), written("6", None));
        writes.observe::<Service>(ChildKind::Service, &watcher::Event::Init);
        assert!(writes.unseen(&other).is_none());
        assert!(writes.unseen(&key()).is_some(), "another kind's watch");
        let deleted = service("9");
        writes.observe(ChildKind::Deployment, &watcher::Event::Delete(deleted));
        assert!(writes.unseen(&key()).is_none());
    }
}

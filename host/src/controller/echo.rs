//! Recognising a child's watch event that only echoes the operator's own apply.
//!
//! Every apply that changes a child comes back through the child watch as an event carrying the
//! resourceVersion the apply returned. Reconciling the owner for it would render and compare
//! again for nothing, so the controller drops it. Any other version (a status update by the
//! Deployment controller, someone's edit, a deletion) still triggers a reconcile.
//!
//! NB: the watch and the apply use different connections, so an echo can arrive before the
//! apply's response is read; it is then not recognised and reconciles once more, which writes
//! nothing (the child is up to date). Its recorded version stays until the child's next apply
//! or deletion: one entry per child at most.
//!
//! A write whose echo has not arrived yet also tells [`super::apply`] that a child missing from
//! the cache is the operator's own, with its uid ([`OwnWrites::unseen`]), so that it is applied
//! on that uid instead of being created again.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use super::child::ChildKey;

/// The resourceVersion each child got from the operator's last apply, until its echo arrives.
#[derive(Debug, Default)]
pub struct OwnWrites(Mutex<HashMap<ChildKey, Written>>);

/// One write of this process that the child watch has not echoed yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    /// The resourceVersion the write returned.
    pub version: String,
    /// The uid of the child written.
    pub uid: String,
}

impl OwnWrites {
    pub fn wrote(&self, key: ChildKey, version: String, uid: String) {
        self.lock().insert(key, Written { version, uid });
    }

    /// The write to child `key` whose echo has not arrived yet, if any: the cache does not
    /// show it yet.
    pub fn unseen(&self, key: &ChildKey) -> Option<Written> {
        self.lock().get(key).cloned()
    }

    pub fn is_echo(&self, key: &ChildKey, version: Option<&str>) -> bool {
        let mut writes = self.lock();
        match (writes.get(key), version) {
            (Some(written), Some(version)) if written.version == version => {
                writes.remove(key);
                true
            }
            _ => false,
        }
    }

    /// Forgets child `key`, e.g. after deleting it.
    pub fn forget(&self, key: &ChildKey) {
        self.lock().remove(key);
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<ChildKey, Written>> {
        self.0.lock().expect("own-writes lock is never poisoned")
    }
}

#[cfg(test)]
mod tests {
    use super::super::child::ChildKind;
    use super::*;

    fn key() -> ChildKey {
        (ChildKind::Deployment, "ns".into(), "web".into())
    }

    #[test]
    fn only_the_version_the_apply_returned_is_an_echo_and_only_once() {
        let writes = OwnWrites::default();
        assert!(!writes.is_echo(&key(), Some("5")), "nothing written yet");
        writes.wrote(key(), "5".into(), "u".into());
        assert_eq!(writes.unseen(&key()).map(|w| w.uid), Some("u".into()));
        assert!(!writes.is_echo(&key(), Some("6")), "someone else's version");
        assert!(!writes.is_echo(&key(), None));
        assert!(writes.is_echo(&key(), Some("5")));
        assert!(
            !writes.is_echo(&key(), Some("5")),
            "an echo is recognised once"
        );
        assert_eq!(writes.unseen(&key()), None, "the cache has seen it");
        writes.wrote(key(), "7".into(), "u".into());
        writes.forget(&key());
        assert!(!writes.is_echo(&key(), Some("7")));
    }
}

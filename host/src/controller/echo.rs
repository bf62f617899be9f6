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

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use super::child::ChildKey;

/// The resourceVersion each child got from the operator's last apply, until its echo arrives.
#[derive(Debug, Default)]
pub struct OwnWrites(Mutex<HashMap<ChildKey, String>>);

impl OwnWrites {
    /// Records that the operator's apply left child `key` at `version`.
    pub fn wrote(&self, key: ChildKey, version: String) {
        self.lock().insert(key, version);
    }

    /// True when an event of child `key` at `version` is the echo of the operator's own apply;
    /// the echo is then forgotten, so it is recognised once.
    pub fn is_echo(&self, key: &ChildKey, version: Option<&str>) -> bool {
        let mut writes = self.lock();
        match (writes.get(key), version) {
            (Some(written), Some(version)) if written == version => {
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

    fn lock(&self) -> MutexGuard<'_, HashMap<ChildKey, String>> {
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
        writes.wrote(key(), "5".into());
        assert!(!writes.is_echo(&key(), Some("6")), "someone else's version");
        assert!(!writes.is_echo(&key(), None));
        assert!(writes.is_echo(&key(), Some("5")));
        assert!(
            !writes.is_echo(&key(), Some("5")),
            "an echo is recognised once"
        );
        writes.wrote(key(), "7".into());
        writes.forget(&key());
        assert!(!writes.is_echo(&key(), Some("7")));
    }
}

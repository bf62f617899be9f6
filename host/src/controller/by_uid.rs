//! What the controller remembers of each AppService, by uid, forgotten with the AppService.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

/// A value per AppService, by uid. [`super::per_app::PerApp`] forgets an AppService's entry
/// when the AppService is deleted or a re-list no longer shows it.
#[derive(Debug)]
pub(super) struct ByUid<V>(Mutex<HashMap<String, V>>);

impl<V> Default for ByUid<V> {
    fn default() -> Self {
        Self(Mutex::default())
    }
}

impl<V> ByUid<V> {
    /// Forgets the AppService with `uid`.
    pub(super) fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }

    /// Keeps only the AppServices whose uid `keep` accepts (the others are gone).
    pub(super) fn retain(&self, keep: impl Fn(&str) -> bool) {
        self.lock().retain(|uid, _| keep(uid));
    }

    /// How many AppServices are remembered.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.lock().len()
    }

    /// The map, locked.
    pub(super) fn lock(&self) -> MutexGuard<'_, HashMap<String, V>> {
        // NB: a panic elsewhere cannot leave the map torn: entries are only inserted and
        // removed whole.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

//! Whether the operator can do its job, as `/readyz` reports it: caches synced, a guest loaded
//! and the API server answering (or, with leader election, standing by for the Lease), plus
//! notes an operator of the operator wants to read there (where the guests in force came from).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::reachability::Reachability;

/// Whether the operator can do its job, from what the parts report.
#[derive(Debug, Default)]
pub struct Readiness {
    caches_synced: AtomicBool,
    guest_loaded: AtomicBool,
    standby: AtomicBool,
    api: Reachability,
    /// Why the guests to run are not in force yet (the leader restoring them), if so.
    waiting: Mutex<Option<String>>,
    /// Notes by topic, shown by `/readyz` under the verdict.
    notes: Mutex<BTreeMap<&'static str, String>>,
}

/// What `/readyz` answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Reconciling (the leader, or the only replica).
    Ready,
    /// A guest is loaded and this replica waits for the leader Lease.
    Standby,
    /// Neither, and why.
    NotReady(String),
}

impl Readiness {
    /// Not ready until the caches are synced and a guest is loaded, nor while `api` says the API
    /// server does not answer.
    pub fn new(api: Reachability) -> Self {
        Self {
            api,
            ..Self::default()
        }
    }

    /// Whether the API server answers, as this readiness sees it.
    pub fn api(&self) -> &Reachability {
        &self.api
    }

    /// Records that every watch cache has listed its objects once.
    pub fn caches_synced(&self) {
        self.caches_synced.store(true, Ordering::Release);
    }

    /// Records that a guest is loaded and callable.
    pub fn guest_loaded(&self) {
        self.guest_loaded.store(true, Ordering::Release);
    }

    /// Records whether this replica stands by for the leader Lease (and so runs no controller).
    pub fn set_standby(&self, standby: bool) {
        self.standby.store(standby, Ordering::Release);
    }

    /// Records why the guests this replica must run are not in force yet (`None`: they are).
    /// While it is set the replica is not ready.
    pub fn set_waiting(&self, why: Option<String>) {
        *lock(&self.waiting) = why;
    }

    /// Sets (or, with `None`, clears) the note on `topic`.
    pub fn set_note(&self, topic: &'static str, note: Option<String>) {
        let mut notes = lock(&self.notes);
        match note {
            Some(note) => notes.insert(topic, note),
            None => notes.remove(topic),
        };
    }

    /// The notes, as `topic: note` lines, sorted by topic.
    pub fn notes(&self) -> Vec<String> {
        lock(&self.notes)
            .iter()
            .map(|(topic, note)| format!("{topic}: {note}"))
            .collect()
    }

    /// True while this replica stands by for the leader Lease.
    pub fn is_standby(&self) -> bool {
        self.standby.load(Ordering::Acquire)
    }

    /// True once both caches are synced and a guest is loaded, while the API server answers.
    pub fn is_ready(&self) -> bool {
        self.verdict() == Verdict::Ready
    }

    /// What `/readyz` answers.
    ///
    /// NB: a standby is ready on purpose: were it not, a rolling update of two replicas would
    /// wait forever for a new Pod that cannot lead while the old leader runs. A replica cut off
    /// from the API server is not ready, leader or not, but stays live: a restart would not
    /// bring the API server back.
    pub fn verdict(&self) -> Verdict {
        let guest = self.guest_loaded.load(Ordering::Acquire);
        if let Some(down) = self.api.unreachable_for() {
            return Verdict::NotReady(format!("API server unreachable for {} s", down.as_secs()));
        }
        if let Some(why) = lock(&self.waiting).clone() {
            return Verdict::NotReady(why);
        }
        if guest && self.caches_synced.load(Ordering::Acquire) {
            Verdict::Ready
        } else if guest && self.is_standby() {
            Verdict::Standby
        } else if guest {
            Verdict::NotReady("watch caches not synced".to_owned())
        } else {
            Verdict::NotReady("no guest loaded".to_owned())
        }
    }
}

/// The data behind `mutex`, poisoned or not (a panic elsewhere leaves it consistent).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_needs_a_guest_synced_caches_and_the_api_server() {
        let api = Reachability::default();
        let readiness = Readiness::new(api.clone());
        assert_eq!(
            readiness.verdict(),
            Verdict::NotReady("no guest loaded".into())
        );
        readiness.guest_loaded();
        readiness.set_standby(true);
        assert_eq!(readiness.verdict(), Verdict::Standby);
        readiness.set_standby(false);
        assert!(!readiness.is_ready());
        readiness.caches_synced();
        assert!(readiness.is_ready());
        api.testing_fail();
        let Verdict::NotReady(reason) = readiness.verdict() else {
            panic!("cut off from the API server, yet ready");
        };
        assert!(reason.starts_with("API server unreachable"), "{reason}");
    }

    #[test]
    fn waiting_for_the_guests_in_force_is_not_ready_and_notes_are_listed() {
        let readiness = Readiness::default();
        readiness.guest_loaded();
        readiness.caches_synced();
        readiness.set_waiting(Some("registry down".into()));
        assert_eq!(
            readiness.verdict(),
            Verdict::NotReady("registry down".into())
        );
        readiness.set_waiting(None);
        assert!(readiness.is_ready());
        readiness.set_note("guests", Some("stable sha256:1 from the cache".into()));
        readiness.set_note("candidate", Some("retrying".into()));
        assert_eq!(
            readiness.notes(),
            [
                "candidate: retrying",
                "guests: stable sha256:1 from the cache"
            ]
        );
        readiness.set_note("candidate", None);
        assert_eq!(
            readiness.notes(),
            ["guests: stable sha256:1 from the cache"]
        );
    }
}

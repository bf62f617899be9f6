//! The last set of Events each AppService's guest returned, so that a guest's Events are
//! recorded when they change, not on every reconcile.
//!
//! In memory only: after a restart (or a new leader), a guest's current Events are recorded
//! once more, and kube's recorder aggregates them into the series they belong to.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use super::by_uid::ByUid;
use crate::guest;

/// The hash of each AppService's last non-empty set of guest Events, by uid.
pub(super) type GuestEvents = ByUid<u64>;

impl GuestEvents {
    /// The Events to record now for the AppService with `uid`: all of `events` when they differ
    /// from the set its guest returned last time, none when they are the same (or empty).
    pub(super) fn changed(&self, uid: &str, events: &[guest::Event]) -> Vec<guest::Event> {
        let mut last = self.lock();
        if events.is_empty() {
            // NB: removing the entry also bounds the map to AppServices whose guest reports.
            last.remove(uid);
            return Vec::new();
        }
        let mut h = DefaultHasher::new();
        events.hash(&mut h);
        let hash = h.finish();
        match last.insert(uid.to_owned(), hash) {
            Some(previous) if previous == hash => Vec::new(),
            _ => events.to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(reason: &str) -> guest::Event {
        guest::Event {
            type_: guest::EventType::Normal,
            reason: reason.into(),
            note: "n".into(),
        }
    }

    #[test]
    fn events_are_recorded_only_when_the_set_changes() {
        let seen = GuestEvents::default();
        let a = [event("A")];
        assert_eq!(seen.changed("u1", &a), a, "first time: recorded");
        assert!(seen.changed("u1", &a).is_empty(), "same set: not again");
        assert_eq!(seen.changed("u2", &a), a, "per AppService");
        let ab = [event("A"), event("B")];
        assert_eq!(seen.changed("u1", &ab), ab, "a changed set: all of it");
        assert!(seen.changed("u1", &[]).is_empty());
        assert_eq!(
            seen.changed("u1", &a),
            a,
            "back after a render without Events"
        );
        seen.forget("u1");
        assert_eq!(seen.changed("u1", &a), a);
    }
}

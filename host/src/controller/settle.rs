//! Holding back the status of a rollout that has just started, so that "applied" and "ready"
//! reach the AppService as one status write instead of two or three.
//!
//! After the controller creates or changes a Deployment, its pods usually become ready within
//! seconds, and each step (the Deployment controller seeing the spec, pods created, pods ready)
//! would otherwise be a status write of its own. For up to the settle window the controller
//! writes no "rollout in progress" status; a ready Deployment, a failure or a stuck rollout is
//! written at once, and when the window ends the status is written whatever it is.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use kube::runtime::reflector::ObjectRef;

use crate::crd::AppService;

/// When each AppService's rollout started, while its status is held back.
#[derive(Debug)]
pub(super) struct Settling {
    window: Duration,
    started: Mutex<HashMap<ObjectRef<AppService>, Instant>>,
}

impl Settling {
    /// Holds a rollout's status back for at most `window` (zero: never).
    pub(super) fn new(window: Duration) -> Self {
        Self {
            window,
            started: Mutex::default(),
        }
    }

    /// How long to hold back the status write of `app` at `now`, if at all. `changed`: this
    /// reconcile created or changed children; `in_progress`: the status to write reports a
    /// rollout under way and nothing wrong ([`super::status::in_progress`]).
    pub(super) fn hold(
        &self,
        app: &ObjectRef<AppService>,
        changed: bool,
        in_progress: bool,
        now: Instant,
    ) -> Option<Duration> {
        let mut started = self.lock();
        if !in_progress || self.window.is_zero() {
            started.remove(app);
            return None;
        }
        if changed {
            started.entry(app.clone()).or_insert(now);
        }
        let since = *started.get(app)?;
        let left = self.window.checked_sub(now.duration_since(since));
        if left.is_none_or(|left| left.is_zero()) {
            started.remove(app);
            return None;
        }
        left
    }

    /// Forgets `app` (deleted).
    pub(super) fn forget(&self, app: &ObjectRef<AppService>) {
        self.lock().remove(app);
    }

    /// Keeps only the AppServices `keep` accepts (the others are gone).
    pub(super) fn retain(&self, keep: impl Fn(&ObjectRef<AppService>) -> bool) {
        self.lock().retain(|app, _| keep(app));
    }

    /// How many AppServices have their status held back.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<ObjectRef<AppService>, Instant>> {
        self.started
            .lock()
            .expect("settling lock is never poisoned")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app() -> ObjectRef<AppService> {
        ObjectRef::new("web").within("ns")
    }

    const WINDOW: Duration = Duration::from_secs(5);

    #[test]
    fn a_started_rollout_is_held_until_ready_or_the_window_ends() {
        let s = Settling::new(WINDOW);
        let t0 = Instant::now();
        assert_eq!(s.hold(&app(), true, true, t0), Some(WINDOW));
        let t2 = t0 + Duration::from_secs(2);
        assert_eq!(
            s.hold(&app(), false, true, t2),
            Some(Duration::from_secs(3)),
            "a status update of the Deployment is still held"
        );
        assert_eq!(
            s.hold(&app(), false, true, t0 + WINDOW),
            None,
            "window over"
        );
        assert_eq!(
            s.hold(&app(), false, true, t0 + WINDOW),
            None,
            "not held again without a new change"
        );
    }

    #[test]
    fn ready_or_failed_is_written_at_once() {
        let s = Settling::new(WINDOW);
        let t0 = Instant::now();
        assert!(s.hold(&app(), true, true, t0).is_some());
        assert_eq!(s.hold(&app(), false, false, t0), None, "ready");
        assert_eq!(
            s.hold(&app(), false, true, t0),
            None,
            "forgotten once written"
        );
        assert_eq!(s.hold(&app(), true, false, t0), None, "ready at once");
    }

    #[test]
    fn a_forgotten_app_is_held_no_more() {
        let s = Settling::new(WINDOW);
        let t0 = Instant::now();
        let other = ObjectRef::new("api").within("ns");
        assert!(s.hold(&app(), true, true, t0).is_some());
        assert!(s.hold(&other, true, true, t0).is_some());
        s.forget(&app());
        assert_eq!(s.len(), 1, "only the other one is left");
        assert_eq!(s.hold(&app(), false, true, t0), None, "its start is gone");
    }

    #[test]
    fn nothing_is_held_without_a_change_or_a_window() {
        let t0 = Instant::now();
        assert_eq!(Settling::new(WINDOW).hold(&app(), false, true, t0), None);
        assert_eq!(
            Settling::new(Duration::ZERO).hold(&app(), true, true, t0),
            None
        );
    }
}

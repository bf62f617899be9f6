//! Holding back the status of a rollout that has just started, so that "applied" and "ready"
//! reach the AppService as one status write instead of two or three.
//!
//! After the controller creates or changes a Deployment, its pods usually become ready within
//! seconds, and each step (the Deployment controller seeing the spec, pods created, pods ready)
//! would otherwise be a status write of its own. For up to the settle window the controller
//! writes no "rollout in progress" status; a ready Deployment, a failure or a stuck rollout is
//! written at once, and when the window ends the status is written whatever it is. After that
//! "in progress" write, the next one (the pods counted, not ready yet) again waits for up to a
//! window ([`Settling::wrote_in_progress`]): a rollout slower than the window costs one status
//! write per window at most until it ends, instead of one per step.

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

    /// Records that an "in progress" status of `app` was written at `now`: the next one is held
    /// for up to a window from then, as after a change.
    pub(super) fn wrote_in_progress(&self, app: &ObjectRef<AppService>, now: Instant) {
        if !self.window.is_zero() {
            self.lock().insert(app.clone(), now);
        }
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
    fn after_an_in_progress_write_the_next_one_waits_a_window() {
        let s = Settling::new(WINDOW);
        let t0 = Instant::now();
        assert!(s.hold(&app(), true, true, t0).is_some());
        let t5 = t0 + WINDOW;
        assert_eq!(
            s.hold(&app(), false, true, t5),
            None,
            "window over: written"
        );
        s.wrote_in_progress(&app(), t5);
        let t6 = t5 + Duration::from_secs(1);
        assert_eq!(
            s.hold(&app(), false, true, t6),
            Some(Duration::from_secs(4)),
            "the pods counted, not ready: held"
        );
        assert_eq!(s.hold(&app(), false, true, t5 + WINDOW), None, "written");
        s.wrote_in_progress(&app(), t5 + WINDOW);
        assert_eq!(
            s.hold(&app(), false, false, t5 + WINDOW + Duration::from_secs(1)),
            None,
            "ready: at once"
        );
        assert_eq!(s.len(), 0);

        let off = Settling::new(Duration::ZERO);
        off.wrote_in_progress(&app(), t0);
        assert_eq!(
            off.hold(&app(), false, true, t0),
            None,
            "no window, no hold"
        );
        assert_eq!(off.len(), 0);
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

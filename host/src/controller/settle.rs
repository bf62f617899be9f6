//! Holding back the status of a rollout that has just started, so that "applied" and "ready"
//! reach the AppService as one status write instead of two or three.
//!
//! After the controller creates or changes a Deployment, its pods usually become ready within
//! seconds, and each step (the Deployment controller seeing the spec, pods created, pods ready)
//! would otherwise be a status write of its own. A ready Deployment, a failure or a stuck
//! rollout is written at once. A rollout under way is held for up to the settle window, counted
//! from when the Deployment controller was first seen rolling it out: until then (the status
//! would say `RolloutPending`) there is nothing to report but the apply, and in a burst the
//! Deployment controller's own queue is what keeps the spec unseen for seconds (measured: every
//! status write past one per AppService of a 1000-AppService burst was such a pending status,
//! written 2.5 s after the apply). No status is held longer than [`PENDING_WINDOWS`] windows
//! after the change, so a Deployment controller that is down or far behind delays it by that
//! much at most; when the hold ends the status is written whatever it is.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use kube::runtime::reflector::ObjectRef;

use super::status::Progress;
use crate::crd::AppService;

/// How many settle windows after a change a status is held at most, however long the
/// Deployment controller takes to see the spec.
const PENDING_WINDOWS: u32 = 5;

/// A rollout whose status is held back.
#[derive(Debug)]
struct Started {
    /// When the controller changed the children.
    changed: Instant,
    /// When the rollout was first seen under way (the Deployment controller at work).
    underway: Option<Instant>,
}

/// When each AppService's rollout started, while its status is held back.
#[derive(Debug)]
pub(super) struct Settling {
    window: Duration,
    started: Mutex<HashMap<ObjectRef<AppService>, Started>>,
}

impl Settling {
    /// Holds a rollout's status back for at most `window` once it is under way (zero: never).
    pub(super) fn new(window: Duration) -> Self {
        Self {
            window,
            started: Mutex::default(),
        }
    }

    /// How long to hold back the status write of `app` at `now`, if at all. `changed`: this
    /// reconcile created or changed children; `progress`: the rollout the status to
    /// write reports, if it reports one under way and nothing wrong ([`super::status::progress`]).
    pub(super) fn hold(
        &self,
        app: &ObjectRef<AppService>,
        changed: bool,
        progress: Option<Progress>,
        now: Instant,
    ) -> Option<Duration> {
        let mut started = self.lock();
        let Some(progress) = progress.filter(|_| !self.window.is_zero()) else {
            started.remove(app);
            return None;
        };
        // NB: a change while held keeps the first one's clock, so that children changed at
        // every reconcile (a fight over a field) cannot hold the status back for ever.
        if changed {
            started.entry(app.clone()).or_insert(Started {
                changed: now,
                underway: None,
            });
        }
        let entry = started.get_mut(app)?;
        let mut until = entry.changed + self.window * PENDING_WINDOWS;
        if progress == Progress::Underway {
            until = until.min(*entry.underway.get_or_insert(now) + self.window);
        }
        let left = until.checked_duration_since(now);
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

    fn lock(&self) -> MutexGuard<'_, HashMap<ObjectRef<AppService>, Started>> {
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

    const WINDOW: Duration = Duration::from_secs(2);
    const UNDERWAY: Option<Progress> = Some(Progress::Underway);
    const PENDING: Option<Progress> = Some(Progress::Pending);

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn a_rollout_under_way_is_held_until_ready_or_the_window_ends() {
        let s = Settling::new(WINDOW);
        let t0 = Instant::now();
        assert_eq!(s.hold(&app(), true, UNDERWAY, t0), Some(WINDOW));
        assert_eq!(
            s.hold(&app(), false, UNDERWAY, t0 + secs(1)),
            Some(secs(1)),
            "a status update of the Deployment is still held"
        );
        assert_eq!(
            s.hold(&app(), false, UNDERWAY, t0 + WINDOW),
            None,
            "window over"
        );
        assert_eq!(
            s.hold(&app(), false, UNDERWAY, t0 + WINDOW),
            None,
            "not held again without a new change"
        );
    }

    #[test]
    fn the_window_starts_when_the_deployment_controller_is_at_work() {
        let s = Settling::new(WINDOW);
        let t0 = Instant::now();
        assert_eq!(
            s.hold(&app(), true, PENDING, t0),
            Some(WINDOW * PENDING_WINDOWS)
        );
        assert_eq!(
            s.hold(&app(), false, PENDING, t0 + secs(3)),
            Some(secs(7)),
            "the spec not seen yet: held past one window"
        );
        assert_eq!(
            s.hold(&app(), false, UNDERWAY, t0 + secs(4)),
            Some(WINDOW),
            "under way: a window from now"
        );
        assert_eq!(
            s.hold(&app(), false, UNDERWAY, t0 + secs(5)),
            Some(secs(1)),
            "the window is counted from the first time under way"
        );
        assert_eq!(s.hold(&app(), false, UNDERWAY, t0 + secs(6)), None);
    }

    #[test]
    fn no_status_is_held_past_the_pending_windows() {
        let s = Settling::new(WINDOW);
        let t0 = Instant::now();
        let cap = WINDOW * PENDING_WINDOWS;
        assert!(s.hold(&app(), true, PENDING, t0).is_some());
        assert_eq!(
            s.hold(&app(), false, UNDERWAY, t0 + cap - secs(1)),
            Some(secs(1)),
            "under way just before the cap: held to the cap only"
        );
        assert_eq!(s.hold(&app(), false, UNDERWAY, t0 + cap), None);

        let other = ObjectRef::new("api").within("ns");
        assert!(s.hold(&other, true, PENDING, t0).is_some());
        assert_eq!(
            s.hold(&other, true, PENDING, t0 + cap),
            None,
            "changed again at every reconcile: still bounded by the first change"
        );
    }

    #[test]
    fn ready_or_failed_is_written_at_once() {
        let s = Settling::new(WINDOW);
        let t0 = Instant::now();
        assert!(s.hold(&app(), true, PENDING, t0).is_some());
        assert_eq!(s.hold(&app(), false, None, t0), None, "ready");
        assert_eq!(
            s.hold(&app(), false, UNDERWAY, t0),
            None,
            "forgotten once written"
        );
        assert_eq!(s.hold(&app(), true, None, t0), None, "ready at once");
    }

    #[test]
    fn a_forgotten_app_is_held_no_more() {
        let s = Settling::new(WINDOW);
        let t0 = Instant::now();
        let other = ObjectRef::new("api").within("ns");
        assert!(s.hold(&app(), true, UNDERWAY, t0).is_some());
        assert!(s.hold(&other, true, PENDING, t0).is_some());
        s.forget(&app());
        assert_eq!(s.len(), 1, "only the other one is left");
        assert_eq!(
            s.hold(&app(), false, UNDERWAY, t0),
            None,
            "its start is gone"
        );
    }

    #[test]
    fn nothing_is_held_without_a_change_or_a_window() {
        let t0 = Instant::now();
        assert_eq!(Settling::new(WINDOW).hold(&app(), false, PENDING, t0), None);
        assert_eq!(
            Settling::new(Duration::ZERO).hold(&app(), true, PENDING, t0),
            None
        );
    }
}

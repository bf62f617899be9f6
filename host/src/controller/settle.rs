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
//! after the change, or, while the Deployment controller has recently taken longer than that
//! to see a spec, twice the longest it took ([`Lag`]; at most [`MAX_PENDING_WINDOWS`]
//! windows), so a Deployment controller that is down delays a status by the first bound and
//! one far behind by the second at most; when the hold ends the status is written whatever it
//! is.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use kube::runtime::reflector::ObjectRef;

use super::status::Progress;
use crate::crd::AppService;

/// How many settle windows after a change a status is held at most, unless the Deployment
/// controller has recently been seen taking longer to see a spec ([`Lag`]).
const PENDING_WINDOWS: u32 = 5;

/// How many settle windows after a change a status is held at most, however far behind the
/// Deployment controller is.
const MAX_PENDING_WINDOWS: u32 = 15;

/// How long an observed delay of the Deployment controller counts ([`Lag`]).
const LAG_MEMORY: Duration = Duration::from_secs(60);

/// The longest the Deployment controller recently took to see a spec the controller changed
/// (from the change to the rollout first seen past pending: under way, ready or failed), so
/// that a pending status is held as long as the Deployment controller takes in a burst, not
/// written once pending and again after. Only rollouts it saw count: while it is down nothing
/// is learnt, and what was learnt is forgotten [`LAG_MEMORY`] after it was first seen.
#[derive(Debug, Default)]
struct Lag {
    /// The longest delay seen since `since`.
    longest: Duration,
    /// When the first delay counted in `longest` was seen.
    since: Option<Instant>,
}

impl Lag {
    /// Counts a rollout first seen past pending `delay` after its change, at `now`.
    fn seen(&mut self, delay: Duration, now: Instant) {
        if self.current(now).is_none() {
            *self = Self {
                longest: delay,
                since: Some(now),
            };
        } else {
            self.longest = self.longest.max(delay);
        }
    }

    /// The longest delay seen within [`LAG_MEMORY`] of `now`, if any.
    fn current(&self, now: Instant) -> Option<Duration> {
        let since = self.since?;
        (now.saturating_duration_since(since) < LAG_MEMORY).then_some(self.longest)
    }
}

/// A rollout whose status is held back.
#[derive(Debug)]
struct Started {
    /// When the controller changed the children.
    changed: Instant,
    /// When the rollout was first seen under way (the Deployment controller at work).
    underway: Option<Instant>,
}

impl Started {
    /// When the Deployment controller was first seen at work on the rollout, `now` if this is
    /// the first time (its delay since the change then counted in `lag`).
    fn picked_up(&mut self, lag: &mut Lag, now: Instant) -> Instant {
        *self.underway.get_or_insert_with(|| {
            lag.seen(now.saturating_duration_since(self.changed), now);
            now
        })
    }
}

/// The rollouts held back, and what was learnt of the Deployment controller's delay.
#[derive(Debug, Default)]
struct State {
    started: HashMap<ObjectRef<AppService>, Started>,
    lag: Lag,
}

/// When each AppService's rollout started, while its status is held back.
#[derive(Debug)]
pub(super) struct Settling {
    window: Duration,
    state: Mutex<State>,
}

impl Settling {
    /// Holds a rollout's status back for at most `window` once it is under way (zero: never).
    pub(super) fn new(window: Duration) -> Self {
        Self {
            window,
            state: Mutex::default(),
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
        let mut state = self.lock();
        let State { started, lag } = &mut *state;
        let Some(progress) = progress.filter(|_| !self.window.is_zero()) else {
            // NB: ready (or failed) straight from pending is the Deployment controller's delay too.
            if let Some(mut entry) = started.remove(app) {
                entry.picked_up(lag, now);
            }
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
        let mut until = entry.changed + self.pending_bound(lag, now);
        if progress == Progress::Underway {
            until = until.min(entry.picked_up(lag, now) + self.window);
        }
        let left = until.checked_duration_since(now);
        if left.is_none_or(|left| left.is_zero()) {
            started.remove(app);
            return None;
        }
        left
    }

    /// How long after a change a status is held at most at `now`: [`PENDING_WINDOWS`] windows,
    /// or twice the Deployment controller's recent delay, up to [`MAX_PENDING_WINDOWS`].
    fn pending_bound(&self, lag: &Lag, now: Instant) -> Duration {
        let base = self.window * PENDING_WINDOWS;
        lag.current(now).map_or(base, |delay| {
            (delay * 2).clamp(base, self.window * MAX_PENDING_WINDOWS)
        })
    }

    /// Forgets `app` (deleted).
    pub(super) fn forget(&self, app: &ObjectRef<AppService>) {
        self.lock().started.remove(app);
    }

    /// Keeps only the AppServices `keep` accepts (the others are gone).
    pub(super) fn retain(&self, keep: impl Fn(&ObjectRef<AppService>) -> bool) {
        self.lock().started.retain(|app, _| keep(app));
    }

    /// How many AppServices have their status held back.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.lock().started.len()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect("settling lock is never poisoned")
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
        assert_eq!(s.hold(&app(), true, PENDING, t0), Some(cap));
        assert_eq!(
            s.hold(&app(), false, PENDING, t0 + cap - secs(1)),
            Some(secs(1)),
            "the Deployment controller down: nothing learnt of its delay"
        );
        assert_eq!(s.hold(&app(), false, PENDING, t0 + cap), None);

        let other = ObjectRef::new("api").within("ns");
        assert!(s.hold(&other, true, PENDING, t0).is_some());
        assert_eq!(
            s.hold(&other, true, PENDING, t0 + cap),
            None,
            "changed again at every reconcile: still bounded by the first change"
        );
    }

    #[test]
    fn a_deployment_controller_seen_behind_lengthens_the_hold() {
        let s = Settling::new(WINDOW);
        let t0 = Instant::now();
        let [a, b, c, d] = ["a", "b", "c", "d"].map(|name| ObjectRef::new(name).within("ns"));
        assert!(s.hold(&a, true, PENDING, t0).is_some());
        assert_eq!(
            s.hold(&a, false, UNDERWAY, t0 + secs(8)),
            Some(WINDOW),
            "seen 8 s after its change, within the first bound"
        );

        let t1 = t0 + secs(8);
        assert_eq!(
            s.hold(&b, true, PENDING, t1),
            Some(secs(16)),
            "twice the delay seen"
        );
        let ready = ObjectRef::new("ready").within("ns");
        assert!(s.hold(&ready, true, PENDING, t0).is_some());
        assert_eq!(
            s.hold(&ready, false, None, t0 + secs(9)),
            None,
            "ready straight from pending, 9 s after its change"
        );
        assert_eq!(
            s.hold(&c, true, PENDING, t1),
            Some(secs(18)),
            "that delay counts too"
        );
        s.forget(&c);
        assert_eq!(
            s.hold(&b, false, PENDING, t1 + secs(12)),
            Some(secs(6)),
            "a hold under way lengthened by the longer delay seen since"
        );
        assert_eq!(
            s.hold(&b, false, UNDERWAY, t1 + secs(14)),
            Some(secs(2)),
            "seen 14 s after its change"
        );
        assert_eq!(
            s.hold(&c, true, PENDING, t1 + secs(14)),
            Some(secs(28)),
            "the longest delay seen counts"
        );
        assert!(s.hold(&c, false, UNDERWAY, t1 + secs(34)).is_some());
        assert_eq!(
            s.hold(&d, true, PENDING, t1 + secs(34)),
            Some(WINDOW * MAX_PENDING_WINDOWS),
            "never more than the most windows"
        );

        s.forget(&d);
        assert_eq!(
            s.hold(&d, true, PENDING, t1 + LAG_MEMORY),
            Some(WINDOW * PENDING_WINDOWS),
            "delays first seen a minute ago no longer count"
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

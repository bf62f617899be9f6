//! What the controller remembers about each AppService between reconciles, forgotten when the
//! AppService is deleted, or found gone when the AppService watch lists again.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;

use super::rendered::LastRendered;
use super::reported::GuestEvents;
use super::settle::Settling;
use super::written::WrittenStatus;
use crate::crd::AppService;

/// The controller's memory of each AppService.
#[derive(Debug)]
pub(super) struct PerApp {
    /// Consecutive failures, for the retry backoff.
    failures: Mutex<HashMap<ObjectRef<AppService>, u32>>,
    /// Rollouts whose status is held back for a moment.
    pub(super) settling: Settling,
    /// The guest Events recorded last.
    pub(super) guest_events: GuestEvents,
    /// The status written last, while the cache is behind it.
    pub(super) written: WrittenStatus,
    /// The last successful render, to skip the guest call when nothing changed since.
    pub(super) rendered: LastRendered,
}

impl PerApp {
    /// Empty, holding rollout statuses back for at most `status_settle`.
    pub(super) fn new(status_settle: Duration) -> Self {
        Self {
            failures: Mutex::default(),
            settling: Settling::new(status_settle),
            guest_events: GuestEvents::default(),
            written: WrittenStatus::default(),
            rendered: LastRendered::default(),
        }
    }

    /// Counts a failure of `app` and returns how many happened in a row.
    pub(super) fn record_failure(&self, app: &AppService) -> u32 {
        let mut failures = self.failures();
        let count = failures.entry(ObjectRef::from_obj(app)).or_default();
        *count = count.saturating_add(1);
        *count
    }

    /// The AppServices whose last reconcile failed.
    pub(super) fn failing(&self) -> Vec<ObjectRef<AppService>> {
        self.failures().keys().cloned().collect()
    }

    /// Resets the failure count of `app` after a success.
    pub(super) fn forget_failures(&self, app: &AppService) {
        self.failures().remove(&ObjectRef::from_obj(app));
    }

    /// Forgets `app` (deleted, or being deleted).
    pub(super) fn forget(&self, app: &AppService) {
        let key = ObjectRef::from_obj(app);
        self.failures().remove(&key);
        self.settling.forget(&key);
        self.written.forget(app);
        let uid = app.uid().unwrap_or_default();
        self.guest_events.forget(&uid);
        self.rendered.forget(&uid);
    }

    /// Forgets every AppService `live` does not hold.
    pub(super) fn retain(&self, live: &Store<AppService>) {
        let uids: HashSet<String> = live.state().iter().filter_map(|a| a.uid()).collect();
        let live = |key: &ObjectRef<AppService>| live.get(key).is_some();
        self.failures().retain(|key, _| live(key));
        self.settling.retain(live);
        self.written.retain(live);
        self.guest_events.retain(|uid| uids.contains(uid));
        self.rendered.retain(|uid| uids.contains(uid));
    }

    /// An `inspect_ok` callback for the AppService watch, whose cache is `live`: forgets an
    /// AppService when its deletion is seen, and those a re-list no longer shows (deleted while
    /// the watch was down), and a status written once the watch brings a newer version.
    pub(super) fn on_app_event(
        self: std::sync::Arc<Self>,
        live: Store<AppService>,
    ) -> impl Fn(&watcher::Event<AppService>) + Send + Sync + 'static {
        move |event| match event {
            // NB: not on a re-list's objects: the cache shows them only once the list is done.
            watcher::Event::Apply(app) => self.written.seen(app),
            watcher::Event::Delete(app) => self.forget(app),
            watcher::Event::InitDone => self.retain(&live),
            _ => {}
        }
    }

    fn failures(&self) -> MutexGuard<'_, HashMap<ObjectRef<AppService>, u32>> {
        // NB: a panic elsewhere cannot leave the map torn: it is only inserted into and removed
        // from.
        self.failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use kube::runtime::reflector;

    use super::super::rendered::Rendered;
    use super::super::status::Progress;
    use super::*;
    use crate::guest;

    fn app(name: &str) -> AppService {
        let mut app = AppService::test();
        app.metadata.name = Some(name.into());
        app.metadata.uid = Some(format!("uid-{name}"));
        app.metadata.resource_version = Some("7".into());
        app
    }

    fn event() -> guest::Event {
        guest::Event {
            type_: guest::EventType::Normal,
            reason: "R".into(),
            note: "n".into(),
        }
    }

    /// Remembers something of every kind about `app`.
    fn remember(per_app: &PerApp, app: &AppService) {
        per_app.record_failure(app);
        per_app.settling.hold(
            &ObjectRef::from_obj(app),
            true,
            Some(Progress::Pending),
            Instant::now(),
        );
        per_app
            .guest_events
            .changed(&app.uid().unwrap(), &[event()]);
        per_app.written.wrote(app, Default::default());
        let rendered = Rendered {
            key: guest::RenderKey::for_test(1),
            children: Vec::new(),
            report: Default::default(),
        };
        per_app.rendered.record(&app.uid().unwrap(), rendered);
    }

    /// How many AppServices each part remembers: failures, settling, guest events, written,
    /// rendered.
    fn sizes(per_app: &PerApp) -> [usize; 5] {
        [
            per_app.failures().len(),
            per_app.settling.len(),
            per_app.guest_events.len(),
            per_app.written.len(),
            per_app.rendered.len(),
        ]
    }

    #[test]
    fn a_deleted_appservice_is_forgotten_everywhere() {
        let per_app = std::sync::Arc::new(PerApp::new(Duration::from_secs(5)));
        let (a, b) = (app("a"), app("b"));
        remember(&per_app, &a);
        remember(&per_app, &b);
        assert_eq!(sizes(&per_app), [2; 5]);

        let (store, _writer) = reflector::store();
        let on_event = per_app.clone().on_app_event(store);
        on_event(&watcher::Event::Delete(a));
        assert_eq!(sizes(&per_app), [1; 5]);
        assert_eq!(per_app.failing(), [ObjectRef::from_obj(&b)]);
    }

    #[test]
    fn a_relist_forgets_the_appservices_it_no_longer_shows() {
        let per_app = std::sync::Arc::new(PerApp::new(Duration::from_secs(5)));
        let (a, b) = (app("a"), app("b"));
        remember(&per_app, &a);
        remember(&per_app, &b);

        let (store, mut writer) = reflector::store();
        writer.apply_watcher_event(&watcher::Event::Init);
        writer.apply_watcher_event(&watcher::Event::InitApply(b.clone()));
        writer.apply_watcher_event(&watcher::Event::InitDone);
        let on_event = per_app.clone().on_app_event(store);
        on_event(&watcher::Event::InitDone);
        assert_eq!(sizes(&per_app), [1; 5], "b is still there");
        assert_eq!(per_app.failing(), [ObjectRef::from_obj(&b)]);
    }
}

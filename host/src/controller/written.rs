//! The status this process last wrote for each AppService, for as long as the AppService cache
//! has not caught up with it.
//!
//! A reconcile can start (on a Deployment's status update, say) before the AppService watch has
//! brought back the status the previous reconcile wrote. It then sees the AppService as it was
//! before that write, would compute the same status again against the old one (transition times
//! and all) and write it a second time. With the status written remembered by the
//! resourceVersion the write was computed from, that reconcile starts from the status written
//! instead: when nothing changed since, it writes nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use crate::crd::{AppService, AppServiceStatus};

/// The last status written per AppService, with the resourceVersion it was computed from.
#[derive(Debug, Default)]
pub(super) struct WrittenStatus(Mutex<HashMap<ObjectRef<AppService>, Written>>);

#[derive(Debug)]
struct Written {
    /// The AppService's resourceVersion before the write.
    from: String,
    status: AppServiceStatus,
}

impl Written {
    /// True while `app` is the version the write started from: the cache is behind it.
    fn ahead_of(&self, app: &AppService) -> bool {
        app.resource_version().as_deref() == Some(self.from.as_str())
    }
}

impl WrittenStatus {
    /// Records that `status` was written over `app` (the AppService the reconcile started from).
    pub(super) fn wrote(&self, app: &AppService, status: AppServiceStatus) {
        let Some(from) = app.resource_version() else {
            return;
        };
        self.lock()
            .insert(ObjectRef::from_obj(app), Written { from, status });
    }

    /// `app` as this process last left it: with the status written last when `app` is still the
    /// version that write started from (the cache is behind), else `app` itself, the record then
    /// being dropped (the cache has caught up, or someone else wrote since).
    pub(super) fn latest(&self, app: Arc<AppService>) -> Arc<AppService> {
        let key = ObjectRef::from_obj(&*app);
        let mut written = self.lock();
        match written.get(&key) {
            Some(w) if w.ahead_of(&app) => {
                let mut behind = (*app).clone();
                behind.status = Some(w.status.clone());
                Arc::new(behind)
            }
            Some(_) => {
                drop_record(&mut written, &key);
                app
            }
            None => app,
        }
    }

    /// Forgets the status written over an older version of `app`, as the AppService watch
    /// brings `app`: the cache has caught up with the write (or someone wrote since), so
    /// [`WrittenStatus::latest`] would drop it anyway. Without this, the record of every
    /// AppService would stay until its next reconcile.
    pub(super) fn seen(&self, app: &AppService) {
        let key = ObjectRef::from_obj(app);
        let mut written = self.lock();
        if written.get(&key).is_some_and(|w| !w.ahead_of(app)) {
            drop_record(&mut written, &key);
        }
    }

    /// Forgets `app`, e.g. once it is being deleted.
    pub(super) fn forget(&self, app: &AppService) {
        drop_record(&mut self.lock(), &ObjectRef::from_obj(app));
    }

    /// Keeps only the AppServices `keep` accepts (the others are gone).
    pub(super) fn retain(&self, keep: impl Fn(&ObjectRef<AppService>) -> bool) {
        self.lock().retain(|app, _| keep(app));
    }

    /// How many AppServices have a status remembered.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<ObjectRef<AppService>, Written>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Removes the record of `key`, and gives the table's room back once it is mostly empty: a
/// burst of new AppServices fills it for as long as their first status writes are in flight
/// (0.5 MiB of table at 1000).
fn drop_record(written: &mut HashMap<ObjectRef<AppService>, Written>, key: &ObjectRef<AppService>) {
    written.remove(key);
    if written.len() * 4 < written.capacity() {
        let len = written.len();
        written.shrink_to(len * 2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(version: &str, ready: Option<&str>) -> Arc<AppService> {
        let mut app = AppService::test();
        app.metadata.resource_version = Some(version.into());
        app.status = ready.map(|r| AppServiceStatus {
            ready: Some(r.into()),
            ..AppServiceStatus::default()
        });
        Arc::new(app)
    }

    fn ready(app: &AppService) -> Option<&str> {
        app.status.as_ref().and_then(|s| s.ready.as_deref())
    }

    #[test]
    fn a_cache_behind_the_write_shows_the_status_written() {
        let written = WrittenStatus::default();
        let before = app("5", Some("0/1"));
        let status = AppServiceStatus {
            ready: Some("1/1".into()),
            ..AppServiceStatus::default()
        };
        written.wrote(&before, status);
        assert_eq!(ready(&written.latest(app("5", Some("0/1")))), Some("1/1"));
        // The write's own version arrives: the cache has caught up, the record goes.
        assert_eq!(ready(&written.latest(app("6", Some("1/1")))), Some("1/1"));
        assert_eq!(ready(&written.latest(app("5", Some("0/1")))), Some("0/1"));
    }

    #[test]
    fn the_watch_bringing_a_newer_version_drops_the_record() {
        let written = WrittenStatus::default();
        let before = app("5", Some("0/1"));
        written.wrote(&before, AppServiceStatus::default());
        written.seen(&before);
        assert_eq!(written.len(), 1, "the version the write started from");
        written.seen(&app("6", Some("1/1")));
        assert_eq!(written.len(), 0, "caught up");
        assert_eq!(ready(&written.latest(app("5", Some("0/1")))), Some("0/1"));
    }

    #[test]
    fn nothing_written_or_forgotten_leaves_the_app_as_cached() {
        let written = WrittenStatus::default();
        assert_eq!(ready(&written.latest(app("5", Some("0/1")))), Some("0/1"));
        let before = app("5", None);
        written.wrote(&before, AppServiceStatus::default());
        written.forget(&before);
        assert_eq!(ready(&written.latest(app("5", None))), None);
    }
}

//! What each AppService's guest rendered last, so that a reconcile whose guest input, guest and
//! children are as they were then skips the guest call and the applies.
//!
//! Most reconciles come from a child's status changing (pods becoming ready) or from a resync;
//! the guest would render what it rendered last and every apply would be skipped as up to date.
//! A guest call costs a fresh instance (~0.1 ms of CPU at scale, more than the rest of such a
//! reconcile). So after each successful render and apply, the AppService's [`RenderKey`] (the
//! guest's digest, the namespace's level, everything the guest is given), the hashes of the
//! bodies applied and the guest's report are kept. The next reconcile with the same key whose
//! children still hold those bodies ([`super::apply::as_last_applied`]) reuses them. Any
//! other change (a new spec, labels or guest, a child edited, deleted or not yet seen) renders.

use std::sync::Arc;

use super::by_uid::ByUid;
use super::child::ChildKey;
use super::uptodate::BodyHash;
use crate::guest::{RenderKey, Report};

/// The last successful render of one AppService.
#[derive(Debug, Clone)]
pub(super) struct Rendered {
    /// What the guest was given.
    pub(super) key: RenderKey,
    /// The children it emitted, with the hash of the body last applied to each.
    pub(super) children: Vec<(ChildKey, BodyHash)>,
    /// The guest's conditions and Events.
    pub(super) report: Arc<Report>,
}

/// The last successful render of each AppService, by uid.
pub(super) type LastRendered = ByUid<Arc<Rendered>>;

impl LastRendered {
    /// The last render of the AppService with `uid`, if it was rendered with `key`.
    pub(super) fn get(&self, uid: &str, key: RenderKey) -> Option<Arc<Rendered>> {
        self.lock().get(uid).filter(|r| r.key == key).cloned()
    }

    /// Records a successful render and apply of the AppService with `uid`.
    pub(super) fn record(&self, uid: &str, rendered: Rendered) {
        self.lock().insert(uid.to_owned(), Arc::new(rendered));
    }
}

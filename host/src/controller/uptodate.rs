//! Skipping server-side applies that would change nothing.
//!
//! Most reconciles are triggered by a child's status changing (pods becoming ready), and their
//! applies are no-ops. A child is up to date, and its apply skipped, when both hold:
//! - the body the guest renders now is the one this process last applied successfully (same
//!   hash), so no field the operator stopped setting is waiting to be removed;
//! - the cached live object already holds every field of that body with the same value, so no
//!   one changed or removed a field the operator sets.
//!
//! Anything else (a restart, a new spec or guest output, a hand edit, a value the API server
//! normalizes) leads to a normal apply.
//!
//! Both checks ignore the guest digest annotation ([`crate::stamp::without_provenance`]): a new guest that
//! renders the same objects rewrites no child. The annotation then names the guest that last
//! changed the child, and the AppService's `status.guestDigest` the guest in force.

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

use serde_json::Value;

use super::child::ChildKey;

/// Hashes of the bodies this process last applied successfully, per child.
#[derive(Debug, Default)]
pub struct LastApplied(Mutex<HashMap<ChildKey, u64>>);

impl LastApplied {
    /// True when `body` is what was last applied for `key`.
    pub fn is_last(&self, key: &ChildKey, body: &Value) -> bool {
        self.lock().get(key).copied() == Some(hash(body))
    }

    /// Records that `body` was applied for `key`.
    pub fn applied(&self, key: ChildKey, body: &Value) {
        self.lock().insert(key, hash(body));
    }

    /// Forgets `key`, e.g. after deleting the child.
    pub fn forget(&self, key: &ChildKey) {
        self.lock().remove(key);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ChildKey, u64>> {
        self.0
            .lock()
            .expect("last-applied map lock is never poisoned")
    }
}

fn hash(body: &Value) -> u64 {
    let mut hasher = DefaultHasher::new();
    // NB: serde_json keeps object keys sorted (no preserve_order), so equal values hash equally.
    body.to_string().hash(&mut hasher);
    hasher.finish()
}

/// True when every field of `desired` is in `live` with an equal value; lists must have the same
/// length and hold matching items in order.
pub(super) fn contains(live: &Value, desired: &Value) -> bool {
    match (live, desired) {
        (Value::Object(live), Value::Object(desired)) => desired
            .iter()
            .all(|(k, v)| live.get(k).is_some_and(|l| contains(l, v))),
        (Value::Array(live), Value::Array(desired)) => {
            live.len() == desired.len() && live.iter().zip(desired).all(|(l, d)| contains(l, d))
        }
        (live, desired) => live == desired,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::child::ChildKind;
    use super::*;
    use crate::consts::ANNOTATION_GUEST_DIGEST;
    use crate::stamp::without_provenance;

    fn key() -> ChildKey {
        (ChildKind::Service, "ns".into(), "web".into())
    }

    #[test]
    fn live_with_defaults_contains_the_desired_body() {
        let desired = json!({"spec": {"ports": [{"port": 80}], "selector": {"app": "web"}}});
        let live = json!({"spec": {"ports": [{"port": 80, "protocol": "TCP"}], "selector": {"app": "web"}, "clusterIP": "10.0.0.1"}});
        assert!(contains(&live, &desired));
    }

    #[test]
    fn changed_removed_or_extra_list_items_are_not_contained() {
        let desired = json!({"spec": {"ports": [{"port": 80}], "replicas": 3}});
        assert!(!contains(
            &json!({"spec": {"ports": [{"port": 81}], "replicas": 3}}),
            &desired
        ));
        assert!(!contains(
            &json!({"spec": {"ports": [{"port": 80}]}}),
            &desired
        ));
        assert!(!contains(
            &json!({"spec": {"ports": [{"port": 80}, {"port": 81}], "replicas": 3}}),
            &desired
        ));
    }

    #[test]
    fn the_last_body_is_remembered_per_child_until_forgotten() {
        let last = LastApplied::default();
        let body = json!({"spec": {"replicas": 3}});
        assert!(!last.is_last(&key(), &body), "never applied");
        last.applied(key(), &body);
        assert!(last.is_last(&key(), &body));
        assert!(!last.is_last(&key(), &json!({"spec": {}})), "another body");
        let other = (ChildKind::Deployment, "ns".into(), "web".into());
        assert!(!last.is_last(&other, &body), "another child");
        last.forget(&key());
        assert!(!last.is_last(&key(), &body));
    }

    #[test]
    fn the_guest_digest_is_not_compared() {
        let stamped = |digest: &str| json!({"metadata": {"name": "web", "annotations": {ANNOTATION_GUEST_DIGEST: digest}}});
        let (a, b) = (stamped("sha256:a"), stamped("sha256:b"));
        assert_eq!(without_provenance(&a), without_provenance(&b));
        assert_eq!(without_provenance(&a), json!({"metadata": {"name": "web"}}));
        // The live object of another guest holds everything else the new guest renders.
        assert!(contains(&a, &without_provenance(&b)));
        let kept =
            json!({"metadata": {"annotations": {"team": "x", ANNOTATION_GUEST_DIGEST: "d"}}});
        assert_eq!(
            without_provenance(&kept),
            json!({"metadata": {"annotations": {"team": "x"}}})
        );
    }
}

//! Skipping server-side applies that would change nothing.
//!
//! Most reconciles are triggered by a child's status changing (pods becoming ready), and their
//! applies are no-ops. A child is up to date, and its apply skipped, when both hold:
//! - the body the guest renders now is the one this process last applied successfully (same
//!   hash), so no field the operator stopped setting is waiting to be removed;
//! - the cached live object already holds every field of that body with the same value, so no
//!   one changed or removed a field the operator sets.
//!
//! Anything else (a restart, a new spec or guest, a hand edit, a value the API server normalizes)
//! leads to a normal apply.

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

use serde_json::Value;

use super::apply::ChildKind;

/// `(kind, namespace, name)` of a child.
pub type ChildKey = (ChildKind, String, String);

/// Hashes of the bodies this process last applied successfully, per child.
#[derive(Debug, Default)]
pub struct LastApplied(Mutex<HashMap<ChildKey, u64>>);

impl LastApplied {
    /// True when `body` is what was last applied for `key` and `live` already holds all of it.
    pub fn is_up_to_date(&self, key: &ChildKey, body: &Value, live: Option<&Value>) -> bool {
        let last = self.lock().get(key).copied();
        last == Some(hash(body)) && live.is_some_and(|live| contains(live, body))
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
pub fn contains(live: &Value, desired: &Value) -> bool {
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

    use super::*;

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
    fn up_to_date_needs_the_same_body_applied_and_a_live_copy_holding_it() {
        let last = LastApplied::default();
        let body = json!({"spec": {"replicas": 3}});
        let live = json!({"spec": {"replicas": 3}, "status": {}});
        assert!(
            !last.is_up_to_date(&key(), &body, Some(&live)),
            "never applied"
        );
        last.applied(key(), &body);
        assert!(last.is_up_to_date(&key(), &body, Some(&live)));
        assert!(!last.is_up_to_date(&key(), &body, None), "no live copy");
        let edited = json!({"spec": {"replicas": 1}});
        assert!(
            !last.is_up_to_date(&key(), &body, Some(&edited)),
            "hand edit"
        );
        let smaller = json!({"spec": {}});
        assert!(
            !last.is_up_to_date(&key(), &smaller, Some(&live)),
            "a field to remove"
        );
        last.forget(&key());
        assert!(!last.is_up_to_date(&key(), &body, Some(&live)));
    }
}

//! Skipping server-side applies that would change nothing.
//!
//! Most reconciles are triggered by a child's status changing (pods becoming ready), and their
//! applies are no-ops. A child is up to date, and its apply skipped, when both hold:
//! - the body the guest renders now is the one this process last applied successfully (same
//!   hash), so no field the operator stopped setting is waiting to be removed;
//! - the live child still has the [`Fingerprint`] of the object that apply returned, so no one
//!   changed a field the operator sets since.
//!
//! Anything else (a restart, a new spec or guest output, a hand edit of the child, a label
//! someone added) leads to a normal apply, which changes nothing where nothing of the
//! operator's changed. The cache holds no spec to compare with ([`super::view`]).
//!
//! The body hash leaves the guest digest annotation out
//! ([`crate::stamp::hash_without_provenance`]), so a new guest that renders the same objects
//! rewrites no child. The annotation then names the guest that last changed the child, and the
//! AppService's `status.guestDigest` the guest in force.

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use super::child::{ChildKey, ChildKind};
use crate::consts::foreign_annotation_owner;
use crate::stamp::hash_without_provenance;

/// A hash of the parts of a live child that change whenever a field an applied body can set
/// changes: its uid and metadata, and for a Deployment its `generation` (which the API server
/// bumps on every spec change, but not on status updates), for any other kind its
/// `resourceVersion`. Annotations under [`crate::consts::FOREIGN_ANNOTATION_PREFIXES`] are left
/// out: no body sets them, and the Deployment controller changes its revision after each rollout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fingerprint(u64);

impl Fingerprint {
    /// The fingerprint of a live child of kind `kind` with metadata `meta`.
    pub fn of(kind: ChildKind, meta: &ObjectMeta) -> Self {
        let mut hasher = DefaultHasher::new();
        meta.uid.hash(&mut hasher);
        match kind {
            ChildKind::Deployment => meta.generation.hash(&mut hasher),
            ChildKind::Service => meta.resource_version.hash(&mut hasher),
        }
        meta.labels.hash(&mut hasher);
        let annotations = meta
            .annotations
            .iter()
            .flatten()
            .filter(|(key, _)| foreign_annotation_owner(key).is_none());
        let mut count = 0_usize;
        for annotation in annotations {
            annotation.hash(&mut hasher);
            count += 1;
        }
        count.hash(&mut hasher);
        meta.finalizers.hash(&mut hasher);
        meta.deletion_timestamp.is_some().hash(&mut hasher);
        for owner in meta.owner_references.iter().flatten() {
            (&owner.api_version, &owner.kind, &owner.name, &owner.uid).hash(&mut hasher);
            (owner.controller, owner.block_owner_deletion).hash(&mut hasher);
        }
        Self(hasher.finish())
    }
}

/// The hash of a body applied to a child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BodyHash(u64);

/// What this process last applied to one child.
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Hash of the body.
    body: BodyHash,
    /// The fingerprint of the child the apply of that body returned.
    verified: Fingerprint,
}

/// What [`LastApplied::last`] knows of a body about to be applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Last {
    /// Another body was applied last, or none.
    Other,
    /// The body last applied; `verified` is the fingerprint of the child its apply returned.
    Same {
        /// See [`Last::Same`].
        verified: Fingerprint,
    },
}

impl Last {
    /// True when the live child, of fingerprint `live`, is as the apply of the last body left it.
    pub fn verified(self, live: Fingerprint) -> bool {
        self == Last::Same { verified: live }
    }
}

/// Hashes of the bodies this process last applied successfully, per child.
#[derive(Debug, Default)]
pub struct LastApplied(Mutex<HashMap<ChildKey, Entry>>);

impl LastApplied {
    /// What is known of `body` for `key`, in one lookup.
    pub fn last(&self, key: &ChildKey, body: &Value) -> Last {
        self.last_of(key, hash(body))
    }

    fn last_of(&self, key: &ChildKey, body: BodyHash) -> Last {
        match self.lock().get(key) {
            Some(entry) if entry.body == body => Last::Same {
                verified: entry.verified,
            },
            _ => Last::Other,
        }
    }

    /// The hash of the body last applied for `key`, for [`LastApplied::holds`].
    pub fn body(&self, key: &ChildKey) -> Option<BodyHash> {
        self.lock().get(key).map(|entry| entry.body)
    }

    /// True when `body` is still the last applied for `key` and the live child, of fingerprint
    /// `live`, is as that apply left it: nothing would be applied to it for that body.
    pub fn holds(&self, key: &ChildKey, body: BodyHash, live: Fingerprint) -> bool {
        self.last_of(key, body).verified(live)
    }

    /// Records that `body` was applied for `key`, and the API server answered with a child of
    /// fingerprint `answer`.
    pub fn applied(&self, key: ChildKey, body: &Value, answer: Fingerprint) {
        let entry = Entry {
            body: hash(body),
            verified: answer,
        };
        self.lock().insert(key, entry);
    }

    /// Forgets `key`, e.g. after deleting the child.
    pub fn forget(&self, key: &ChildKey) {
        self.lock().remove(key);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ChildKey, Entry>> {
        self.0
            .lock()
            .expect("last-applied map lock is never poisoned")
    }
}

/// The hash of `body` without the guest digest annotation.
fn hash(body: &Value) -> BodyHash {
    let mut hasher = DefaultHasher::new();
    // NB: serde_json hashes an object's entries in key order, so equal values hash equally.
    hash_without_provenance(body, &mut hasher);
    BodyHash(hasher.finish())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::consts::ANNOTATION_GUEST_DIGEST;
    use crate::stamp::without_provenance;

    fn key() -> ChildKey {
        (ChildKind::Service, "ns".into(), "web".into())
    }

    fn meta(generation: i64, version: &str) -> ObjectMeta {
        ObjectMeta {
            uid: Some("u1".into()),
            generation: Some(generation),
            resource_version: Some(version.into()),
            labels: Some([("app".to_owned(), "web".to_owned())].into()),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn a_deployment_fingerprint_ignores_status_updates_but_not_spec_or_metadata() {
        let fp = |m: &ObjectMeta| Fingerprint::of(ChildKind::Deployment, m);
        let base = fp(&meta(1, "10"));
        assert_eq!(
            base,
            fp(&meta(1, "11")),
            "a status update bumps only the version"
        );
        assert_ne!(
            base,
            fp(&meta(2, "11")),
            "a spec change bumps the generation"
        );
        let mut relabelled = meta(1, "11");
        relabelled.labels = Some([("app".to_owned(), "other".to_owned())].into());
        assert_ne!(base, fp(&relabelled));
        let mut annotated = meta(1, "11");
        annotated.annotations = Some([("a".to_owned(), "b".to_owned())].into());
        assert_ne!(base, fp(&annotated));
        let mut revised = meta(1, "12");
        revised.annotations = Some(
            [(
                "deployment.kubernetes.io/revision".to_owned(),
                "1".to_owned(),
            )]
            .into(),
        );
        assert_eq!(
            base,
            fp(&revised),
            "the Deployment controller's revision is no body's field"
        );
        let mut recreated = meta(1, "10");
        recreated.uid = Some("u2".into());
        assert_ne!(base, fp(&recreated));
        let service = |m: &ObjectMeta| Fingerprint::of(ChildKind::Service, m);
        assert_ne!(service(&meta(1, "10")), service(&meta(1, "11")));
    }

    #[test]
    fn a_child_is_verified_only_with_the_fingerprint_last_seen() {
        let last = LastApplied::default();
        let body = json!({"spec": {"replicas": 3}});
        let (answer, later) = (Fingerprint(1), Fingerprint(2));
        let verified = |live| last.last(&key(), &body).verified(live);
        assert!(!verified(answer), "never applied");
        last.applied(key(), &body, answer);
        assert!(verified(answer));
        assert!(!verified(later), "changed since");
        assert!(
            !last.last(&key(), &json!({})).verified(answer),
            "verified for its own body only"
        );
        last.forget(&key());
        assert!(!verified(answer));
    }

    #[test]
    fn a_child_holds_a_body_while_it_is_the_last_applied_and_the_child_unchanged() {
        let last = LastApplied::default();
        let (body, other) = (json!({"spec": {"replicas": 3}}), json!({"spec": {}}));
        let (answer, later) = (Fingerprint(1), Fingerprint(2));
        assert_eq!(last.body(&key()), None, "never applied");
        last.applied(key(), &body, answer);
        let hash = last.body(&key()).expect("applied");
        assert!(last.holds(&key(), hash, answer));
        assert!(!last.holds(&key(), hash, later), "changed since");
        last.applied(key(), &other, answer);
        assert!(
            !last.holds(&key(), hash, answer),
            "another body applied since"
        );
        last.forget(&key());
        assert!(!last.holds(&key(), hash, answer), "forgotten");
    }

    #[test]
    fn the_last_body_is_remembered_per_child_until_forgotten() {
        let last = LastApplied::default();
        let body = json!({"spec": {"replicas": 3}});
        let is_last = |key: &ChildKey, body: &Value| last.last(key, body) != Last::Other;
        assert!(!is_last(&key(), &body), "never applied");
        last.applied(key(), &body, Fingerprint(0));
        assert!(is_last(&key(), &body));
        assert!(!is_last(&key(), &json!({"spec": {}})), "another body");
        let other = (ChildKind::Deployment, "ns".into(), "web".into());
        assert!(!is_last(&other, &body), "another child");
        last.forget(&key());
        assert!(!is_last(&key(), &body));
    }

    #[test]
    fn the_guest_digest_is_not_compared() {
        let stamped = |digest: &str| json!({"metadata": {"name": "web", "annotations": {ANNOTATION_GUEST_DIGEST: digest}}});
        let (a, b) = (stamped("sha256:a"), stamped("sha256:b"));
        assert_eq!(without_provenance(&a), without_provenance(&b));
        assert_eq!(without_provenance(&a), json!({"metadata": {"name": "web"}}));
        let kept =
            json!({"metadata": {"annotations": {"team": "x", ANNOTATION_GUEST_DIGEST: "d"}}});
        assert_eq!(
            without_provenance(&kept),
            json!({"metadata": {"annotations": {"team": "x"}}})
        );
        // NB: the body hash agrees with without_provenance, without copying the body.
        let bodies = [
            a.clone(),
            b,
            json!({"metadata": {"name": "web"}}),
            json!({"metadata": {"name": "web", "annotations": {}}}),
            json!({"metadata": {"name": "api"}}),
            json!({"metadata": {"name": "web", "annotations": {"team": "x"}}}),
            json!({"metadata": {"name": "web", "annotations": {"team": "x", ANNOTATION_GUEST_DIGEST: "d"}}}),
            json!({"metadata": {"name": "web", "annotations": {"team": "y"}}}),
            json!({"metadata": {"name": "web"}, "spec": {"replicas": 1}}),
            json!({"metadata": {"name": "web"}, "spec": {"replicas": 2}}),
            json!({"metadata": "web"}),
            json!("web"),
        ];
        for x in &bodies {
            for y in &bodies {
                assert_eq!(
                    hash(x) == hash(y),
                    without_provenance(x) == without_provenance(y),
                    "{x} and {y}"
                );
            }
        }
    }
}

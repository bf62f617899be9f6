//! The host's stamp on a guest's objects: namespace, owner reference, labels and the guest
//! digest annotation. The result is exactly what the controller applies. The digest is
//! provenance, not content: what is compared to decide whether a child changes leaves it out
//! ([`without_provenance`], [`hash_without_provenance`]).

use std::hash::{Hash, Hasher};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde_json::{Map, Value};

use crate::consts::{
    ANNOTATION_GUEST_DIGEST, DEFAULT_NAMESPACE, LABEL_INSTANCE, LABEL_MANAGED_BY, MANAGED_BY,
    OWNER_API_VERSION, OWNER_KIND,
};
use crate::crd::AppService;
use crate::guest::DesiredObject;

/// The label selector of the children the operator manages (and watches): the label
/// [`children`] puts on each.
pub fn managed_selector() -> String {
    format!("{LABEL_MANAGED_BY}={MANAGED_BY}")
}

/// Stamps each object's body for `app`: `metadata.namespace` is the AppService's (or
/// `default`), the host's labels and the digest annotation override the guest's, and
/// `ownerReferences` is the AppService as controller, or absent when the AppService has no uid
/// (a local file: the controller always has one).
pub fn children(
    app: &AppService,
    guest_digest: &str,
    objects: Vec<DesiredObject>,
) -> Vec<DesiredObject> {
    let namespace = app
        .metadata
        .namespace
        .as_deref()
        .unwrap_or(DEFAULT_NAMESPACE);
    let instance = app.metadata.name.as_deref().unwrap_or_default();
    let owner = owner_reference(app).map(|o| {
        // NB: OwnerReference is plain strings and bools; serializing it cannot fail.
        serde_json::to_value(o).expect("OwnerReference serializes to JSON")
    });
    objects
        .into_iter()
        .map(|mut o| {
            let meta = field(object(&mut o.body), "metadata");
            meta.insert("name".into(), o.name.clone().into());
            meta.insert("namespace".into(), namespace.into());
            let labels = field(meta, "labels");
            labels.insert(LABEL_MANAGED_BY.into(), MANAGED_BY.into());
            labels.insert(LABEL_INSTANCE.into(), instance.into());
            field(meta, "annotations").insert(ANNOTATION_GUEST_DIGEST.into(), guest_digest.into());
            match &owner {
                Some(owner) => {
                    meta.insert("ownerReferences".into(), Value::Array(vec![owner.clone()]))
                }
                None => meta.remove("ownerReferences"),
            };
            o
        })
        .collect()
}

/// `body` without the guest digest annotation (and without `annotations` if nothing else is
/// left in it): what the up-to-date checks compare.
pub fn without_provenance(body: &Value) -> Value {
    let mut body = body.clone();
    if let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut)
        && let Some(annotations) = meta.get_mut("annotations").and_then(Value::as_object_mut)
    {
        annotations.remove(ANNOTATION_GUEST_DIGEST);
        if annotations.is_empty() {
            meta.remove("annotations");
        }
    }
    body
}

/// Feeds `body` to `state` as [`without_provenance`] leaves it, without copying it: bodies
/// that are equal without the digest annotation hash equally.
pub fn hash_without_provenance(body: &Value, state: &mut impl Hasher) {
    let Some(object) = body.as_object() else {
        return body.hash(state);
    };
    state.write_usize(object.len());
    for (key, value) in object {
        key.hash(state);
        match value {
            Value::Object(meta) if key == "metadata" => hash_metadata(meta, state),
            _ => value.hash(state),
        }
    }
}

/// [`hash_without_provenance`] of `metadata`: the annotations without the digest, and no
/// annotations at all when nothing else is left in them.
fn hash_metadata(meta: &Map<String, Value>, state: &mut impl Hasher) {
    let kept = |annotations: &'_ Map<String, Value>| {
        annotations
            .iter()
            .filter(|(key, _)| key.as_str() != ANNOTATION_GUEST_DIGEST)
            .count()
    };
    let annotations = meta.get("annotations").and_then(Value::as_object);
    let dropped = annotations.is_some_and(|a| kept(a) == 0);
    state.write_usize(meta.len() - usize::from(dropped));
    for (key, value) in meta {
        match value {
            Value::Object(annotations) if key == "annotations" => {
                if dropped {
                    continue;
                }
                key.hash(state);
                state.write_usize(kept(annotations));
                for (name, annotation) in annotations {
                    if name != ANNOTATION_GUEST_DIGEST {
                        name.hash(state);
                        annotation.hash(state);
                    }
                }
            }
            _ => {
                key.hash(state);
                value.hash(state);
            }
        }
    }
}

/// The AppService as the controlling owner of its children, or `None` without name or uid.
pub fn owner_reference(app: &AppService) -> Option<OwnerReference> {
    Some(OwnerReference {
        api_version: OWNER_API_VERSION.into(),
        kind: OWNER_KIND.into(),
        name: app.metadata.name.clone()?,
        uid: app.metadata.uid.clone()?,
        controller: Some(true),
        block_owner_deletion: Some(true),
    })
}

/// `value` as an object, replacing anything that is not one.
fn object(value: &mut Value) -> &mut Map<String, Value> {
    if !value.is_object() {
        *value = Value::Object(Map::new());
    }
    match value {
        Value::Object(map) => map,
        _ => unreachable!("replaced by an object above"),
    }
}

/// The object under `key`, created or replaced as needed.
fn field<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    object(map.entry(key).or_insert(Value::Null))
}

#[cfg(test)]
mod tests {
    use kube::api::ObjectMeta;
    use serde_json::json;

    use super::*;
    use crate::crd::AppServiceSpec;

    fn app(uid: Option<&str>, namespace: Option<&str>) -> AppService {
        let mut app = AppService::new(
            "nginx",
            AppServiceSpec {
                replicas: None,
                image: "nginx".into(),
                ports: vec![],
            },
        );
        app.metadata = ObjectMeta {
            name: Some("nginx".into()),
            namespace: namespace.map(Into::into),
            uid: uid.map(Into::into),
            ..ObjectMeta::default()
        };
        app
    }

    fn deployment(body: Value) -> DesiredObject {
        DesiredObject {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            name: "nginx".into(),
            body,
        }
    }

    #[test]
    fn stamps_namespace_owner_labels_and_digest() {
        let body = json!({"metadata": {"name": "nginx", "labels": {"app": "nginx", LABEL_MANAGED_BY: "someone"}}, "spec": {}});
        let out = children(
            &app(Some("u-1"), Some("web")),
            "sha256:ab",
            vec![deployment(body)],
        );
        assert_eq!(
            out[0].body,
            json!({"metadata": {
                "name": "nginx",
                "namespace": "web",
                "labels": {"app": "nginx", LABEL_MANAGED_BY: MANAGED_BY, LABEL_INSTANCE: "nginx"},
                "annotations": {ANNOTATION_GUEST_DIGEST: "sha256:ab"},
                "ownerReferences": [{"apiVersion": OWNER_API_VERSION, "kind": OWNER_KIND, "name": "nginx",
                    "uid": "u-1", "controller": true, "blockOwnerDeletion": true}],
            }, "spec": {}})
        );
    }

    #[test]
    fn without_uid_there_is_no_owner_and_the_namespace_defaults() {
        let out = children(
            &app(None, None),
            "sha256:ab",
            vec![deployment(json!({"metadata": {"ownerReferences": []}}))],
        );
        let meta = &out[0].body["metadata"];
        assert!(meta.get("ownerReferences").is_none());
        assert_eq!(meta["namespace"], DEFAULT_NAMESPACE);
    }

    #[test]
    fn tolerates_bodies_without_metadata() {
        let out = children(
            &app(Some("u"), Some("ns")),
            "d",
            vec![deployment(json!(null))],
        );
        assert_eq!(out[0].body["metadata"]["name"], "nginx");
    }
}

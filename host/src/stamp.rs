//! Ownership stamping of guest output and the constants every writer shares.
//!
//! PROVISIONAL (controller branch): the guest-runtime branch owns this module; this minimal
//! version lets the controller build until that branch is merged.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use crate::crd::AppService;
use crate::guest::DesiredObject;

/// The one server-side apply field manager of the operator.
pub const FIELD_MANAGER: &str = "app-operator";
/// `app.kubernetes.io/managed-by` value on every child.
pub const MANAGED_BY: &str = "app-operator";
/// Label key naming the operator that manages an object.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Label key naming the AppService an object belongs to.
pub const INSTANCE_LABEL: &str = "app.kubernetes.io/instance";
/// Annotation key carrying the digest of the guest that rendered an object.
pub const GUEST_DIGEST_ANNOTATION: &str = "apps.kudevops.io/guest-digest";

/// The ownerReference every child carries: the AppService as controller, blocking its deletion.
pub fn owner_reference(app: &AppService) -> Option<OwnerReference> {
    let mut owner = app.controller_owner_ref(&())?;
    owner.block_owner_deletion = Some(true);
    Some(owner)
}

/// Returns the object's body with apiVersion, kind, name, namespace, the managed-by and instance
/// labels, the guest digest annotation and the controller ownerReference set.
pub fn stamp(app: &AppService, digest: &str, object: &DesiredObject) -> Value {
    let mut body = object.body.clone();
    if !body.is_object() {
        body = json!({});
    }
    body["apiVersion"] = json!(object.api_version);
    body["kind"] = json!(object.kind);
    let meta = &mut body["metadata"];
    if !meta.is_object() {
        *meta = json!({});
    }
    meta["name"] = json!(object.name);
    meta["namespace"] = json!(app.namespace());
    if !meta["labels"].is_object() {
        meta["labels"] = json!({});
    }
    meta["labels"][MANAGED_BY_LABEL] = json!(MANAGED_BY);
    meta["labels"][INSTANCE_LABEL] = json!(app.name_any());
    if !meta["annotations"].is_object() {
        meta["annotations"] = json!({});
    }
    meta["annotations"][GUEST_DIGEST_ANNOTATION] = json!(digest);
    meta["ownerReferences"] = json!(owner_reference(app).into_iter().collect::<Vec<_>>());
    body
}

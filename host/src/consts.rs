//! Names the operator writes into the cluster, in one place.

/// Field manager of every server-side apply the operator makes.
pub const FIELD_MANAGER: &str = "app-operator";

/// `apiVersion` of the AppService owner, as written in ownerReferences.
pub const OWNER_API_VERSION: &str = "apps.kudevops.io/v1alpha1";

/// `kind` of the AppService owner, as written in ownerReferences.
pub const OWNER_KIND: &str = "AppService";

/// Label on every child: who manages it.
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";

/// Value of [`LABEL_MANAGED_BY`].
pub const MANAGED_BY: &str = "app-operator";

/// Label on every child: the name of the owning AppService.
pub const LABEL_INSTANCE: &str = "app.kubernetes.io/instance";

/// Annotation on every child: the digest (`sha256:<hex>`) of the guest that last changed it (a
/// guest rendering the same objects as the one before it rewrites no child).
pub const ANNOTATION_GUEST_DIGEST: &str = "apps.kudevops.io/guest-digest";

/// Annotation a user puts on an existing Deployment or Service to hand it over to the
/// AppService named in its value; without it, the operator never adopts an object it did not
/// create.
pub const ANNOTATION_ADOPT: &str = "apps.kudevops.io/adopt";

/// Annotation prefixes that other controllers own on the children, with who writes them: the
/// Deployment controller keeps `deployment.kubernetes.io/revision` on every Deployment. A guest
/// may not set them (it would fight that controller), so a change under them is never a change
/// to what the operator applied.
pub const FOREIGN_ANNOTATION_PREFIXES: [(&str, &str); 1] =
    [("deployment.kubernetes.io/", "Deployment controller")];

/// Who owns annotation `key`, when it is under one of [`FOREIGN_ANNOTATION_PREFIXES`].
pub fn foreign_annotation_owner(key: &str) -> Option<&'static str> {
    FOREIGN_ANNOTATION_PREFIXES
        .iter()
        .find(|(prefix, _)| key.starts_with(prefix))
        .map(|(_, owner)| *owner)
}

/// Lease that replicas running with `--leader-elect` compete for, in the operator's namespace.
pub const LEADER_LEASE: &str = "app-operator-leader";

/// Namespace of an AppService that has none, e.g. a local file given to `render`.
pub const DEFAULT_NAMESPACE: &str = "default";

/// Default name of the ConfigMap the operator reads its guest from.
pub const GUEST_CONFIGMAP: &str = "app-operator-guest";

/// `binaryData` key of the stable guest in the guest ConfigMap.
pub const GUEST_KEY: &str = "guest.wasm";

/// `binaryData` key of the canary guest in the guest ConfigMap.
pub const CANARY_KEY: &str = "canary.wasm";

/// `data` key of the stable guest given by reference instead: an OCI reference pinned by digest,
/// `registry/repository@sha256:<hex>`, that the operator pulls (`guest push --to` writes it).
/// A ConfigMap holds the stable guest under this key or under [`GUEST_KEY`], not both.
pub const GUEST_REF_KEY: &str = "guest.ref";

/// `data` key of the canary guest given by reference.
pub const CANARY_REF_KEY: &str = "canary.ref";

/// `binaryData` key of the stable guest's signature in the guest ConfigMap: the content of a
/// signature file (`app-operator guest sign`), required with `--guest-trusted-key`.
pub const GUEST_SIGNATURE_KEY: &str = "guest.wasm.sig";

/// `binaryData` key of the canary guest's signature in the guest ConfigMap.
pub const CANARY_SIGNATURE_KEY: &str = "canary.wasm.sig";

/// Annotation on the guest ConfigMap: the label selector of the AppServices the canary renders.
pub const ANNOTATION_CANARY_SELECTOR: &str = "apps.kudevops.io/canary-selector";

/// Annotation on the guest ConfigMap: the sha256 the stable guest must have (`sha256:<hex>` or
/// `<hex>`); a guest that does not match is rejected.
pub const ANNOTATION_GUEST_PIN: &str = "apps.kudevops.io/guest-sha256";

/// Annotation on the guest ConfigMap: the sha256 the canary guest must have.
pub const ANNOTATION_CANARY_PIN: &str = "apps.kudevops.io/canary-sha256";

/// Suffix of the record of the guests in force: a ConfigMap beside the guest ConfigMap, named
/// `<guest ConfigMap>-accepted`, that only the operator writes.
pub const RECORD_SUFFIX: &str = "-accepted";

/// Annotation the operator writes on the guest ConfigMap: `Active` or `Rejected`.
pub const ANNOTATION_GUEST_STATE: &str = "apps.kudevops.io/guest-state";

/// Annotation the operator writes on the guest ConfigMap: digest of the stable guest in force.
pub const ANNOTATION_GUEST_ACTIVE: &str = "apps.kudevops.io/guest-active";

/// Annotation the operator writes on the guest ConfigMap: digest of the canary guest in force.
pub const ANNOTATION_GUEST_CANARY: &str = "apps.kudevops.io/guest-canary";

/// Annotation the operator writes on the guest ConfigMap: why the last candidate was rejected.
pub const ANNOTATION_GUEST_MESSAGE: &str = "apps.kudevops.io/guest-message";

/// Condition types the host owns: the three it writes on every AppService (`Ready`,
/// `GuestError`, `Degraded`) and three it keeps for itself. A guest may not return them.
pub const HOST_CONDITION_TYPES: [&str; 6] = [
    "Ready",
    "GuestError",
    "Degraded",
    "Available",
    "Progressing",
    "GuestFailed",
];

/// Prefix of condition types reserved to the host; a guest may not return them either.
pub const HOST_CONDITION_PREFIX: &str = "apps.kudevops.io/";

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

/// Annotation on every child: the digest (`sha256:<hex>`) of the guest that rendered it.
pub const ANNOTATION_GUEST_DIGEST: &str = "apps.kudevops.io/guest-digest";

/// Lease that replicas running with `--leader-elect` compete for, in the operator's namespace.
pub const LEADER_LEASE: &str = "app-operator-leader";

/// Namespace of an AppService that has none, e.g. a local file given to `render`.
pub const DEFAULT_NAMESPACE: &str = "default";

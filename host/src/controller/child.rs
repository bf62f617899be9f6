//! The kinds of children the controller manages, and how one child is named.

/// The kinds of children the controller applies, watches and prunes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ChildKind {
    /// `apps/v1 Deployment`.
    Deployment,
    /// `v1 Service`.
    Service,
}

impl ChildKind {
    /// The kind of a guest-emitted object, if the controller manages it.
    pub fn of(api_version: &str, kind: &str) -> Option<Self> {
        match (api_version, kind) {
            ("apps/v1", "Deployment") => Some(Self::Deployment),
            ("v1", "Service") => Some(Self::Service),
            _ => None,
        }
    }

    /// The Kubernetes kind name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deployment => "Deployment",
            Self::Service => "Service",
        }
    }

    /// The resource's plural name, e.g. for the watch that caches it.
    pub fn plural(self) -> &'static str {
        match self {
            Self::Deployment => "deployments",
            Self::Service => "services",
        }
    }
}

/// `(kind, namespace, name)` of a child.
pub(super) type ChildKey = (ChildKind, String, String);

//! Errors of one reconcile: every error that can reach the controller's `error_policy`, and
//! nothing else (the CLI's errors are the crate's [`crate::Error`]).

use crate::guest;

/// Why a reconcile failed. [`Error::metric_label`] and [`Error::reason`] classify it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The guest failed or refused the AppService, or the host refused its output.
    #[error(transparent)]
    Guest(#[from] guest::Error),
    /// The guest emitted a kind the controller does not apply.
    #[error("the guest emitted {api_version} {kind}, which the controller does not manage")]
    UnsupportedKind {
        /// The emitted apiVersion.
        api_version: String,
        /// The emitted kind.
        kind: String,
    },
    /// Server-side apply of a child failed.
    #[error("failed to apply {kind} {name}")]
    Apply {
        /// Kind of the child.
        kind: &'static str,
        /// Name of the child.
        name: String,
        /// What the API server said.
        #[source]
        source: kube::Error,
    },
    /// A child the guest emits exists and is not controlled by this AppService: it is left
    /// alone (no adoption).
    #[error(
        "{kind} {name} already exists and is not controlled by this AppService ({owner}); \
         it is left untouched: delete it, or annotate it `{annotation}={app}` to hand it over"
    )]
    ChildConflict {
        /// Kind of the child.
        kind: &'static str,
        /// Name of the child.
        name: String,
        /// Who controls it, e.g. `no controller` or `controlled by AppService web (uid ...)`.
        owner: String,
        /// Name of the AppService that wants it.
        app: String,
        /// The opt-in annotation, [`crate::consts::ANNOTATION_ADOPT`].
        annotation: &'static str,
    },
    /// Reading a child before applying it failed.
    #[error("failed to read {kind} {name}")]
    Get {
        /// Kind of the child.
        kind: &'static str,
        /// Name of the child.
        name: String,
        /// What the API server said.
        #[source]
        source: kube::Error,
    },
    /// A child the API server said exists was gone when read right after: it is created on the
    /// next reconcile.
    #[error("{kind} {name} was deleted while it was being applied")]
    Vanished {
        /// Kind of the child.
        kind: &'static str,
        /// Name of the child.
        name: String,
    },
    /// Deleting a child the guest no longer emits failed.
    #[error("failed to delete {kind} {name}")]
    Prune {
        /// Kind of the child.
        kind: &'static str,
        /// Name of the child.
        name: String,
        /// What the API server said.
        #[source]
        source: kube::Error,
    },
    /// Writing an AppService status failed.
    #[error("failed to write the status of AppService {name}")]
    Status {
        /// Name of the AppService.
        name: String,
        /// What the API server said.
        #[source]
        source: kube::Error,
    },
}

impl Error {
    /// A fixed, low-cardinality name of the error, for the `reconcile_errors_total` label.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Guest(_) => "guest",
            Error::UnsupportedKind { .. } => "unsupported_kind",
            Error::Apply { .. } => "apply",
            Error::ChildConflict { .. } => "child_conflict",
            Error::Get { .. } => "get",
            Error::Vanished { .. } => "vanished",
            Error::Prune { .. } => "prune",
            Error::Status { .. } => "status",
        }
    }

    /// The reason a condition or an Event gives for the failure, in the API's CamelCase.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Guest(e) => e.reason(),
            Error::UnsupportedKind { .. } => "UnsupportedKind",
            Error::Apply { .. } => "ApplyFailed",
            Error::ChildConflict { .. } => "ChildConflict",
            Error::Get { .. } => "ReadFailed",
            Error::Vanished { .. } => "ChildVanished",
            Error::Prune { .. } => "PruneFailed",
            Error::Status { .. } => "StatusFailed",
        }
    }
}

/// Result of a reconcile step.
pub(super) type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::Error;

    #[test]
    fn a_read_is_not_reported_as_an_apply() {
        let source = || kube::Error::Service("connection refused".into());
        let get = Error::Get {
            kind: "Deployment",
            name: "web".into(),
            source: source(),
        };
        assert_eq!((get.metric_label(), get.reason()), ("get", "ReadFailed"));
        let apply = Error::Apply {
            kind: "Deployment",
            name: "web".into(),
            source: source(),
        };
        assert_eq!(
            (apply.metric_label(), apply.reason()),
            ("apply", "ApplyFailed")
        );
        let guest = Error::from(crate::guest::Error::Fuel(1));
        assert_eq!(guest.reason(), "OutOfFuel");
    }
}

//! The dry run on the API server: a guest's stamped output sent as a server-side apply with
//! `dryRun=All`, the field manager and `force` of the controller's apply, so that what the API
//! server would refuse (an invalid field, a change to an immutable field such as a Deployment's
//! selector) is found before anything is written.
//!
//! A candidate guest must pass it before it is put in force ([`super::judge`]), and `plan` shows
//! its results ([`get`], [`apply`]). A 4xx answer is a verdict ([`Error::Refused`]); anything else
//! (5xx, 429, a timeout, no connection) says nothing about the object ([`Error::Unavailable`]),
//! and the swap tries again later.

use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use kube::core::{GroupVersionKind, Status};
use kube::{Api, Client};

use crate::consts::FIELD_MANAGER;
use crate::guest::DesiredObject;

/// Most AppServices whose children are dry-run at once; each sends its children (two, for the
/// default guest) at once, so about twice as many requests are in flight. The API server of a
/// small control plane is saturated well below this.
pub const CONCURRENCY: usize = 8;

/// Why a child was not dry-run applied.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server answered 4xx (invalid, a changed immutable field, forbidden, ...): a
    /// verdict on the object.
    #[error("the API server refuses {kind} {name}")]
    Refused {
        /// Kind of the child.
        kind: String,
        /// Name of the child.
        name: String,
        /// What the API server said.
        #[source]
        status: Box<Status>,
    },
    /// No verdict: the API server failed (5xx), throttled (429) or timed out, or could not be
    /// reached.
    #[error("failed to dry-run {kind} {name}")]
    Unavailable {
        /// Kind of the child.
        kind: String,
        /// Name of the child.
        name: String,
        /// What the client said.
        #[source]
        source: kube::Error,
    },
}

impl Error {
    /// Classifies `source`, the failure of a request about child `kind` `name`.
    pub(super) fn new(kind: &str, name: &str, source: kube::Error) -> Self {
        let (kind, name) = (kind.to_owned(), name.to_owned());
        match source {
            kube::Error::Api(status) if is_verdict(status.code) => {
                Error::Refused { kind, name, status }
            }
            source => Error::Unavailable { kind, name, source },
        }
    }

    /// Whether the answer may change on its own, so that it is no verdict on the object.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Unavailable { .. })
    }
}

/// Whether HTTP status `code` judges the request: a 4xx other than 408 (timeout) and 429
/// (throttled).
fn is_verdict(code: u16) -> bool {
    (400..500).contains(&code) && code != 408 && code != 429
}

/// The dynamic API of `object`'s kind in namespace `ns`.
fn api(client: &Client, ns: &str, object: &DesiredObject) -> Api<DynamicObject> {
    let (group, version) = match object.api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", object.api_version.as_str()),
    };
    let gvk = GroupVersionKind::gvk(group, version, &object.kind);
    Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk(&gvk))
}

/// The live object `object` names in `ns`, if any.
pub async fn get(
    client: &Client,
    ns: &str,
    object: &DesiredObject,
) -> Result<Option<DynamicObject>, Error> {
    api(client, ns, object)
        .get_opt(&object.name)
        .await
        .map_err(|e| Error::new(&object.kind, &object.name, e))
}

/// `object` (stamped) as a server-side apply dry run in `ns`: the object as the API server
/// would store it, or why not.
pub async fn apply(
    client: &Client,
    ns: &str,
    object: &DesiredObject,
) -> Result<DynamicObject, Error> {
    let params = PatchParams::apply(FIELD_MANAGER).force().dry_run();
    api(client, ns, object)
        .patch(&object.name, &params, &Patch::Apply(&object.body))
        .await
        .map_err(|e| Error::new(&object.kind, &object.name, e))
}

#[cfg(test)]
pub(super) mod tests {
    use kube::core::Status;

    use super::Error;

    /// An error with the API server's answer `code`.
    pub(in crate::swap) fn answered(code: u16) -> Error {
        let status = Status {
            code,
            ..Status::failure("Deployment.apps \"web\" is invalid", "Invalid")
        };
        Error::new("Deployment", "web", kube::Error::Api(status.boxed()))
    }

    #[test]
    fn client_errors_are_verdicts_the_rest_is_transient() {
        for code in [400, 403, 404, 409, 422] {
            assert!(!answered(code).is_transient(), "{code}");
        }
        for code in [408, 429, 500, 503, 504] {
            assert!(answered(code).is_transient(), "{code}");
        }
        let unreachable = kube::Error::Service("connection refused".into());
        assert!(Error::new("Service", "web", unreachable).is_transient());
    }

    #[test]
    fn a_refusal_names_the_child_and_what_the_server_said() {
        let message = crate::error_chain(&answered(422));
        assert_eq!(
            message,
            "the API server refuses Deployment web: Deployment.apps \"web\" is invalid: Invalid"
        );
    }
}

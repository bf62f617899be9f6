//! The dry run on the API server: a guest's stamped output sent as a server-side apply with
//! `dryRun=All`, the field manager and `force` of the controller's apply, so that what the API
//! server would refuse (an invalid field, a change to an immutable field such as a Deployment's
//! selector) is found before anything is written.
//!
//! A candidate guest must pass it before it is put in force ([`judge`]), and `plan` shows its
//! results ([`get`], [`apply`]). A 4xx answer is a verdict ([`Error::Refused`]); anything else
//! (5xx, 429, a timeout, no connection) says nothing about the object ([`Error::Unavailable`]),
//! and the swap tries again later.

use futures::{StreamExt, future, stream};
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use kube::core::{GroupVersionKind, Status};
use kube::{Api, Client, ResourceExt};
use tracing::debug;

use super::dry_run::{Problem, Regression, Regressions};
use crate::consts::{DEFAULT_NAMESPACE, FIELD_MANAGER};
use crate::crd::AppService;
use crate::guest::DesiredObject;
use crate::metrics::Metrics;
use crate::stamp;

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
    fn new(kind: &str, name: &str, source: kube::Error) -> Self {
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

/// Dry-runs every object of `app` rendered by guest `digest` (stamped here) at once, counting
/// them in `metrics`; returns the first failure, a refusal before a transient one.
async fn apply_rendered(
    client: &Client,
    metrics: &Metrics,
    app: &AppService,
    digest: &str,
    objects: &[DesiredObject],
) -> Result<(), Error> {
    let ns = app.namespace().unwrap_or_else(|| DEFAULT_NAMESPACE.into());
    let stamped = stamp::children(app, digest, objects.to_vec());
    metrics.guest_dry_run_applies.inc_by(stamped.len() as u64);
    let results = future::join_all(stamped.iter().map(|o| apply(client, &ns, o))).await;
    let mut errors: Vec<Error> = results.into_iter().filter_map(Result::err).collect();
    errors.sort_by_key(Error::is_transient);
    errors.into_iter().next().map_or(Ok(()), Err)
}

/// An AppService whose children the candidate would change: what the guest in force and the
/// candidate render for it (both rendered in the sandbox, neither stamped).
#[derive(Debug)]
pub struct Changed {
    /// The AppService.
    pub app: AppService,
    /// Digest of the guest in force for it.
    pub current_digest: String,
    /// What that guest renders.
    pub current: Vec<DesiredObject>,
    /// Digest of the candidate's guest for it.
    pub candidate_digest: String,
    /// What the candidate renders.
    pub candidate: Vec<DesiredObject>,
}

/// What the API server says about one changed AppService ([`verdict`]). The output of the
/// guest in force is sent only after a refusal of the candidate's.
async fn check(client: &Client, metrics: &Metrics, changed: &Changed) -> Option<Problem> {
    let app = &changed.app;
    let (candidate, current) = (&changed.candidate_digest, &changed.current_digest);
    let candidate = apply_rendered(client, metrics, app, candidate, &changed.candidate).await;
    let current = match &candidate {
        Err(e) if !e.is_transient() => {
            Some(apply_rendered(client, metrics, app, current, &changed.current).await)
        }
        _ => None,
    };
    if let Some(Err(e)) = &current {
        debug!(app = %app.name_any(), current = %e, "the guest in force fails the dry run too");
    }
    verdict(candidate, current)
}

/// The problem of an AppService given the dry run of the candidate's output and, after a
/// refusal, of the output of the guest in force: none if the candidate's is accepted, or
/// refused while that of the guest in force is refused too (no regression); a transient
/// failure of either is no verdict.
fn verdict(candidate: Result<(), Error>, current: Option<Result<(), Error>>) -> Option<Problem> {
    match (candidate, current) {
        (Ok(()), _) => None,
        (Err(e), _) if e.is_transient() => Some(Problem::Api(e)),
        (Err(_), Some(Err(e))) if e.is_transient() => Some(Problem::Api(e)),
        (Err(_), Some(Err(_))) => None,
        (Err(refused), Some(Ok(()))) | (Err(refused), None) => Some(Problem::Api(refused)),
    }
}

/// Sends the candidate's output for every AppService in `changed` as a server-side dry run,
/// [`CONCURRENCY`] AppServices at a time, counting the objects sent in `metrics`. Returns `judged` (how many AppServices the whole dry
/// run covered), or the regressions: AppServices whose candidate output the API server refuses
/// when it accepts the output of the guest in force, and those it gave no answer for
/// (transient: [`Regressions::is_transient`]).
pub async fn judge(
    client: &Client,
    metrics: &Metrics,
    changed: Vec<Changed>,
    judged: usize,
) -> Result<usize, Regressions> {
    let checks = changed.into_iter().map(|c| {
        let (client, metrics) = (client.clone(), metrics.clone());
        async move {
            let problem = check(&client, &metrics, &c).await?;
            Some(Regression {
                namespace: c.app.namespace().unwrap_or_default(),
                name: c.app.name_any(),
                digest: c.candidate_digest,
                problem,
            })
        }
    });
    let mut regressions: Vec<Regression> = stream::iter(checks)
        .buffer_unordered(CONCURRENCY)
        .filter_map(future::ready)
        .collect()
        .await;
    if regressions.is_empty() {
        return Ok(judged);
    }
    regressions.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    Err(Regressions {
        regressions,
        total: judged,
    })
}

#[cfg(test)]
mod tests {
    use kube::core::Status;

    use super::Error;

    fn answered(code: u16) -> Error {
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
    fn only_a_refusal_the_guest_in_force_does_not_share_is_a_regression() {
        let verdict = |candidate, current| match super::verdict(candidate, current) {
            None => "accepted",
            Some(super::Problem::Api(e)) if e.is_transient() => "retry",
            Some(_) => "regression",
        };
        let unreachable = || {
            Error::new(
                "Service",
                "web",
                kube::Error::Service("connection refused".into()),
            )
        };
        assert_eq!(verdict(Ok(()), None), "accepted");
        assert_eq!(verdict(Err(answered(422)), Some(Ok(()))), "regression");
        assert_eq!(
            verdict(Err(answered(422)), Some(Err(answered(422)))),
            "accepted"
        );
        assert_eq!(
            verdict(Err(answered(422)), Some(Err(unreachable()))),
            "retry"
        );
        assert_eq!(verdict(Err(answered(503)), None), "retry");
        assert_eq!(verdict(Err(unreachable()), None), "retry");
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

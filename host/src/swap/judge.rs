//! The API server's verdict on a candidate set of guests: the output it would change, sent as
//! a server-side dry run ([`super::server_dry_run`]), and the regressions found there.

use futures::{StreamExt, future, stream};
use kube::{Client, ResourceExt};
use tracing::debug;

use super::regression::{Problem, Regression, Regressions};
use super::server_dry_run::{CONCURRENCY, Error, apply};
use crate::consts::DEFAULT_NAMESPACE;
use crate::crd::AppService;
use crate::guest::DesiredObject;
use crate::metrics::Metrics;
use crate::stamp;

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
pub(super) struct Changed {
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
pub(super) async fn judge(
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
    use super::super::server_dry_run::tests::answered;
    use super::{Error, Problem};

    #[test]
    fn only_a_refusal_the_guest_in_force_does_not_share_is_a_regression() {
        let verdict = |candidate, current| match super::verdict(candidate, current) {
            None => "accepted",
            Some(Problem::Api(e)) if e.is_transient() => "retry",
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
}

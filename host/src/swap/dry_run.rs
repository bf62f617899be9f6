//! The dry run a candidate set of guests must pass before it is put in force: every live
//! AppService rendered, in the sandbox, by the guest in force for it and by the guest the
//! candidate would give it. Only regressions reject the candidate. Nothing is written. The
//! AppServices whose output would change then go through the API server's dry run
//! ([`super::server_dry_run`]).

use std::collections::HashMap;

use futures::{StreamExt, stream};
use kube::ResourceExt;

use super::InForce;
use super::judge::Changed;
use super::regression::{Problem, Regression, Regressions};
use crate::crd::AppService;
use crate::guest::{self, DesiredObject, admission::Level};

/// Most dry-run renders in flight. NB: the guest calls themselves share the runtime's memory
/// budget with the controller's reconciles (`guest::Config::instances`), so this bounds only
/// the AppServices queued, not the memory.
const CONCURRENCY: usize = 16;

/// How one AppService fared under the guest in force and under the candidate: the number of
/// objects each rendered, or its error.
#[derive(Debug)]
pub(super) struct Outcome {
    /// Namespace of the AppService.
    pub namespace: String,
    /// Name of the AppService.
    pub name: String,
    /// Digest of the candidate's guest for it.
    pub digest: String,
    /// The guest in force for it.
    pub current: Result<usize, guest::Error>,
    /// The candidate's guest for it.
    pub candidate: Result<usize, guest::Error>,
}

/// The regressions among `outcomes`, sorted by namespace and name. An AppService the guest in
/// force fails on is never a regression, whatever the candidate does.
pub(super) fn regressions(outcomes: Vec<Outcome>) -> Vec<Regression> {
    let mut found: Vec<Regression> = outcomes
        .into_iter()
        .filter_map(|o| {
            let problem = match (o.current, o.candidate) {
                (Err(e), _) | (_, Err(e)) if e.is_interrupted() => Problem::Interrupted(e),
                (Err(_), _) => return None,
                (Ok(_), Err(e)) => Problem::Fails(e),
                (Ok(children), Ok(0)) if children > 0 => Problem::PrunesAll { children },
                (Ok(_), Ok(_)) => return None,
            };
            Some(Regression {
                namespace: o.namespace,
                name: o.name,
                digest: o.digest,
                problem,
            })
        })
        .collect();
    found.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    found
}

/// Renders every AppService in `apps` through the guest `current` selects for it and the one
/// `candidate` selects, under the output policy at the level `levels` gives for its namespace
/// (an AppService both select the same guest for is not rendered: nothing can change). Returns
/// how many AppServices were judged and those whose output the candidate changes (for the
/// server-side dry run), or the regressions.
///
/// The renders run [`CONCURRENCY`] at once. A render that failed transiently there (a missed
/// deadline under that load, no free instance) is rendered again, one AppService at a time, up
/// to [`RETRIES`] times, before it counts: a guest that misses its deadline even alone is
/// judged slow, one that only missed it in the crowd is not.
pub(super) async fn run(
    current: &InForce,
    candidate: &InForce,
    apps: &[AppService],
    levels: &HashMap<String, Option<Level>>,
) -> Result<(usize, Vec<Changed>), Regressions> {
    // NB: owned futures (no closures over borrowed AppServices in the stream), so the caller's
    // future stays `Send` for `tokio::spawn`.
    let renders: Vec<_> = apps
        .iter()
        .filter_map(|app| {
            let pair = Pair {
                current: current.select(app).policy,
                candidate: candidate.select(app).policy,
                level: app
                    .namespace()
                    .and_then(|ns| levels.get(&ns).copied().flatten()),
                app: app.clone(),
            };
            (pair.current.digest() != pair.candidate.digest()).then(|| pair.judge())
        })
        .collect();
    let judged: Vec<(Renders, Pair)> = stream::iter(renders)
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let mut outcomes = Vec::with_capacity(judged.len());
    let mut changed = Vec::new();
    for (mut renders, pair) in judged {
        for _ in 0..RETRIES {
            if !renders.is_unsettled() {
                break;
            }
            pair.settle(&mut renders).await;
        }
        let (outcome, change) = pair.outcome(renders);
        outcomes.push(outcome);
        changed.extend(change);
    }
    let regressions = regressions(outcomes);
    if regressions.is_empty() {
        Ok((apps.len(), changed))
    } else {
        Err(Regressions {
            regressions,
            total: apps.len(),
        })
    }
}

/// How many times a transient failure is rendered again, alone, before it counts.
const RETRIES: usize = 2;

/// One AppService and the two guests to judge it with.
struct Pair {
    current: guest::Policy,
    candidate: guest::Policy,
    level: Option<Level>,
    app: AppService,
}

/// What the two guests of a [`Pair`] rendered.
struct Renders {
    current: Result<Vec<DesiredObject>, guest::Error>,
    candidate: Result<Vec<DesiredObject>, guest::Error>,
}

impl Pair {
    /// Renders the AppService through both guests at once.
    async fn judge(self) -> (Renders, Pair) {
        let (current, candidate) = futures::join!(
            self.current.render(&self.app, self.level),
            self.candidate.render(&self.app, self.level)
        );
        (Renders { current, candidate }, self)
    }

    /// Renders again, one after the other, each side that failed transiently.
    async fn settle(&self, renders: &mut Renders) {
        if renders.current.as_ref().is_err_and(retriable) {
            renders.current = self.current.render(&self.app, self.level).await;
        }
        if renders.candidate.as_ref().is_err_and(retriable) {
            renders.candidate = self.candidate.render(&self.app, self.level).await;
        }
    }

    /// The outcome of `renders`, and the AppService as changed when both rendered and the
    /// objects differ.
    fn outcome(self, renders: Renders) -> (Outcome, Option<Changed>) {
        let (current, current_objects) = counted(renders.current);
        let (candidate, candidate_objects) = counted(renders.candidate);
        let outcome = Outcome {
            namespace: self.app.namespace().unwrap_or_default(),
            name: self.app.name_any(),
            digest: self.candidate.digest().to_owned(),
            current,
            candidate,
        };
        // NB: the same objects under another digest only change the digest annotation, which
        // the API server cannot refuse when it takes the current output.
        let changed = match (current_objects, candidate_objects) {
            (Some(current), Some(candidate)) if current != candidate => Some(Changed {
                app: self.app,
                current_digest: self.current.digest().to_owned(),
                current,
                candidate_digest: self.candidate.digest().to_owned(),
                candidate,
            }),
            _ => None,
        };
        (outcome, changed)
    }
}

impl Renders {
    /// Whether either side failed in a way worth rendering again.
    fn is_unsettled(&self) -> bool {
        [&self.current, &self.candidate]
            .into_iter()
            .any(|r| r.as_ref().is_err_and(retriable))
    }
}

/// Whether a failed render is worth rendering again before it counts: transient, and not an
/// interrupted task (which makes the whole verdict transient instead, see
/// [`super::regression::Regressions::is_transient`]).
fn retriable(error: &guest::Error) -> bool {
    error.is_transient() && !error.is_interrupted()
}

/// A render as an [`Outcome`] takes it (the number of objects, or the error), and its objects.
fn counted(
    render: Result<Vec<DesiredObject>, guest::Error>,
) -> (Result<usize, guest::Error>, Option<Vec<DesiredObject>>) {
    match render {
        Ok(objects) => (Ok(objects.len()), Some(objects)),
        Err(e) => (Err(e), None),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Outcome, Problem, Regressions, Renders, regressions, retriable};
    use crate::guest::Error;

    fn outcome(
        name: &str,
        current: Result<usize, Error>,
        candidate: Result<usize, Error>,
    ) -> Outcome {
        Outcome {
            namespace: "ns".into(),
            name: name.into(),
            digest: "sha256:new".into(),
            current,
            candidate,
        }
    }

    fn deadline() -> Error {
        Error::Deadline(Duration::from_millis(100))
    }

    #[test]
    fn only_what_gets_worse_is_a_regression() {
        let found = regressions(vec![
            outcome("renders", Ok(2), Ok(3)),
            outcome("now-fails", Ok(2), Err(deadline())),
            outcome("already-fails", Err(deadline()), Err(deadline())),
            outcome("fixed", Err(deadline()), Ok(2)),
            outcome("already-fails-empty", Err(deadline()), Ok(0)),
            outcome("prunes", Ok(2), Ok(0)),
            outcome("was-empty", Ok(0), Ok(0)),
        ]);
        let named: Vec<_> = found.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(named, ["now-fails", "prunes"]);
        assert!(matches!(
            found[0].problem,
            Problem::Fails(Error::Deadline(_))
        ));
        assert!(matches!(
            found[1].problem,
            Problem::PrunesAll { children: 2 }
        ));
    }

    #[test]
    fn the_message_lists_every_regression_up_to_ten() {
        let outcomes = (0..12)
            .rev()
            .map(|i| outcome(&format!("app-{i:02}"), Ok(1), Err(deadline())))
            .collect();
        let rejection = Regressions {
            regressions: regressions(outcomes),
            total: 20,
        };
        let message = rejection.to_string();
        assert!(message.starts_with("12 of 20 AppServices regress: guest sha256:new failed on AppService ns/app-00: guest exceeded its deadline of 100ms; "), "{message}");
        assert!(message.contains("ns/app-09"), "{message}");
        assert!(!message.contains("ns/app-10"), "{message}");
        assert!(message.ends_with("; and 2 more"), "{message}");
        assert!(!rejection.is_transient());
    }

    #[test]
    fn a_render_that_could_not_run_is_no_verdict() {
        let join = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a current-thread runtime builds")
            .block_on(async {
                let task = tokio::spawn(std::future::pending::<()>());
                task.abort();
                task.await
            })
            .expect_err("the task was aborted");
        let rejection = Regressions {
            regressions: regressions(vec![outcome("x", Err(Error::Task(join)), Ok(1))]),
            total: 1,
        };
        assert!(rejection.is_transient());
    }

    #[test]
    fn deadlines_are_rendered_again_before_they_count() {
        assert!(retriable(&deadline()));
        assert!(!retriable(&Error::Memory(1)));
        assert!(!retriable(&Error::Fuel(1)));
        let renders = |current, candidate| Renders { current, candidate };
        assert!(renders(Ok(vec![]), Err(deadline())).is_unsettled());
        assert!(renders(Err(deadline()), Err(Error::Fuel(1))).is_unsettled());
        assert!(!renders(Ok(vec![]), Err(Error::Fuel(1))).is_unsettled());
        assert!(!renders(Ok(vec![]), Ok(vec![])).is_unsettled());
    }
}

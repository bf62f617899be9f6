//! What rejects a candidate set of guests: its regressions, each an AppService it would make
//! worse than the guests in force do, found by the dry run in the sandbox ([`super::dry_run`])
//! or on the API server ([`super::judge`]).

use std::fmt;

use super::server_dry_run;
use crate::error_chain;
use crate::guest;
use crate::text::Listed;

/// Regressions a rejection message names; the rest are counted.
const LISTED: usize = 10;

/// What the candidate would make worse for one AppService.
#[derive(Debug)]
pub enum Problem {
    /// The guest in force renders it and the candidate fails (trap, limit, refused output,
    /// policy error, ...).
    Fails(guest::Error),
    /// The guest in force renders `children` objects and the candidate none: every child would
    /// be pruned.
    PrunesAll {
        /// Objects the guest in force renders.
        children: usize,
    },
    /// A render could not run at all (its blocking task failed): no verdict, try again.
    Interrupted(guest::Error),
    /// The API server refuses the candidate's output and accepts that of the guest in force,
    /// or (transient) gave no answer.
    Api(server_dry_run::Error),
}

/// A regression of the candidate on one AppService.
#[derive(Debug)]
pub struct Regression {
    /// Namespace of the AppService.
    pub namespace: String,
    /// Name of the AppService.
    pub name: String,
    /// Digest of the candidate's guest for it.
    pub digest: String,
    /// What would get worse.
    pub problem: Problem,
}

impl fmt::Display for Regression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (digest, ns, name) = (&self.digest, &self.namespace, &self.name);
        match &self.problem {
            Problem::Fails(e) => write!(
                f,
                "guest {digest} failed on AppService {ns}/{name}: {}",
                error_chain(e)
            ),
            Problem::PrunesAll { children } => write!(
                f,
                "guest {digest} renders nothing for AppService {ns}/{name}, which would prune \
                 its {children} children"
            ),
            Problem::Interrupted(e) => write!(
                f,
                "the dry run of AppService {ns}/{name} was interrupted: {}",
                error_chain(e)
            ),
            Problem::Api(e) if e.is_transient() => write!(
                f,
                "the server-side dry run of AppService {ns}/{name} got no answer: {}",
                error_chain(e)
            ),
            Problem::Api(e) => write!(
                f,
                "guest {digest}'s output for AppService {ns}/{name} fails the server-side dry \
                 run: {}",
                error_chain(e)
            ),
        }
    }
}

/// The regressions that reject a candidate, sorted by namespace and name.
#[derive(Debug, thiserror::Error)]
#[error("{} of {total} AppServices regress: {}", regressions.len(), Listed { items: regressions, max: LISTED })]
pub struct Regressions {
    /// Every regression, sorted by namespace and name.
    pub regressions: Vec<Regression>,
    /// How many AppServices the dry run covered.
    pub total: usize,
}

impl Regressions {
    /// Whether the verdict may change on its own: a render was interrupted, or the API server
    /// did not answer, rather than judged.
    pub fn is_transient(&self) -> bool {
        self.regressions.iter().any(|r| match &r.problem {
            Problem::Interrupted(_) => true,
            Problem::Api(e) => e.is_transient(),
            Problem::Fails(_) | Problem::PrunesAll { .. } => false,
        })
    }
}

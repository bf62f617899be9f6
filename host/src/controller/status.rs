//! The AppService status: computed from the outcome of a reconcile and the Deployment it applied,
//! and the guest's own conditions ([`with_guest`]).

mod reported;
pub use reported::with_guest;

use std::hash::{Hash, Hasher};

use k8s_openapi::api::apps::v1::DeploymentStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use super::view::{self, DeploymentView};
use crate::crd::{AppService, AppServiceStatus};
use crate::text::truncate_then_mark;

/// Condition type: the children are applied and the Deployment is fully rolled out and ready.
pub const READY: &str = "Ready";
/// Condition type: the guest failed; the children were left as they were.
pub const GUEST_ERROR: &str = "GuestError";
/// Condition type: applying failed, or the Deployment cannot make progress.
pub const DEGRADED: &str = "Degraded";

/// Ready's reason while the Deployment controller has not seen the latest spec.
const ROLLOUT_PENDING: &str = "RolloutPending";
/// Ready's reason while the Deployment's pods are not all ready.
const ROLLOUT_IN_PROGRESS: &str = "RolloutInProgress";

/// Longest condition message kept (the API server limits it to 32 KiB).
const MAX_MESSAGE: usize = 1024;

/// What a reconcile achieved, as far as the status is concerned.
#[derive(Debug)]
pub enum Outcome<'a> {
    /// The guest rendered and every child was applied; `deployment` is the applied Deployment,
    /// as returned by the API server, if the guest emitted one.
    Applied {
        /// The Deployment as the API server returned it after the apply.
        deployment: Option<&'a DeploymentView>,
        /// Digest of the guest that rendered the children.
        guest: &'a str,
    },
    /// The guest failed; nothing was applied or deleted.
    GuestFailed {
        /// A short PascalCase reason, e.g. `Trap`.
        reason: &'a str,
        /// The error, human-readable.
        message: String,
    },
    /// The host refused the guest's output (the output policy); nothing was applied or deleted.
    OutputRefused {
        /// The refusals, with the field paths.
        message: String,
    },
    /// The guest rendered but applying (or pruning) failed part-way, or did not start because
    /// a child exists under another controller.
    ApplyFailed {
        /// [`super::Error::reason`]: `ApplyFailed`, `ChildConflict`, `ReadFailed`, `PruneFailed`, ...
        reason: &'a str,
        /// The error, human-readable.
        message: String,
    },
}

/// Computes the status to write for `app` after `outcome`, at time `now`.
///
/// Counts and the guest digest are carried over from the previous status when the outcome has no
/// fresher figures; a condition keeps its `lastTransitionTime` while its status does not change.
pub fn desired(app: &AppService, outcome: &Outcome<'_>, now: Timestamp) -> AppServiceStatus {
    let previous = app.status.clone().unwrap_or_default();
    let generation = app.metadata.generation;
    let mut status = AppServiceStatus {
        observed_generation: generation,
        conditions: Vec::new(),
        ..previous.clone()
    };
    let mut set = |type_: &str, value: bool, reason: &str, message: String| {
        let condition = condition(
            &previous.conditions,
            type_,
            value,
            reason,
            message,
            generation,
            now,
        );
        status.conditions.push(condition);
    };
    match outcome {
        Outcome::Applied { deployment, guest } => {
            let rollout = deployment.map(Rollout::of);
            let (ready, reason, message) = match &rollout {
                None => (true, "Applied", "all children are applied".to_owned()),
                Some(r) => r.readiness(),
            };
            let (degraded, degraded_reason, degraded_message) = deployment
                .and_then(stuck)
                .map(|(reason, message)| (true, reason, message))
                .unwrap_or((false, "AsExpected", "no problem found".to_owned()));
            set(READY, ready, reason, message);
            set(
                GUEST_ERROR,
                false,
                "Rendered",
                format!("rendered by {guest}"),
            );
            set(DEGRADED, degraded, degraded_reason, degraded_message);
            status.guest_digest = Some((*guest).to_owned());
            match rollout {
                Some(r) => {
                    status.replicas = Some(r.replicas);
                    status.ready_replicas = Some(r.ready);
                    status.available_replicas = Some(r.available);
                    status.ready = Some(format!("{}/{}", r.ready, r.desired));
                    status.selector = deployment.and_then(|d| d.spec.selector.clone());
                }
                None => {
                    status.replicas = None;
                    status.ready_replicas = None;
                    status.available_replicas = None;
                    status.ready = None;
                    status.selector = None;
                }
            }
        }
        Outcome::GuestFailed { reason, message } => {
            let why = format!("the guest failed, children left as they were: {message}");
            set(READY, false, "GuestError", why);
            set(GUEST_ERROR, true, reason, message.clone());
            set(DEGRADED, false, "AsExpected", "no problem found".to_owned());
        }
        Outcome::OutputRefused { message } => {
            let why = format!("the output was refused, children left as they were: {message}");
            set(READY, false, "OutputRefused", why);
            set(GUEST_ERROR, true, "OutputRefused", message.clone());
            set(DEGRADED, false, "AsExpected", "no problem found".to_owned());
        }
        Outcome::ApplyFailed { reason, message } => {
            set(READY, false, reason, message.clone());
            set(
                GUEST_ERROR,
                false,
                "Rendered",
                "the guest rendered".to_owned(),
            );
            set(DEGRADED, true, reason, message.clone());
        }
    }
    status
}

/// Feeds `state` everything of the Deployment `d` that the status [`desired`] reads: two
/// Deployments that hash equally make the same status.
pub(super) fn hash_inputs(d: &DeploymentView, state: &mut impl Hasher) {
    Rollout::of(d).hash(state);
    stuck(d).hash(state);
    d.spec.selector.hash(state);
}

/// The rollout figures of a Deployment.
#[derive(Debug, Hash)]
struct Rollout {
    desired: i32,
    replicas: i32,
    updated: i32,
    ready: i32,
    available: i32,
    observed: bool,
}

impl Rollout {
    fn of(d: &DeploymentView) -> Self {
        let status = d.status.as_ref();
        let figure = |f: fn(&DeploymentStatus) -> Option<i32>| status.and_then(f).unwrap_or(0);
        let observed = status.and_then(|s| s.observed_generation);
        Self {
            desired: d.spec.replicas.unwrap_or(1),
            replicas: figure(|s| s.replicas),
            updated: figure(|s| s.updated_replicas),
            ready: figure(|s| s.ready_replicas),
            available: figure(|s| s.available_replicas),
            observed: observed.is_some() && observed >= d.metadata.generation,
        }
    }

    /// `(ready, reason, message)` of the Ready condition.
    fn readiness(&self) -> (bool, &'static str, String) {
        let Self {
            desired,
            replicas,
            updated,
            ready,
            available,
            observed,
        } = *self;
        if !observed {
            return (
                false,
                ROLLOUT_PENDING,
                "the Deployment controller has not seen the latest spec yet".into(),
            );
        }
        if updated == desired && ready == desired && available == desired && replicas == desired {
            return (
                true,
                "AllReplicasReady",
                format!("{ready}/{desired} replicas ready"),
            );
        }
        let message = format!(
            "{ready}/{desired} replicas ready, {updated} updated, {available} available, {replicas} in total"
        );
        (false, ROLLOUT_IN_PROGRESS, message)
    }
}

/// A reason and message when the Deployment reports that it cannot make progress.
fn stuck(d: &DeploymentView) -> Option<(&'static str, String)> {
    let conditions = d.status.as_ref()?.conditions.as_ref()?;
    conditions
        .iter()
        .find_map(|c| Some((view::trouble(c)?, c.message.clone().unwrap_or_default())))
}

fn condition(
    previous: &[Condition],
    type_: &str,
    value: bool,
    reason: &str,
    message: String,
    generation: Option<i64>,
    now: Timestamp,
) -> Condition {
    let status = if value { "True" } else { "False" };
    let message = truncate_then_mark(message, MAX_MESSAGE);
    let since = previous
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or(Time(now));
    Condition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message,
        observed_generation: generation,
        last_transition_time: since,
    }
}

/// A rollout a status reports as under way, with nothing wrong: what may be held back for a
/// moment ([`super::settle`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// The Deployment controller has not seen the latest spec yet (`RolloutPending`).
    Pending,
    /// The Deployment controller is rolling out; its pods are not all ready yet
    /// (`RolloutInProgress`).
    Underway,
}

/// The rollout `status` reports, when Ready is False only because it is under way and the
/// AppService is not Degraded; `None` for anything else (ready, failed, stuck).
pub fn progress(status: &AppServiceStatus) -> Option<Progress> {
    let condition = |type_: &str| status.conditions.iter().find(|c| c.type_ == type_);
    if condition(DEGRADED)?.status != "False" {
        return None;
    }
    let ready = condition(READY).filter(|c| c.status == "False")?;
    match ready.reason.as_str() {
        ROLLOUT_PENDING => Some(Progress::Pending),
        ROLLOUT_IN_PROGRESS => Some(Progress::Underway),
        _ => None,
    }
}

/// True when writing `desired` would change what `app` already reports.
pub fn changed(app: &AppService, desired: &AppServiceStatus) -> bool {
    app.status.as_ref() != Some(desired)
}

/// A one-line summary of a status for logs, e.g. `web 3/3 Ready=True (AllReplicasReady)`.
pub fn summary(app: &AppService, status: &AppServiceStatus) -> String {
    let (ready, reason) = status
        .conditions
        .iter()
        .find(|c| c.type_ == READY)
        .map_or(("Unknown", ""), |c| (c.status.as_str(), c.reason.as_str()));
    format!(
        "{} {} Ready={ready} ({reason})",
        app.name_any(),
        status.ready.as_deref().unwrap_or("-")
    )
}

#[cfg(test)]
mod tests;

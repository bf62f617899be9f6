//! A 0.2.0 guest's conditions in the AppService's status, beside the host's own.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use crate::crd::{AppService, AppServiceStatus};
use crate::guest;

/// Adds the guest's conditions to `status` (the host's, from [`super::desired`]), merged by type
/// with the ones `app` reports: a condition keeps its `lastTransitionTime` while its status does
/// not change and carries the AppService's generation; one the guest no longer returns is gone.
/// `None` (the guest did not render, so it reported nothing) keeps the guest's conditions as
/// they are. A status with the same conditions as before compares equal, so it is not written.
pub fn with_guest(
    mut status: AppServiceStatus,
    app: &AppService,
    conditions: Option<&[guest::Condition]>,
    now: Timestamp,
) -> AppServiceStatus {
    let previous = app
        .status
        .as_ref()
        .map_or(&[][..], |s| s.conditions.as_slice());
    let Some(conditions) = conditions else {
        let kept = previous
            .iter()
            .filter(|c| !guest::report::is_host_owned(&c.type_));
        status.conditions.extend(kept.cloned());
        return status;
    };
    for c in conditions {
        let value = c.status.as_str();
        let since = previous
            .iter()
            .find(|p| p.type_ == c.type_ && p.status == value)
            .map(|p| p.last_transition_time.clone())
            .unwrap_or(Time(now));
        status.conditions.push(Condition {
            type_: c.type_.clone(),
            status: value.to_owned(),
            reason: c.reason.clone(),
            message: c.message.clone(),
            observed_generation: app.metadata.generation,
            last_transition_time: since,
        });
    }
    status
}

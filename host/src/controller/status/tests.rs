use k8s_openapi::api::apps::v1::{DeploymentCondition, DeploymentStatus};
use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use super::*;

const GUEST: &str = "sha256:0123";

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + seconds).unwrap()
}

fn get<'a>(status: &'a AppServiceStatus, type_: &str) -> &'a Condition {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .expect("condition present")
}

fn applied(d: Option<&DeploymentView>) -> Outcome<'_> {
    Outcome::Applied {
        deployment: d,
        guest: GUEST,
    }
}

#[test]
fn ready_deployment_makes_the_appservice_ready() {
    let app = AppService::test().at_generation(4);
    let d = deployment(3, 3);
    let status = desired(&app, &applied(Some(&d)), at(0));
    assert_eq!(status.observed_generation, Some(4));
    assert_eq!(status.ready.as_deref(), Some("3/3"));
    assert_eq!(
        (
            status.replicas,
            status.ready_replicas,
            status.available_replicas
        ),
        (Some(3), Some(3), Some(3))
    );
    assert_eq!(status.selector.as_deref(), Some("app=nginx"));
    assert_eq!(status.guest_digest.as_deref(), Some(GUEST));
    assert_eq!(get(&status, READY).status, "True");
    assert_eq!(get(&status, READY).reason, "AllReplicasReady");
    assert_eq!(get(&status, GUEST_ERROR).status, "False");
    assert_eq!(get(&status, DEGRADED).status, "False");
}

#[test]
fn partial_rollout_is_not_ready() {
    let d = deployment(3, 1);
    let status = desired(&AppService::test(), &applied(Some(&d)), at(0));
    assert_eq!(status.ready.as_deref(), Some("1/3"));
    assert_eq!(get(&status, READY).status, "False");
    assert_eq!(get(&status, READY).reason, "RolloutInProgress");
}

#[test]
fn unobserved_generation_is_pending() {
    let mut d = deployment(3, 3);
    d.metadata.generation = Some(3);
    let status = desired(&AppService::test(), &applied(Some(&d)), at(0));
    assert_eq!(get(&status, READY).reason, "RolloutPending");
}

#[test]
fn stuck_rollout_is_degraded() {
    let d = stuck_deployment();
    let status = desired(&AppService::test(), &applied(Some(&d)), at(0));
    let degraded = get(&status, DEGRADED);
    assert_eq!(
        (degraded.status.as_str(), degraded.reason.as_str()),
        ("True", "ProgressDeadlineExceeded")
    );
}

#[test]
fn no_deployment_means_ready_once_applied() {
    let status = desired(&AppService::test(), &applied(None), at(0));
    assert_eq!(get(&status, READY).status, "True");
    assert_eq!(status.ready, None);
}

#[test]
fn guest_failure_keeps_counts_and_digest_and_reports_the_error() {
    let mut app = AppService::test();
    let d = deployment(3, 3);
    app.status = Some(desired(&app, &applied(Some(&d)), at(0)));
    let failed = Outcome::GuestFailed {
        reason: "Trap",
        message: "guest trapped: unreachable".into(),
    };
    let status = desired(&app.clone().at_generation(2), &failed, at(10));
    assert_eq!(status.ready.as_deref(), Some("3/3"));
    assert_eq!(status.guest_digest.as_deref(), Some(GUEST));
    assert_eq!(status.observed_generation, Some(2));
    let guest = get(&status, GUEST_ERROR);
    assert_eq!(
        (guest.status.as_str(), guest.reason.as_str()),
        ("True", "Trap")
    );
    assert_eq!(guest.message, "guest trapped: unreachable");
    assert_eq!(guest.last_transition_time, Time(at(10)));
    assert_eq!(get(&status, READY).status, "False");
}

#[test]
fn apply_failure_is_degraded() {
    let failed = Outcome::ApplyFailed {
        reason: "ApplyFailed",
        message: "failed to apply Service nginx: port taken".into(),
    };
    let status = desired(&AppService::test(), &failed, at(0));
    assert_eq!(get(&status, DEGRADED).status, "True");
    assert_eq!(get(&status, DEGRADED).reason, "ApplyFailed");
    assert_eq!(get(&status, READY).status, "False");
}

#[test]
fn refused_output_names_the_field_in_guest_error_and_ready() {
    let refused = Outcome::OutputRefused {
        message: "Deployment/web spec.template.spec.hostNetwork: must be false".into(),
    };
    let status = desired(&AppService::test(), &refused, at(0));
    for type_ in [READY, GUEST_ERROR] {
        let c = get(&status, type_);
        assert_eq!(c.reason, "OutputRefused", "{type_}");
        assert!(
            c.message.contains("spec.template.spec.hostNetwork"),
            "{type_}"
        );
    }
    assert_eq!(get(&status, READY).status, "False");
    assert_eq!(get(&status, GUEST_ERROR).status, "True");
    assert_eq!(get(&status, DEGRADED).status, "False");
}

#[test]
fn a_child_conflict_is_degraded_not_a_guest_error() {
    let conflict = Outcome::ApplyFailed {
        reason: "ChildConflict",
        message: "Deployment web already exists and is not controlled by this AppService".into(),
    };
    let status = desired(&AppService::test(), &conflict, at(0));
    assert_eq!(get(&status, READY).reason, "ChildConflict");
    assert_eq!(get(&status, READY).status, "False");
    assert_eq!(get(&status, DEGRADED).reason, "ChildConflict");
    assert_eq!(get(&status, DEGRADED).status, "True");
    assert_eq!(get(&status, GUEST_ERROR).status, "False");
}

#[test]
fn transition_time_moves_only_on_status_change() {
    let mut app = AppService::test();
    app.status = Some(desired(&app, &applied(Some(&deployment(3, 1))), at(0)));
    let same = desired(&app, &applied(Some(&deployment(3, 2))), at(5));
    assert_eq!(get(&same, READY).last_transition_time, Time(at(0)));
    let flipped = desired(&app, &applied(Some(&deployment(3, 3))), at(9));
    assert_eq!(get(&flipped, READY).last_transition_time, Time(at(9)));
    assert_eq!(get(&flipped, DEGRADED).last_transition_time, Time(at(0)));
}

#[test]
fn unchanged_status_is_not_rewritten() {
    let mut app = AppService::test();
    let d = deployment(3, 3);
    let first = desired(&app, &applied(Some(&d)), at(0));
    assert!(changed(&app, &first));
    app.status = Some(first);
    let again = desired(&app, &applied(Some(&d)), at(60));
    assert!(!changed(&app, &again));
}

#[test]
fn long_messages_are_truncated() {
    let failed = Outcome::ApplyFailed {
        reason: "ApplyFailed",
        message: "é".repeat(2000),
    };
    let status = desired(&AppService::test(), &failed, at(0));
    assert!(get(&status, DEGRADED).message.len() <= MAX_MESSAGE + '…'.len_utf8());
}

#[test]
fn only_a_healthy_rollout_under_way_is_progress() {
    let app = AppService::test();
    let status = |d: &DeploymentView| desired(&app, &applied(Some(d)), at(0));
    assert_eq!(
        progress(&status(&deployment(3, 1))),
        Some(Progress::Underway),
        "pods not all ready"
    );
    let mut pending = deployment(3, 3);
    pending.metadata.generation = Some(3);
    assert_eq!(
        progress(&status(&pending)),
        Some(Progress::Pending),
        "spec not yet seen"
    );
    assert_eq!(progress(&status(&deployment(3, 3))), None, "ready");
    assert_eq!(progress(&status(&stuck_deployment())), None, "stuck");
    let failed = Outcome::GuestFailed {
        reason: "Trap",
        message: "boom".into(),
    };
    assert_eq!(progress(&desired(&app, &failed, at(0))), None, "failed");
}

#[test]
fn every_condition_the_host_writes_is_host_owned() {
    let d = deployment(3, 3);
    let stuck = stuck_deployment();
    let outcomes = [
        applied(None),
        applied(Some(&d)),
        applied(Some(&stuck)),
        Outcome::GuestFailed {
            reason: "Trap",
            message: "boom".into(),
        },
        Outcome::OutputRefused {
            message: "no".into(),
        },
        Outcome::ApplyFailed {
            reason: "ApplyFailed",
            message: "no".into(),
        },
    ];
    for outcome in &outcomes {
        for c in desired(&AppService::test(), outcome, at(0)).conditions {
            assert!(
                crate::guest::report::is_host_owned(&c.type_),
                "{} is written by the host but a guest could return it",
                c.type_
            );
        }
    }
}

fn guest_condition(type_: &str, status: crate::guest::ConditionStatus) -> crate::guest::Condition {
    crate::guest::Condition {
        type_: type_.into(),
        status,
        reason: "Checked".into(),
        message: "by the guest".into(),
    }
}

#[test]
fn guest_conditions_merge_by_type_and_keep_their_transition_time() {
    use crate::guest::ConditionStatus::{False, True};
    let mut app = AppService::test().at_generation(2);
    let host = desired(&app, &applied(None), at(0));
    let first = with_guest(
        host.clone(),
        &app,
        Some(&[
            guest_condition("Pinned", True),
            guest_condition("Other", True),
        ]),
        at(0),
    );
    let pinned = get(&first, "Pinned");
    assert_eq!(
        (pinned.status.as_str(), pinned.observed_generation),
        ("True", Some(2))
    );
    assert_eq!(pinned.last_transition_time.0, at(0));
    app.status = Some(first.clone());

    // Same conditions later: the same status, so nothing to write.
    let host = desired(&app, &applied(None), at(10));
    let again = with_guest(
        host.clone(),
        &app,
        Some(&[
            guest_condition("Pinned", True),
            guest_condition("Other", True),
        ]),
        at(10),
    );
    assert!(
        !changed(&app, &again),
        "an unchanged guest condition is not written"
    );

    // Pinned turns False (a transition), Other is no longer returned (removed).
    let next = with_guest(
        host,
        &app,
        Some(&[guest_condition("Pinned", False)]),
        at(20),
    );
    assert_eq!(get(&next, "Pinned").status, "False");
    assert_eq!(get(&next, "Pinned").last_transition_time.0, at(20));
    assert!(next.conditions.iter().all(|c| c.type_ != "Other"));
    assert!(changed(&app, &next));
}

#[test]
fn a_failed_render_keeps_the_guest_conditions() {
    use crate::guest::ConditionStatus::True;
    let mut app = AppService::test();
    let host = desired(&app, &applied(None), at(0));
    app.status = Some(with_guest(
        host,
        &app,
        Some(&[guest_condition("Pinned", True)]),
        at(0),
    ));
    let failed = Outcome::GuestFailed {
        reason: "Trap",
        message: "boom".into(),
    };
    let status = with_guest(desired(&app, &failed, at(5)), &app, None, at(5));
    assert_eq!(get(&status, "Pinned").last_transition_time.0, at(0));
    assert_eq!(get(&status, GUEST_ERROR).status, "True");
    // A 0.1.0 guest (an empty report) clears them.
    let status = with_guest(desired(&app, &applied(None), at(6)), &app, Some(&[]), at(6));
    assert!(status.conditions.iter().all(|c| c.type_ != "Pinned"));
}

/// A Deployment of `desired` replicas of which `ready` are ready (and available, updated), as
/// the controller's cache holds it.
fn deployment(desired: i32, ready: i32) -> DeploymentView {
    serde_json::from_value(json!({
        "metadata": {"name": "nginx", "namespace": "ns", "generation": 2},
        "spec": {
            "replicas": desired,
            "selector": {"matchLabels": {"app": "nginx"}},
            "template": {"metadata": {"labels": {"app": "nginx"}}},
        },
        "status": {
            "observedGeneration": 2,
            "replicas": desired,
            "updatedReplicas": desired,
            "readyReplicas": ready,
            "availableReplicas": ready,
        },
    }))
    .expect("valid Deployment")
}

/// A Deployment whose rollout exceeded its progress deadline.
fn stuck_deployment() -> DeploymentView {
    let mut d = deployment(3, 1);
    let status: &mut DeploymentStatus = d.status.as_mut().expect("has status");
    status.conditions = Some(vec![DeploymentCondition {
        type_: Some("Progressing".into()),
        status: Some("False".into()),
        reason: Some("ProgressDeadlineExceeded".into()),
        message: Some("ReplicaSet \"nginx-1\" has timed out progressing.".into()),
        ..DeploymentCondition::default()
    }]);
    d
}

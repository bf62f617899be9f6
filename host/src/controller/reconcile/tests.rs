//! Scenarios of [`reconcile`] against a mocked API server: the exact requests of a guest that
//! fails, and of one that fails with a last good guest to roll back to.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use serde_json::Value;

use super::*;
use crate::consts::ANNOTATION_GUEST_DIGEST;
use crate::controller::scenario::{Expect, default_guest, trapping_guest};
use crate::swap;

/// Longest a whole reconcile may take against the mock (each request has its own timeout).
const RECONCILE_TIMEOUT: Duration = Duration::from_secs(60);

/// The sample AppService, labelled so that the hostile guest traps on it.
fn trapping_app() -> AppService {
    let mut app = AppService::test();
    app.labels_mut()
        .insert("hostile.kudevops.io/misdeed".into(), "panic".into());
    app
}

/// Reconciles `app` with `guests` against a mock that expects `steps`
/// ([`super::super::scenario::ApiServer::serve`]); returns the result and the metrics.
async fn scenario(
    app: AppService,
    guests: swap::Guests,
    steps: Vec<Vec<Expect>>,
) -> (Result<Action>, crate::metrics::Metrics) {
    let (ctx, server) = Context::for_test(guests);
    let metrics = ctx.metrics.clone();
    let served = server.serve(steps);
    // NB: `reconcile` drops the only context, and with it the client: the mock then sees no
    // further request, which `finish` waits for.
    let result = tokio::time::timeout(RECONCILE_TIMEOUT, reconcile(Arc::new(app), ctx))
        .await
        .expect("reconcile finishes");
    served.finish().await;
    (result, metrics)
}

/// The condition `type_` of the status `status`.
fn condition(status: &AppServiceStatus, type_: &str) -> Condition {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .cloned()
        .unwrap_or_else(|| panic!("no {type_} condition in {status:?}"))
}

fn written(status: &Value) -> AppServiceStatus {
    serde_json::from_value(status.clone()).expect("the status written is an AppServiceStatus")
}

/// Asserts that the Event `event` is a Warning with `reason` about the sample AppService, and
/// returns its note.
fn warning(event: &Value, reason: &str) -> String {
    assert_eq!(event["type"], "Warning", "{event}");
    assert_eq!(event["reason"], reason, "{event}");
    assert_eq!(event["regarding"]["kind"], "AppService", "{event}");
    assert_eq!(event["regarding"]["name"], "nginx", "{event}");
    event["note"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn a_failed_guest_writes_status_and_event_and_touches_no_child() {
    let app = trapping_app();
    let steps = vec![vec![
        Expect::status(&app, |value| {
            let status = written(value);
            let guest_error = condition(&status, status::GUEST_ERROR);
            assert_eq!(
                (guest_error.status.as_str(), guest_error.reason.as_str()),
                ("True", "Trap"),
                "{guest_error:?}"
            );
            let ready = condition(&status, status::READY);
            assert_eq!(
                (ready.status.as_str(), ready.reason.as_str()),
                ("False", "GuestError"),
                "{ready:?}"
            );
            assert_eq!(status.guest_digest, None, "no guest rendered: {status:?}");
        }),
        Expect::event("ns", |event| {
            let note = warning(event, "GuestFailed");
            assert!(note.contains("untouched"), "{note}");
        }),
    ]];
    // NB: no step expects a Deployment or a Service: any apply, get or delete fails the test.
    let (result, metrics) = scenario(app, swap::Guests::new(trapping_guest()), steps).await;

    let err = result.expect_err("a trapping guest fails the reconcile");
    assert!(
        matches!(err, Error::Guest(guest::Error::Trap { .. })),
        "{err:?}"
    );
    assert_eq!(metrics.guest_rollbacks.get(), 0);
}

/// A check that a child is `app`'s (uid `uid-1`) and rendered by the guest `digest`.
fn rendered_by(kind: &'static str, digest: &str) -> impl FnOnce(&Value) + Send + 'static {
    let digest = digest.to_owned();
    move |child| {
        assert_eq!(child["kind"], kind, "{child}");
        let meta = &child["metadata"];
        assert_eq!(
            meta["annotations"][ANNOTATION_GUEST_DIGEST], *digest,
            "{child}"
        );
        assert_eq!(meta["ownerReferences"][0]["uid"], "uid-1", "{child}");
    }
}

#[tokio::test]
async fn a_trapping_guest_rolls_back_to_the_last_good_one() {
    let good = default_guest();
    let bad = trapping_guest();
    let guests = swap::Guests::new(good.clone());
    guests.activate(bad.clone(), None);
    let (good, bad) = (good.digest().to_owned(), bad.digest().to_owned());
    let app = trapping_app();
    let steps = vec![
        vec![
            Expect::apply(
                "/apis/apps/v1/namespaces/ns/deployments/nginx",
                rendered_by("Deployment", &good),
            ),
            Expect::apply(
                "/api/v1/namespaces/ns/services/nginx",
                rendered_by("Service", &good),
            ),
        ],
        vec![
            Expect::status(&app, {
                let good = good.clone();
                move |value| {
                    let status = written(value);
                    assert_eq!(status.guest_digest, Some(good), "{status:?}");
                    let guest_error = condition(&status, status::GUEST_ERROR);
                    assert_eq!(
                        (guest_error.status.as_str(), guest_error.reason.as_str()),
                        ("False", "Rendered"),
                        "{guest_error:?}"
                    );
                }
            }),
            Expect::event("ns", move |event| {
                let note = warning(event, "GuestRolledBack");
                assert!(note.contains(&bad) && note.contains(&good), "{note}");
            }),
        ],
    ];
    let (result, metrics) = scenario(app, guests, steps).await;

    result.expect("the last good guest renders");
    assert_eq!(metrics.guest_rollbacks.get(), 1);
}

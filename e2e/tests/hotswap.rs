//! Hot swap against the local control plane: each test runs its own operator in-process, with
//! its guest ConfigMap in the test's namespace, and pushes guests with `guest push`.

use std::collections::BTreeMap;
use std::time::Duration;

use app_operator::consts::{
    ANNOTATION_GUEST_ACTIVE, ANNOTATION_GUEST_MESSAGE, ANNOTATION_GUEST_STATE, GUEST_CONFIGMAP,
};
use app_operator::crd::AppService;
use app_operator::guest;
use app_operator::testing::{hostile_guest, tiered_guest};
use app_operator_e2e::appservice::{
    CONVERGE, assert_not_rerendered, create, fingerprint, images, sample_named, wait_event,
};
use app_operator_e2e::swap::{SwapOperator, push, wait_digest, with_custom_section};
use app_operator_e2e::{TestNamespace, client, wait};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

/// Label the tiered example guest puts on every pod template.
const TIER: &str = "app.kudevops.io/tier";

fn labelled(name: &str, labels: &[(&str, &str)]) -> AppService {
    let mut app = sample_named(name);
    app.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<BTreeMap<_, _>>(),
    );
    app
}

/// Waits until the guest in force has refused AppService `name` (its `GuestError` condition).
async fn wait_refused(client: &kube::Client, ns: &str, name: &str) -> anyhow::Result<()> {
    let apps: Api<AppService> = Api::namespaced(client.clone(), ns);
    let what = format!("AppService {name} to be refused by the guest");
    wait::until(&what, CONVERGE, || async {
        let status = apps.get(name).await?.status.unwrap_or_default();
        let refused = status
            .conditions
            .iter()
            .any(|c| c.type_ == "GuestError" && c.status == "True");
        Ok(refused.then_some(()))
    })
    .await
}

fn tier(d: &Deployment) -> Option<String> {
    d.spec
        .template
        .metadata
        .as_ref()?
        .labels
        .as_ref()?
        .get(TIER)
        .cloned()
}

#[tokio::test]
async fn swap_to_a_new_guest_updates_every_appservice() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "swap-all").await?;
    let operator = SwapOperator::start(&client, ns.name()).await?;
    let default = guest::digest(guest::default_guest());
    for name in ["alpha", "beta", "gamma"] {
        create(&client, ns.name(), &sample_named(name)).await?;
        let d = wait_digest(&client, ns.name(), name, &default).await?;
        assert_eq!(tier(&d), None);
    }

    push(ns.name(), tiered_guest(), None).await?;
    let tiered = guest::digest(tiered_guest());
    for name in ["alpha", "beta", "gamma"] {
        let d = wait_digest(&client, ns.name(), name, &tiered).await?;
        assert_eq!(tier(&d).as_deref(), Some("web"), "{name}");
    }
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    let cm = cms.get(GUEST_CONFIGMAP).await?;
    assert_eq!(
        cm.annotations()
            .get(ANNOTATION_GUEST_STATE)
            .map(String::as_str),
        Some("Active")
    );
    assert_eq!(cm.annotations().get(ANNOTATION_GUEST_ACTIVE), Some(&tiered));
    wait_event(&client, ns.name(), GUEST_CONFIGMAP, "GuestActivated").await?;
    assert_eq!(operator.metrics.guest_swaps.get(), 1);
    Ok(())
}

#[tokio::test]
async fn bad_guests_are_rejected_and_change_nothing() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "swap-reject").await?;
    let operator = SwapOperator::start(&client, ns.name()).await?;
    let default = guest::digest(guest::default_guest());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.name());
    let mut before = Vec::new();
    for name in ["web", "panic"] {
        create(&client, ns.name(), &sample_named(name)).await?;
        wait_digest(&client, ns.name(), name, &default).await?;
    }
    // NB: let the rollout settle so that status writes do not move resourceVersions.
    tokio::time::sleep(Duration::from_secs(2)).await;
    for name in ["web", "panic"] {
        before.push(fingerprint(&deployments.get(name).await?));
    }

    let garbage = b"definitely not a wasm component".to_vec();
    // An empty component: valid, but it implements no contract at all.
    let wrong_world = b"\0asm\x0d\x00\x01\x00".to_vec();
    let cases: [(&str, &[u8], &str); 3] = [
        ("garbage", &garbage, "failed to load the stable guest"),
        (
            "wrong world",
            &wrong_world,
            "failed to load the stable guest",
        ),
        ("traps on one", hostile_guest(), "failed on AppService"),
    ];
    for (what, wasm, expected) in cases {
        let err = push(ns.name(), wasm, None).await.expect_err(what);
        let message = format!("{err:#}");
        assert!(
            message.contains("rejected") && message.contains(expected),
            "{what}: {message}"
        );
    }
    let err = push(ns.name(), hostile_guest(), None).await;
    assert!(err.is_err(), "an unchanged rejected guest stays rejected");
    let event = wait_event(&client, ns.name(), GUEST_CONFIGMAP, "GuestRejected").await?;
    assert_eq!(event.type_.as_deref(), Some("Warning"));

    // A malformed ConfigMap: a guest under `data` (text) instead of `binaryData`.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    let text_guest = json!({
        "binaryData": {"guest.wasm": null},
        "data": {"guest.wasm": "AGFzbQ0AAQA="},
    });
    cms.patch(
        GUEST_CONFIGMAP,
        &PatchParams::default(),
        &Patch::Merge(&text_guest),
    )
    .await?;
    let message = wait::until(
        "the malformed ConfigMap to be rejected",
        CONVERGE,
        || async {
            let cm = cms.get(GUEST_CONFIGMAP).await?;
            let annotations = cm.annotations();
            let message = annotations.get(ANNOTATION_GUEST_MESSAGE).cloned();
            let rejected =
                annotations.get(ANNOTATION_GUEST_STATE).map(String::as_str) == Some("Rejected");
            Ok(message.filter(|m| rejected && m.contains("malformed")))
        },
    )
    .await?;
    assert!(message.contains("belongs under binaryData"), "{message}");
    assert_eq!(operator.metrics.guest_swaps.get(), 0);
    let rejections = &operator.metrics.guest_rejections;
    let count = |kind| {
        rejections
            .get_or_create(&app_operator::metrics::KindLabel { kind })
            .get()
    };
    assert_eq!(
        (count("load"), count("dry_run"), count("malformed")),
        (2, 1, 1)
    );

    assert_eq!(operator.guests.current().stable.digest(), default);
    for (name, version) in ["web", "panic"].into_iter().zip(before) {
        let d = deployments.get(name).await?;
        assert_eq!(fingerprint(&d), version, "{name} was touched");
    }
    Ok(())
}

#[tokio::test]
async fn deleting_the_configmap_reverts_to_the_base_guest() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "swap-delete").await?;
    let _operator = SwapOperator::start(&client, ns.name()).await?;
    create(&client, ns.name(), &sample_named("web")).await?;
    push(ns.name(), tiered_guest(), None).await?;
    let d = wait_digest(&client, ns.name(), "web", &guest::digest(tiered_guest())).await?;
    assert_eq!(tier(&d).as_deref(), Some("web"));

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    cms.delete(GUEST_CONFIGMAP, &DeleteParams::default())
        .await?;
    let d = wait_digest(
        &client,
        ns.name(),
        "web",
        &guest::digest(guest::default_guest()),
    )
    .await?;
    assert_eq!(tier(&d), None);
    Ok(())
}

#[tokio::test]
async fn a_canary_changes_only_the_selected_appservices() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "swap-canary").await?;
    let operator = SwapOperator::start(&client, ns.name()).await?;
    let default = guest::digest(guest::default_guest());
    create(
        &client,
        ns.name(),
        &labelled("picked", &[("track", "canary")]),
    )
    .await?;
    create(
        &client,
        ns.name(),
        &labelled("spared", &[("track", "stable")]),
    )
    .await?;
    create(
        &client,
        ns.name(),
        &labelled("late", &[("track", "stable")]),
    )
    .await?;
    wait_digest(&client, ns.name(), "picked", &default).await?;
    wait_digest(&client, ns.name(), "late", &default).await?;
    let spared = wait_digest(&client, ns.name(), "spared", &default).await?;

    push(ns.name(), tiered_guest(), Some("track=canary")).await?;
    let tiered = guest::digest(tiered_guest());
    let d = wait_digest(&client, ns.name(), "picked", &tiered).await?;
    assert_eq!(tier(&d).as_deref(), Some("web"));
    // The reconcile after the swap has happened for "picked"; give "spared" the same time.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.name());
    let after = deployments.get("spared").await?;
    assert_eq!(tier(&after), None);
    assert_eq!(after.spec, spared.spec);
    let apps: Api<AppService> = Api::namespaced(client.clone(), ns.name());
    let status = apps.get("spared").await?.status.unwrap_or_default();
    assert_eq!(status.guest_digest.as_deref(), Some(default.as_str()));
    let set = operator.guests.current();
    assert_eq!(
        set.canary.as_ref().map(|c| c.policy.digest()),
        Some(tiered.as_str())
    );

    // Labelling an AppService into the selector (no spec change) moves it to the canary.
    let moved = json!({"metadata": {"labels": {"track": "canary"}}});
    apps.patch("late", &PatchParams::default(), &Patch::Merge(&moved))
        .await?;
    let d = wait_digest(&client, ns.name(), "late", &tiered).await?;
    assert_eq!(tier(&d).as_deref(), Some("web"));

    // Promotion: the same guest pushed as stable replaces the canary.
    push(ns.name(), tiered_guest(), None).await?;
    wait_digest(&client, ns.name(), "spared", &tiered).await?;
    assert!(operator.guests.current().canary.is_none());
    Ok(())
}

#[tokio::test]
async fn a_failing_guest_rolls_back_to_the_last_good_one() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "swap-rollback").await?;
    let operator = SwapOperator::start(&client, ns.name()).await?;
    let default = guest::digest(guest::default_guest());
    create(&client, ns.name(), &sample_named("web")).await?;
    wait_digest(&client, ns.name(), "web", &default).await?;

    // The hostile guest renders a busybox Deployment for "web": it passes the dry run.
    push(ns.name(), hostile_guest(), None).await?;
    let hostile = guest::digest(hostile_guest());
    wait_digest(&client, ns.name(), "web", &hostile).await?;

    // Then "web" changes so that the hostile guest traps on it.
    let apps: Api<AppService> = Api::namespaced(client.clone(), ns.name());
    let change = json!({
        "metadata": {"labels": {"hostile.kudevops.io/misdeed": "panic"}},
        "spec": {"image": "nginx:1.27"},
    });
    apps.patch("web", &PatchParams::default(), &Patch::Merge(&change))
        .await?;
    let d = wait_digest(&client, ns.name(), "web", &default).await?;
    assert_eq!(images(&d), ["nginx:1.27"]);
    let event = wait_event(&client, ns.name(), "web", "GuestRolledBack").await?;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert!(operator.metrics.guest_rollbacks.get() >= 1);
    assert_eq!(operator.guests.current().stable.digest(), hostile);
    Ok(())
}

#[tokio::test]
async fn a_missed_deadline_is_retried_not_rolled_back() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "swap-deadline").await?;
    let operator = SwapOperator::start(&client, ns.name()).await?;
    create(&client, ns.name(), &sample_named("web")).await?;
    push(ns.name(), hostile_guest(), None).await?;
    let hostile = guest::digest(hostile_guest());
    let before = wait_digest(&client, ns.name(), "web", &hostile).await?;

    // Then "web" changes so that the guest in force loops past its deadline on it: that may be
    // the machine's fault, so it is retried by the same guest, never answered by the previous
    // guest (a rollback would be a rollout).
    let apps: Api<AppService> = Api::namespaced(client.clone(), ns.name());
    let change = json!({
        "metadata": {"labels": {"hostile.kudevops.io/misdeed": "loop"}},
        "spec": {"image": "nginx:1.27"},
    });
    apps.patch("web", &PatchParams::default(), &Patch::Merge(&change))
        .await?;
    wait::until("web to report the missed deadline", CONVERGE, || async {
        let app = apps.get("web").await?;
        let status = app.status.unwrap_or_default();
        let missed = status.conditions.iter().any(|c| {
            c.type_ == "GuestError" && c.status == "True" && c.reason == "DeadlineExceeded"
        });
        Ok(missed.then_some(()))
    })
    .await?;
    // Long enough for a few retries with backoff (0.5 s, 1 s, 2 s).
    tokio::time::sleep(Duration::from_secs(4)).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.name());
    let after = deployments.get("web").await?;
    assert_eq!(
        fingerprint(&after),
        fingerprint(&before),
        "web was re-rendered"
    );
    assert_eq!(operator.metrics.guest_rollbacks.get(), 0);
    let deadlines = operator
        .metrics
        .guest_errors
        .get_or_create(&app_operator::metrics::KindLabel { kind: "deadline" })
        .get();
    assert!(deadlines >= 2, "retried {deadlines} times");
    assert_eq!(operator.guests.current().stable.digest(), hostile);
    Ok(())
}

#[tokio::test]
async fn plan_prints_the_diff_and_writes_nothing() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "swap-plan").await?;
    let _operator = SwapOperator::start(&client, ns.name()).await?;
    create(&client, ns.name(), &sample_named("web")).await?;
    wait_digest(
        &client,
        ns.name(),
        "web",
        &guest::digest(guest::default_guest()),
    )
    .await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.name());
    let before = fingerprint(&deployments.get("web").await?);

    let runtime = guest::Runtime::new(guest::Config::default())?;
    let same = runtime.load_default().await?;
    let out = app_operator::cli::plan::plan(&client, &same, Some(ns.name()))
        .await?
        .text();
    assert!(
        out.contains("1 AppServices: 0 to create, 0 to change, 0 to delete, 0 refused\n"),
        "{out}"
    );

    // The Python and JavaScript example guests render the default mapping: nothing to do.
    let cached = guest::Runtime::new(guest::Config {
        cache_dir: Some(app_operator::testing::example_guests_dir().join("precompiled")),
        ..guest::Config::default()
    })?;
    for name in ["python", "javascript"] {
        let wasm = app_operator::testing::example_guest(name).map_err(anyhow::Error::msg)?;
        let policy = cached.load(wasm).await?;
        let out = app_operator::cli::plan::plan(&client, &policy, Some(ns.name()))
            .await?
            .text();
        assert!(
            out.contains("1 AppServices: 0 to create, 0 to change, 0 to delete, 0 refused\n"),
            "{name}: {out}"
        );
    }

    let tiered = runtime.load(tiered_guest()).await?;
    let out = app_operator::cli::plan::plan(&client, &tiered, Some(ns.name()))
        .await?
        .text();
    assert!(out.contains("--- live Deployment/web"), "{out}");
    assert!(out.contains("+        app.kudevops.io/tier: web"), "{out}");
    assert!(out.contains("cpu: 50m"), "{out}");
    assert!(
        out.contains(&format!(
            "+    apps.kudevops.io/guest-digest: {}",
            tiered.digest()
        )),
        "{out}"
    );

    let after = fingerprint(&deployments.get("web").await?);
    assert_eq!(after, before, "plan wrote to the Deployment");
    Ok(())
}

#[tokio::test]
async fn the_accepted_guest_survives_a_restart() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "swap-restart").await?;
    let operator = SwapOperator::start(&client, ns.name()).await?;
    for name in ["web", "api"] {
        create(&client, ns.name(), &sample_named(name)).await?;
    }
    push(ns.name(), hostile_guest(), None).await?;
    let hostile = guest::digest(hostile_guest());
    for name in ["web", "api"] {
        wait_digest(&client, ns.name(), name, &hostile).await?;
    }
    // An AppService the guest in force refuses on purpose: an expected outcome.
    create(&client, ns.name(), &sample_named("policy-error")).await?;
    wait_refused(&client, ns.name(), "policy-error").await?;
    // NB: let the rollout settle so that status writes do not move resourceVersions.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.name());
    let mut before = Vec::new();
    for name in ["web", "api"] {
        before.push(fingerprint(&deployments.get(name).await?));
    }

    // A candidate pushed after it and rejected: the ConfigMap no longer holds the guest in
    // force, only its record does.
    let garbage = b"definitely not a wasm component";
    let err = push(ns.name(), garbage, None).await.expect_err("garbage");
    assert!(format!("{err:#}").contains("failed to load"), "{err:#}");

    operator.stop().await;
    let operator = SwapOperator::start(&client, ns.name()).await?;
    assert_eq!(operator.guests.current().stable.digest(), hostile);
    // The restart reconciles every AppService; give it the time a swap would take.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_not_rerendered(&deployments, &["web", "api"], &hostile, before).await?;
    assert_eq!(
        deployments
            .get_opt("policy-error")
            .await?
            .map(|d| d.name_any()),
        None
    );
    let rejections = &operator.metrics.guest_rejections;
    let count = |kind| {
        rejections
            .get_or_create(&app_operator::metrics::KindLabel { kind })
            .get()
    };
    assert_eq!((count("dry_run"), count("load")), (0, 1));
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    let cm = cms.get(GUEST_CONFIGMAP).await?;
    let annotations = cm.annotations();
    assert_eq!(
        annotations.get(ANNOTATION_GUEST_STATE).map(String::as_str),
        Some("Rejected"),
        "the candidate is judged again, against the restored guest"
    );
    assert_eq!(annotations.get(ANNOTATION_GUEST_ACTIVE), Some(&hostile));
    let record = cms
        .get(&app_operator::swap::record::name(GUEST_CONFIGMAP))
        .await?;
    let recorded = record
        .binary_data
        .as_ref()
        .and_then(|d| d.get("guest.wasm"))
        .map(|b| guest::digest(&b.0));
    assert_eq!(recorded, Some(hostile));
    Ok(())
}

#[tokio::test]
async fn failing_only_where_the_guest_in_force_fails_is_no_regression() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "swap-regress").await?;
    let operator = SwapOperator::start(&client, ns.name()).await?;
    create(&client, ns.name(), &sample_named("web")).await?;
    push(ns.name(), hostile_guest(), None).await?;
    wait_digest(&client, ns.name(), "web", &guest::digest(hostile_guest())).await?;
    create(&client, ns.name(), &sample_named("policy-error")).await?;
    wait_refused(&client, ns.name(), "policy-error").await?;

    // The same behaviour under another digest: it refuses `policy-error` too.
    let same = with_custom_section(hostile_guest(), "e2e");
    push(ns.name(), &same, None).await?;
    let digest = guest::digest(&same);
    wait_digest(&client, ns.name(), "web", &digest).await?;
    assert_eq!(operator.guests.current().stable.digest(), digest);
    assert_eq!(operator.metrics.guest_swaps.get(), 2);
    Ok(())
}

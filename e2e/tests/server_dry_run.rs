//! The server-side dry run against the local control plane: a candidate guest whose output the
//! API server refuses (a changed Deployment selector, an invalid field) is rejected before
//! activation, naming every offending AppService, and nothing is written; `plan` shows the
//! same refusals, and the deletions, as text and as JSON.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use anyhow::Context;
use app_operator::consts::{ANNOTATION_GUEST_MESSAGE, ANNOTATION_GUEST_STATE, GUEST_CONFIGMAP};
use app_operator::crd::AppService;
use app_operator::guest;
use app_operator::testing::hostile_guest;
use app_operator_e2e::appservice::{create, sample_named};
use app_operator_e2e::process::binary;
use app_operator_e2e::swap::{SwapOperator, push, wait_digest};
use app_operator_e2e::{TestNamespace, client, cluster};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::{Api, Client, ResourceExt};
use serde_json::Value;

/// The sample named `name`; with a misdeed, labelled so that the hostile guest commits it
/// (the default guest ignores the label).
fn app(name: &str, misdeed: Option<&str>) -> AppService {
    let mut app = sample_named(name);
    app.metadata.labels =
        misdeed.map(|m| BTreeMap::from([("hostile.kudevops.io/misdeed".to_owned(), m.to_owned())]));
    app
}

/// Creates the AppServices `(name, misdeed)` and waits until the default guest rendered each.
async fn create_rendered(
    client: &Client,
    ns: &str,
    apps: &[(&str, Option<&str>)],
) -> anyhow::Result<()> {
    let default = guest::digest(guest::default_guest());
    for (name, misdeed) in apps {
        create(client, ns, &app(name, *misdeed)).await?;
    }
    for (name, _) in apps {
        wait_digest(client, ns, name, &default).await?;
    }
    Ok(())
}

/// The resourceVersions of every Deployment and Service in `ns` that the operator could write
/// (the Deployments' generation, spec and annotations: the status keeps moving).
async fn written(client: &Client, ns: &str) -> anyhow::Result<BTreeMap<String, String>> {
    let mut found = BTreeMap::new();
    for d in Api::<Deployment>::namespaced(client.clone(), ns)
        .list(&Default::default())
        .await?
    {
        let spec = serde_json::to_string(&d.spec)?;
        let state = format!("{:?} {spec} {:?}", d.metadata.generation, d.annotations());
        found.insert(format!("Deployment/{}", d.name_any()), state);
    }
    for s in Api::<Service>::namespaced(client.clone(), ns)
        .list(&Default::default())
        .await?
    {
        let version = s.resource_version().unwrap_or_default();
        found.insert(format!("Service/{}", s.name_any()), version);
    }
    Ok(found)
}

/// Pushes the hostile guest over the default one where AppServices `offenders` carry
/// `misdeed` (and `web` none), and checks that it is rejected before activation, with every
/// offender named, the API server's `expected` reason given, and nothing written.
async fn rejected_before_activation(
    prefix: &str,
    misdeed: &str,
    offenders: &[&str],
    expected: &str,
) -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, prefix).await?;
    let operator = SwapOperator::start(&client, ns.name()).await?;
    let mut apps = vec![("web", None)];
    apps.extend(offenders.iter().map(|name| (*name, Some(misdeed))));
    create_rendered(&client, ns.name(), &apps).await?;
    // NB: let the rollout settle so that status writes do not move resourceVersions.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = written(&client, ns.name()).await?;
    assert_eq!(before.len(), 2 * apps.len(), "{before:?}");

    let err = push(ns.name(), hostile_guest(), None)
        .await
        .expect_err("the API server refuses the candidate's output");
    let pushed = format!("{err:#}");
    assert!(pushed.contains("rejected"), "{pushed}");

    let cm = Api::<ConfigMap>::namespaced(client.clone(), ns.name())
        .get(GUEST_CONFIGMAP)
        .await?;
    let annotation = |key| cm.annotations().get(key).cloned().unwrap_or_default();
    assert_eq!(annotation(ANNOTATION_GUEST_STATE), "Rejected");
    let message = annotation(ANNOTATION_GUEST_MESSAGE);
    let regress = format!("{} of {} AppServices regress", offenders.len(), apps.len());
    assert!(message.starts_with(&regress), "{message}");
    for name in offenders {
        let named = format!(
            "AppService {}/{name} fails the server-side dry run",
            ns.name()
        );
        assert!(message.contains(&named), "{name} not named: {message}");
    }
    assert!(message.contains(expected), "{message}");
    assert!(
        !message.contains("/web "),
        "web does not regress: {message}"
    );

    let default = guest::digest(guest::default_guest());
    assert_eq!(operator.guests.current().stable.digest(), default);
    assert_eq!(operator.metrics.guest_swaps.get(), 0);
    let dry_run = operator
        .metrics
        .guest_rejections
        .get_or_create(&app_operator::metrics::KindLabel { kind: "dry_run" })
        .get();
    assert_eq!(dry_run, 1);
    // Activated, the hostile guest would have replaced every Deployment's pod template and
    // pruned every Service.
    assert_eq!(
        written(&client, ns.name()).await?,
        before,
        "something was written"
    );
    Ok(())
}

#[tokio::test]
async fn a_changed_deployment_selector_is_rejected_before_activation() -> anyhow::Result<()> {
    rejected_before_activation(
        "ssdry-selector",
        "selector-change",
        &["moved-a", "moved-b"],
        "field is immutable",
    )
    .await
}

#[tokio::test]
async fn api_invalid_output_is_rejected_before_activation() -> anyhow::Result<()> {
    rejected_before_activation(
        "ssdry-invalid",
        "api-invalid",
        &["negative"],
        "spec.replicas: Invalid value: -1",
    )
    .await
}

#[tokio::test]
async fn plan_shows_deletions_and_refusals_as_text_and_json() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "ssdry-plan").await?;
    let _operator = SwapOperator::start(&client, ns.name()).await?;
    create_rendered(
        &client,
        ns.name(),
        &[("web", None), ("moved", Some("selector-change"))],
    )
    .await?;
    // NB: let the rollout settle so that status writes do not move resourceVersions.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = written(&client, ns.name()).await?;

    // The hostile guest renders a busybox Deployment and no Service: the Service goes.
    let runtime = guest::Runtime::new(guest::Config::default())?;
    let hostile = runtime.load(hostile_guest()).await?;
    let ns_name = ns.name();
    let text = app_operator::cli::plan::plan(&client, &hostile, Some(ns_name))
        .await?
        .text();
    let expect = [
        format!("--- live Deployment/web {ns_name}\n"),
        "+      - image: busybox\n".to_owned(),
        format!("- delete Service/web {ns_name} (AppService web)\n"),
        format!("- delete Service/moved {ns_name} (AppService moved)\n"),
        format!("! refused Deployment/moved {ns_name} (AppService moved): the API server refuses"),
        "2 AppServices: 0 to create, 1 to change, 2 to delete, 1 refused\n".to_owned(),
    ];
    for line in &expect {
        assert!(text.contains(line.as_str()), "missing {line:?} in:\n{text}");
    }
    assert!(text.contains("field is immutable"), "{text}");

    // The binary, as a user runs it, with `--output json`.
    let dir = std::env::temp_dir().join(format!("app-operator-plan-{ns_name}"));
    std::fs::create_dir_all(&dir)?;
    let wasm = dir.join("hostile.wasm");
    std::fs::write(&wasm, hostile_guest())?;
    let out = Command::new(binary()?)
        .args(["plan", "--output", "json", "-n", ns_name, "--guest"])
        .arg(&wasm)
        .arg("--kubeconfig")
        .arg(cluster::kubeconfig_path())
        .output()
        .context("failed to run app-operator plan")?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "plan failed: {stderr}");
    let plan: Value = serde_json::from_slice(&out.stdout).context("plan --output json parses")?;
    assert_eq!(plan["guest"], hostile.digest());
    assert_eq!(
        plan["summary"],
        serde_json::json!({"appservices": 2, "create": 0, "change": 1, "delete": 2,
            "refused": 1, "errors": 0})
    );
    let apps = plan["appservices"].as_array().context("appservices")?;
    let web = apps
        .iter()
        .find(|a| a["name"] == "web")
        .context("web planned")?;
    let actions: Vec<(&str, &str, &str)> = web["children"]
        .as_array()
        .context("children")?
        .iter()
        .map(|c| {
            let field = |k: &str| c[k].as_str().unwrap_or_default();
            (field("kind"), field("name"), field("action"))
        })
        .collect();
    assert_eq!(
        actions,
        [
            ("Deployment", "web", "change"),
            ("Service", "web", "delete")
        ]
    );

    assert_eq!(written(&client, ns_name).await?, before, "plan wrote");
    Ok(())
}

#[tokio::test]
async fn a_candidate_that_renders_nothing_is_rejected() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "dry-nothing").await?;
    let operator = SwapOperator::start(&client, ns.name()).await?;
    let apps = [
        ("web", None),
        ("a", Some("nothing")),
        ("b", Some("nothing")),
    ];
    create_rendered(&client, ns.name(), &apps).await?;
    // NB: let the rollout settle so that status writes do not move resourceVersions.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = written(&client, ns.name()).await?;

    let err = push(ns.name(), hostile_guest(), None)
        .await
        .expect_err("a candidate that would prune every child is rejected");
    let message = format!("{err:#}");
    assert!(message.contains("2 of 3 AppServices regress"), "{message}");
    for name in ["a", "b"] {
        let named = format!(
            "renders nothing for AppService {}/{name}, which would prune its 2 children",
            ns.name()
        );
        assert!(message.contains(&named), "{name} not named: {message}");
    }
    let default = guest::digest(guest::default_guest());
    assert_eq!(operator.guests.current().stable.digest(), default);
    assert_eq!(operator.metrics.guest_swaps.get(), 0);
    assert_eq!(
        written(&client, ns.name()).await?,
        before,
        "something was written"
    );
    Ok(())
}

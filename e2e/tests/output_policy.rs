//! The host as the guard of the cluster, against the local control plane: an adversarial guest's
//! output is refused rule by rule (condition, Event, field path, nothing applied) while a good
//! AppService beside it converges; the namespace's Pod Security label tightens the level; the
//! default guest meets `restricted` when an AppService asks for it.

use std::collections::BTreeMap;
use std::time::Duration;

use app_operator::crd::AppService;
use app_operator::testing::hostile_guest;
use app_operator_e2e::appservice::{
    CONVERGE, condition, create, sample_named, wait_event, wait_ready,
};
use app_operator_e2e::operator::Operator;
use app_operator_e2e::{TestNamespace, client, wait};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;

/// Each misdeed of the hostile guest and the field path its refusal must name.
const MISDEEDS: [(&str, &str); 10] = [
    ("privileged", "spec.template.spec.hostNetwork"),
    (
        "capabilities",
        "spec.template.spec.containers[0].securityContext.capabilities.add",
    ),
    (
        "host-port",
        "spec.template.spec.containers[0].ports[0].hostPort",
    ),
    ("service-account", "spec.template.spec.serviceAccountName"),
    ("external-ips", "spec.externalIPs"),
    ("foreign-selector", "spec.selector"),
    ("load-balancer", "spec.type"),
    ("external-name", "spec.type"),
    ("takeover", ""),
    ("many-objects", "5000 objects"),
];

fn misbehaving(name: &str, misdeed: &str) -> AppService {
    let mut app = sample_named(name);
    let mut labels =
        BTreeMap::from([("hostile.kudevops.io/misdeed".to_owned(), misdeed.to_owned())]);
    if misdeed == "takeover" {
        labels.insert("hostile.kudevops.io/target".into(), "good".into());
    }
    app.metadata.labels = Some(labels);
    app
}

/// Waits for AppService `name` to report `reason` on its GuestError or Ready condition, and
/// returns that condition's message.
async fn wait_reason(
    api: &Api<AppService>,
    name: &str,
    type_: &str,
    reason: &str,
) -> anyhow::Result<String> {
    let what = format!("AppService {name}: {type_} with reason {reason}");
    wait::until(&what, CONVERGE, || async {
        let app = api.get(name).await?;
        Ok(condition(&app, type_)
            .filter(|c| c.reason == reason)
            .map(|c| c.message.clone()))
    })
    .await
}

/// Names of the Deployments and Services in `ns`.
async fn children(client: &Client, ns: &str) -> anyhow::Result<Vec<String>> {
    let lp = ListParams::default();
    let mut names: Vec<String> = Api::<Deployment>::namespaced(client.clone(), ns)
        .list(&lp)
        .await?
        .into_iter()
        .map(|d| format!("Deployment/{}", d.metadata.name.unwrap_or_default()))
        .collect();
    names.extend(
        Api::<Service>::namespaced(client.clone(), ns)
            .list(&lp)
            .await?
            .into_iter()
            .map(|s| format!("Service/{}", s.metadata.name.unwrap_or_default())),
    );
    names.sort();
    Ok(names)
}

#[tokio::test]
async fn every_rule_refuses_a_hostile_guest_and_a_good_appservice_converges() -> anyhow::Result<()>
{
    let client = client().await?;
    let ns = TestNamespace::create(&client, "policy-hostile").await?;
    let apps: Api<AppService> = Api::namespaced(client.clone(), ns.name());
    let operator = Operator::start_with(&client, ns.name(), hostile_guest()).await?;

    // The hostile guest renders "good" (no misdeed) as one plain Deployment.
    create(&client, ns.name(), &sample_named("good")).await?;
    wait_ready(&apps, "good", "1/1").await?;
    for (misdeed, _) in MISDEEDS {
        create(
            &client,
            ns.name(),
            &misbehaving(&format!("bad-{misdeed}"), misdeed),
        )
        .await?;
    }

    for (misdeed, path) in MISDEEDS {
        let name = format!("bad-{misdeed}");
        if misdeed == "takeover" {
            // Not an output policy rule: the host refuses to touch a child it does not control.
            let message = wait_reason(&apps, &name, "Ready", "ChildConflict").await?;
            assert!(message.contains("Deployment good"), "{message}");
            assert!(
                message.contains("controlled by AppService good"),
                "{message}"
            );
            wait_event(&client, ns.name(), &name, "ChildConflict").await?;
            continue;
        }
        let message = wait_reason(&apps, &name, "GuestError", "OutputRefused").await?;
        assert!(message.contains(path), "{misdeed}: {message}");
        let app = apps.get(&name).await?;
        assert_eq!(
            condition(&app, "Ready").map(|c| (c.status.as_str(), c.reason.as_str())),
            Some(("False", "OutputRefused")),
            "{misdeed}"
        );
        let event = wait_event(&client, ns.name(), &name, "OutputRefused").await?;
        assert_eq!(event.type_.as_deref(), Some("Warning"), "{misdeed}");
        assert!(event.note.unwrap_or_default().contains(path), "{misdeed}");
    }

    // Nothing of any refused render reached the cluster; the good one's child is still its own.
    assert_eq!(children(&client, ns.name()).await?, ["Deployment/good"]);
    let good = Api::<Deployment>::namespaced(client.clone(), ns.name())
        .get("good")
        .await?;
    let owners = good.metadata.owner_references.unwrap_or_default();
    assert_eq!(owners.len(), 1);
    assert_eq!(owners[0].name, "good");
    wait_ready(&apps, "good", "1/1").await?;
    operator.stop().await
}

#[tokio::test]
async fn the_namespace_label_tightens_the_level_and_the_default_guest_meets_restricted()
-> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "policy-restricted").await?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let label =
        json!({"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}});
    namespaces
        .patch(ns.name(), &PatchParams::default(), &Patch::Merge(&label))
        .await?;
    let apps: Api<AppService> = Api::namespaced(client.clone(), ns.name());
    let operator = Operator::start(&client, ns.name()).await?;

    // The default guest's baseline pods are refused in a restricted namespace ...
    create(&client, ns.name(), &sample_named("plain")).await?;
    let message = wait_reason(&apps, "plain", "GuestError", "OutputRefused").await?;
    assert!(
        message.contains("pod security level restricted"),
        "{message}"
    );
    assert!(
        message.contains("spec.template.spec.containers[0].securityContext.capabilities"),
        "{message}"
    );
    assert_eq!(children(&client, ns.name()).await?, Vec::<String>::new());

    // ... and admitted, and started by the API server's own Pod Security admission, when the
    // AppService asks for restricted pods.
    let mut hardened = sample_named("hardened");
    hardened.metadata.annotations = Some(BTreeMap::from([(
        "apps.kudevops.io/pod-security".to_owned(),
        "restricted".to_owned(),
    )]));
    create(&client, ns.name(), &hardened).await?;
    wait_ready(&apps, "hardened", "3/3").await?;

    // Relaxing the namespace re-renders its AppServices at the operator's baseline.
    let relax = json!({"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "baseline"}}});
    namespaces
        .patch(ns.name(), &PatchParams::default(), &Patch::Merge(&relax))
        .await?;
    wait_ready(&apps, "plain", "3/3").await?;

    // An annotation is part of what the guest is given: asking a healthy AppService for
    // restricted pods re-renders it at once, with no generation change and no resync.
    let annotate =
        json!({"metadata": {"annotations": {"apps.kudevops.io/pod-security": "restricted"}}});
    apps.patch("plain", &PatchParams::default(), &Patch::Merge(&annotate))
        .await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.name());
    wait::until(
        "plain's pods to run as non-root",
        Duration::from_secs(30),
        || async {
            let deployment = deployments.get("plain").await?;
            let non_root = deployment
                .spec
                .template
                .spec
                .and_then(|s| s.security_context)
                .and_then(|c| c.run_as_non_root);
            Ok((non_root == Some(true)).then_some(()))
        },
    )
    .await?;
    operator.stop().await
}

//! No adoption, against the local control plane: objects the operator did not create stay the
//! user's, byte for byte, until the user removes them or hands them over.

use std::collections::BTreeMap;

use app_operator::consts::{ANNOTATION_ADOPT, FIELD_MANAGER};
use app_operator::crd::AppService;
use app_operator_e2e::appservice::{
    CONVERGE, condition, create, sample_named, wait_deployment, wait_event, wait_ready,
    wait_rolled_out,
};
use app_operator_e2e::operator::Operator;
use app_operator_e2e::{TestNamespace, client, wait};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

/// A user's own Deployment `name`, with two containers, as `kubectl apply` would make it; its
/// pods are labelled `<label>: <name>`.
fn users_deployment(name: &str, label: &str, annotations: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {label: name}},
            "template": {"metadata": {"labels": {label: name}}, "spec": {"containers": [
                {"name": "main", "image": "busybox"}, {"name": "sidecar", "image": "busybox"},
            ]}},
        },
    })
}

fn users_service(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name},
        "spec": {"selector": {"user-app": name}, "ports": [{"port": 8080}]},
    })
}

/// Everything of an object the operator could write: uid, metadata and spec, with the
/// managedFields of every writer but the status subresource's. The resourceVersion and status are
/// left out: the controller-manager keeps updating a Deployment's status (its pods become Ready)
/// while the test waits, and that is no write of the operator's.
fn snapshot<K: serde::Serialize + ResourceExt>(object: &K) -> String {
    let mut value = serde_json::to_value(object).unwrap_or(Value::Null);
    if let Some(map) = value.as_object_mut() {
        map.remove("status");
    }
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
        if let Some(Value::Array(fields)) = meta.get_mut("managedFields") {
            fields.retain(|f| f.get("subresource").and_then(Value::as_str) != Some("status"));
        }
    }
    value.to_string()
}

/// Whether the operator's field manager owns any field of `object`.
fn managed_by_operator<K: ResourceExt>(object: &K) -> bool {
    object
        .managed_fields()
        .iter()
        .any(|f| f.manager.as_deref() == Some(FIELD_MANAGER))
}

#[tokio::test]
async fn a_users_objects_named_like_an_appservice_are_never_adopted() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "adopt-never").await?;
    let apps: Api<AppService> = Api::namespaced(client.clone(), ns.name());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.name());
    let services: Api<Service> = Api::namespaced(client.clone(), ns.name());
    let user = PatchParams::apply("user");
    deployments
        .patch(
            "web",
            &user,
            &Patch::Apply(users_deployment("web", "user-app", json!({}))),
        )
        .await?;
    services
        .patch("web", &user, &Patch::Apply(users_service("web")))
        .await?;
    // The controller-manager stamps the revision and status while the pod comes up: let it settle.
    wait_rolled_out(&deployments, "web", CONVERGE).await?;
    let operator = Operator::start(&client, ns.name()).await?;
    let before = (
        snapshot(&deployments.get("web").await?),
        snapshot(&services.get("web").await?),
    );

    create(&client, ns.name(), &sample_named("web")).await?;
    let app = wait::until(
        "AppService web to report ChildConflict",
        CONVERGE,
        || async {
            let app = apps.get("web").await?;
            let conflict = condition(&app, "Ready").is_some_and(|c| c.reason == "ChildConflict");
            Ok(conflict.then_some(app))
        },
    )
    .await?;
    let ready = condition(&app, "Ready").expect("Ready is set");
    assert_eq!(ready.status, "False");
    assert!(
        ready.message.contains("has no controller"),
        "{}",
        ready.message
    );
    assert_eq!(
        condition(&app, "Degraded").map(|c| c.reason.as_str()),
        Some("ChildConflict")
    );
    let event = wait_event(&client, ns.name(), "web", "ChildConflict").await?;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    let note = event.note.unwrap_or_default();
    assert!(
        note.contains("Deployment web") || note.contains("Service web"),
        "{note}"
    );

    // Retries (with backoff) keep leaving them alone; deleting the AppService leaves them too.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let (deployment, service) = (deployments.get("web").await?, services.get("web").await?);
    let after = (snapshot(&deployment), snapshot(&service));
    assert_eq!(after, before, "the user's objects are untouched");
    assert!(deployment.owner_references().is_empty() && service.owner_references().is_empty());
    assert!(!managed_by_operator(&deployment) && !managed_by_operator(&service));
    apps.delete("web", &DeleteParams::background()).await?;
    wait::until("AppService web gone", CONVERGE, || async {
        Ok(apps.get_opt("web").await?.is_none().then_some(()))
    })
    .await?;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let survived = (
        snapshot(&deployments.get("web").await?),
        snapshot(&services.get("web").await?),
    );
    assert_eq!(
        survived, before,
        "deleting the AppService leaves the user's objects"
    );

    // Once the user removes them, the AppService converges by itself.
    create(&client, ns.name(), &sample_named("web")).await?;
    wait_event(&client, ns.name(), "web", "ChildConflict").await?;
    deployments.delete("web", &DeleteParams::default()).await?;
    services.delete("web", &DeleteParams::default()).await?;
    wait_ready(&apps, "web", "3/3").await?;
    wait_deployment(&deployments, "web", 3, "nginx:alpine").await?;
    operator.stop().await
}

#[tokio::test]
async fn an_opt_in_annotation_hands_an_object_over() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "adopt-opt-in").await?;
    let apps: Api<AppService> = Api::namespaced(client.clone(), ns.name());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.name());
    let user = PatchParams::apply("user");
    // NB: the same selector as the guest's (`app: <name>`): a Deployment's selector is immutable,
    // so one with another selector cannot be taken over by an apply (it would fail, ApplyFailed).
    let handed_over = json!({ ANNOTATION_ADOPT: "api" });
    let users = users_deployment("api", "app", handed_over);
    deployments
        .patch("api", &user, &Patch::Apply(users))
        .await?;
    let operator = Operator::start(&client, ns.name()).await?;
    let mut app = sample_named("api");
    app.spec.ports.clear();
    let created = create(&client, ns.name(), &app).await?;
    wait::until("Deployment api adopted", CONVERGE, || async {
        let d = deployments.get("api").await?;
        let owned = d
            .owner_references()
            .iter()
            .any(|o| o.controller == Some(true) && Some(&o.uid) == created.metadata.uid.as_ref());
        Ok(owned.then_some(()))
    })
    .await?;
    wait_ready(&apps, "api", "3/3").await?;
    operator.stop().await
}

#[tokio::test]
async fn two_appservices_cannot_take_each_others_child() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "adopt-steal").await?;
    let apps: Api<AppService> = Api::namespaced(client.clone(), ns.name());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.name());
    let operator =
        Operator::start_with(&client, ns.name(), app_operator::testing::hostile_guest()).await?;
    let first = create(&client, ns.name(), &sample_named("first")).await?;
    wait_ready(&apps, "first", "1/1").await?;

    // The hostile guest renders "second" as a Deployment named "first".
    let mut second = sample_named("second");
    second.metadata.labels = Some(BTreeMap::from([
        (
            "hostile.kudevops.io/misdeed".to_owned(),
            "takeover".to_owned(),
        ),
        ("hostile.kudevops.io/target".to_owned(), "first".to_owned()),
    ]));
    create(&client, ns.name(), &second).await?;
    let event = wait_event(&client, ns.name(), "second", "ChildConflict").await?;
    assert!(
        event
            .note
            .unwrap_or_default()
            .contains("controlled by AppService first"),
        "the Event names the owner"
    );
    let child = deployments.get("first").await?;
    let owners = child.owner_references();
    assert_eq!(owners.len(), 1);
    assert_eq!(Some(&owners[0].uid), first.metadata.uid.as_ref());
    assert!(apps.get("first").await.is_ok());
    operator.stop().await
}

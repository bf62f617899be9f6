//! Smoke tests of the local control plane: workloads run, garbage collection works, CRDs work.

use std::time::Duration;

use anyhow::Context;
use app_operator_e2e::{TestNamespace, client, wait};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, Client};
use serde_json::json;

/// How long the cluster gets to converge (scheduling, kwok, garbage collection).
const CONVERGE: Duration = Duration::from_secs(120);

#[tokio::test]
async fn deployment_becomes_ready_and_is_garbage_collected() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "smoke-deploy").await?;
    let deployments = Api::<Deployment>::namespaced(client.clone(), ns.name());
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "registry.invalid/web:1"}]}
            }
        }
    }))?;
    deployments
        .create(&PostParams::default(), &deployment)
        .await?;

    wait::until("2/2 ready replicas of deployment web", CONVERGE, || async {
        let status = deployments.get("web").await?.status.unwrap_or_default();
        Ok(
            (status.ready_replicas == Some(2) && status.available_replicas == Some(2))
                .then_some(()),
        )
    })
    .await?;
    let pods = Api::<Pod>::namespaced(client.clone(), ns.name());
    let replica_sets = Api::<ReplicaSet>::namespaced(client.clone(), ns.name());
    assert_eq!(
        count(&replica_sets).await?,
        1,
        "one ReplicaSet for deployment web"
    );
    let ready_pods = pods
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .filter(|pod| is_ready(pod))
        .count();
    assert_eq!(ready_pods, 2, "ready pods of deployment web");

    deployments
        .delete("web", &DeleteParams::background())
        .await?;
    wait::until(
        "ReplicaSets and Pods of deployment web to be collected",
        CONVERGE,
        || async {
            Ok((count(&replica_sets).await? == 0 && count(&pods).await? == 0).then_some(()))
        },
    )
    .await?;
    Ok(())
}

#[tokio::test]
async fn crd_can_be_installed_and_used() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "smoke-crd").await?;
    // NB: CRDs are cluster-wide; a group named after the test namespace keeps runs apart.
    let group = format!("{}.e2e.app-operator.test", ns.name());
    let crd = install_crd(&client, &group).await?;

    let gvk = GroupVersionKind::gvk(&group, "v1", "Widget");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "widgets");
    let widgets = Api::<DynamicObject>::namespaced_with(client.clone(), ns.name(), &resource);
    let widget: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{group}/v1"),
        "kind": "Widget",
        "metadata": {"name": "w1"},
        "spec": {"size": 3, "colour": "blue"}
    }))?;
    widgets.create(&PostParams::default(), &widget).await?;
    let read = widgets.get("w1").await?;
    assert_eq!(read.data["spec"], json!({"size": 3, "colour": "blue"}));

    Api::<CustomResourceDefinition>::all(client)
        .delete(&crd, &DeleteParams::default())
        .await?;
    Ok(())
}

/// Installs a namespaced `Widget` CRD in `group`, waits until it is established, returns its name.
async fn install_crd(client: &Client, group: &str) -> anyhow::Result<String> {
    let name = format!("widgets.{group}");
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {"spec": {
                        "type": "object",
                        "properties": {
                            "size": {"type": "integer"},
                            "colour": {"type": "string"}
                        }
                    }}
                }}
            }]
        }
    }))?;
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    crds.create(&PostParams::default(), &crd).await?;
    tokio::time::timeout(
        CONVERGE,
        await_condition(crds, &name, conditions::is_crd_established()),
    )
    .await
    .with_context(|| format!("CRD {name} not established"))??;
    Ok(name)
}

/// The number of objects an API lists.
async fn count<K>(api: &Api<K>) -> anyhow::Result<usize>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    Ok(api.list(&ListParams::default()).await?.items.len())
}

/// Whether a pod's Ready condition is True.
fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        })
}

//! AppService fixtures and the waits the controller tests share.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use app_operator::consts::ANNOTATION_GUEST_DIGEST;
use app_operator::crd::AppService;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ObjectReference, Service};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client, ResourceExt};

use crate::wait;

/// How long the controller and the cluster get to converge.
pub const CONVERGE: Duration = Duration::from_secs(120);

/// The sample AppService shipped in `config/samples/`.
pub fn sample() -> AppService {
    let yaml = include_str!("../../config/samples/apps_v1alpha1_appservice.yaml");
    serde_yaml_ng::from_str(yaml).expect("the shipped sample is an AppService")
}

/// The sample renamed to `name`, without a fixed nodePort (nodePorts are cluster-wide: only one
/// test may hold 30080 at a time).
pub fn sample_named(name: &str) -> AppService {
    let mut app = sample();
    app.metadata.name = Some(name.to_owned());
    for port in &mut app.spec.ports {
        port.node_port = None;
    }
    app
}

/// Creates `app` in `namespace`.
pub async fn create(
    client: &Client,
    namespace: &str,
    app: &AppService,
) -> anyhow::Result<AppService> {
    let api: Api<AppService> = Api::namespaced(client.clone(), namespace);
    api.create(&PostParams::default(), app)
        .await
        .context("failed to create the AppService")
}

/// Fails, naming the holder, when a Service anywhere already uses `node_port`.
pub async fn node_port_free(client: &Client, node_port: i32) -> anyhow::Result<()> {
    let services: Api<Service> = Api::all(client.clone());
    for service in services.list(&ListParams::default()).await? {
        let ports = service
            .spec
            .as_ref()
            .and_then(|s| s.ports.clone())
            .unwrap_or_default();
        if ports.iter().any(|p| p.node_port == Some(node_port)) {
            anyhow::bail!(
                "nodePort {node_port} is taken by Service {}/{} (a sample left by `make run`? \
                 `kubectl delete appservice nginx -n {0}`)",
                service.namespace().unwrap_or_default(),
                service.name_any(),
            );
        }
    }
    Ok(())
}

/// The condition `type_` of an AppService's status, if set.
pub fn condition<'a>(app: &'a AppService, type_: &str) -> Option<&'a Condition> {
    app.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
}

/// Waits until AppService `name` reports `ready` (e.g. `3/3`), `Ready=True`, and has observed
/// its latest generation. Returns it.
pub async fn wait_ready(
    api: &Api<AppService>,
    name: &str,
    ready: &str,
) -> anyhow::Result<AppService> {
    let what = format!("AppService {name} to report {ready} and Ready=True");
    wait::until(&what, CONVERGE, || async {
        let app = api.get(name).await?;
        let status = app.status.clone().unwrap_or_default();
        let ok = status.ready.as_deref() == Some(ready)
            && status.observed_generation == app.metadata.generation
            && condition(&app, "Ready").is_some_and(|c| c.status == "True");
        Ok(ok.then_some(app))
    })
    .await
}

/// The container images of Deployment `d`'s pod template, in order.
pub fn images(d: &Deployment) -> Vec<&str> {
    d.spec
        .template
        .spec
        .iter()
        .flat_map(|s| &s.containers)
        .filter_map(|c| c.image.as_deref())
        .collect()
}

/// Waits until Deployment `name` has `replicas` ready replicas of `image`. Returns it.
pub async fn wait_deployment(
    api: &Api<Deployment>,
    name: &str,
    replicas: i32,
    image: &str,
) -> anyhow::Result<Deployment> {
    let what = format!("Deployment {name}: {replicas} ready replicas of {image}");
    wait::until(&what, CONVERGE, || async {
        let Some(d) = api.get_opt(name).await? else {
            return Ok(None);
        };
        let status = d.status.clone().unwrap_or_default();
        let ok = d.spec.replicas == Some(replicas)
            && status.ready_replicas.unwrap_or(0) == replicas
            && status.replicas == Some(replicas)
            && images(&d) == [image];
        Ok(ok.then_some(d))
    })
    .await
}

/// Waits up to `timeout` until Deployment `name`'s rollout is complete: its status observes the
/// current generation, one replica is available and `Progressing` says `NewReplicaSetAvailable`.
/// After that the controller-manager has no more to write to it until it changes.
pub async fn wait_rolled_out(
    api: &Api<Deployment>,
    name: &str,
    timeout: Duration,
) -> anyhow::Result<Deployment> {
    let what = format!("the rollout of the user's Deployment {name}");
    wait::until(&what, timeout, || async {
        let d = api.get(name).await?;
        let status = d.status.clone().unwrap_or_default();
        let complete = status.observed_generation == d.metadata.generation
            && status.available_replicas == Some(1)
            && status.conditions.iter().flatten().any(|c| {
                c.type_.as_deref() == Some("Progressing")
                    && c.reason.as_deref() == Some("NewReplicaSetAvailable")
            });
        Ok(complete.then_some(d))
    })
    .await
}

/// Events (events.k8s.io/v1) about the object `name` in `namespace` with `reason`.
pub async fn events(
    client: &Client,
    namespace: &str,
    name: &str,
    reason: &str,
) -> anyhow::Result<Vec<Event>> {
    let events = regarding(client, namespace, |r| r.name.as_deref() == Some(name)).await?;
    Ok(events
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .collect())
}

/// Every Event about AppService `name` in `namespace`, whatever its reason.
pub async fn events_about(
    client: &Client,
    namespace: &str,
    name: &str,
) -> anyhow::Result<Vec<Event>> {
    regarding(client, namespace, |r| {
        r.kind.as_deref() == Some("AppService") && r.name.as_deref() == Some(name)
    })
    .await
}

/// The Events in `namespace` whose `regarding` object matches `about`.
async fn regarding(
    client: &Client,
    namespace: &str,
    about: impl Fn(&ObjectReference) -> bool,
) -> anyhow::Result<Vec<Event>> {
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    let events = api.list(&ListParams::default()).await?;
    Ok(events
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().is_some_and(&about))
        .collect())
}

/// Waits until an Event with `reason` about `name` exists, and returns the first.
pub async fn wait_event(
    client: &Client,
    namespace: &str,
    name: &str,
    reason: &str,
) -> anyhow::Result<Event> {
    let what = format!("an Event {reason} about {name}");
    wait::until(&what, CONVERGE, || async {
        Ok(events(client, namespace, name, reason)
            .await?
            .into_iter()
            .next())
    })
    .await
}

/// What a write by the operator would change on a Deployment: generation, spec and annotations
/// (not the status, nor the revision annotation, which the cluster's deployment controller
/// writes). Equal fingerprints before and after: the operator did not rewrite it.
pub fn fingerprint(d: &Deployment) -> (Option<i64>, String, BTreeMap<String, String>) {
    let spec = serde_json::to_string(&d.spec).unwrap_or_default();
    let mut annotations = d.annotations().clone();
    annotations.remove("deployment.kubernetes.io/revision");
    (d.metadata.generation, spec, annotations)
}

/// Checks that Deployments `names` still carry guest `digest` and the fingerprints `before`
/// (taken in the same order): nothing re-rendered them.
pub async fn assert_not_rerendered(
    deployments: &Api<Deployment>,
    names: &[&str],
    digest: &str,
    before: Vec<(Option<i64>, String, BTreeMap<String, String>)>,
) -> anyhow::Result<()> {
    for (name, version) in names.iter().zip(before) {
        let d = deployments.get(name).await?;
        let rendered_by = d
            .annotations()
            .get(ANNOTATION_GUEST_DIGEST)
            .map(String::as_str);
        anyhow::ensure!(
            rendered_by == Some(digest),
            "{name} rendered by {rendered_by:?}"
        );
        anyhow::ensure!(fingerprint(&d) == version, "{name} was re-rendered");
    }
    Ok(())
}

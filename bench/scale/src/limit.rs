//! The cluster's limit in a round: the benchmark itself writes, for each AppService it creates,
//! what any operator must write at least (its Deployment and Service, then a status), as soon
//! as the create is answered, `concurrency` AppServices in flight. No operator process, no
//! watch, no queue, no reconcile: its times are the least any operator could take on this
//! control plane at that moment, and the rounds show them beside the operators'.

use anyhow::Context;
use app_operator::crd::{AppService, AppServiceStatus};
use app_operator::guest::Policy;
use app_operator::stamp;
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;

/// The field manager of the limit's writes.
const MANAGER: &str = "bench-limit";

/// What the limit wrote, by the key [`crate::prom::writes_by_resource`] gives an operator's
/// writes (its AppService creates left out, as they are the benchmark's for the operators).
pub(crate) const WRITES: [&str; 3] = [
    "PATCH deployments",
    "PATCH services",
    "PATCH appservices/status",
];

/// Creates each of `apps` in `ns`, applies the children `policy` renders for it as soon as the
/// create is answered (both at once), then writes its status, `concurrency` AppServices in
/// flight.
pub(crate) async fn write(
    client: Client,
    ns: String,
    apps: Vec<AppService>,
    policy: Policy,
    concurrency: usize,
) -> anyhow::Result<()> {
    let api: Api<AppService> = Api::namespaced(client.clone(), &ns);
    stream::iter(apps)
        .map(|app| one(&client, &api, &ns, &policy, app))
        .buffer_unordered(concurrency)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// One AppService: created, its children applied, its status written.
async fn one(
    client: &Client,
    api: &Api<AppService>,
    ns: &str,
    policy: &Policy,
    app: AppService,
) -> anyhow::Result<()> {
    let app = api
        .create(&PostParams::default(), &app)
        .await
        .with_context(|| format!("failed to create AppService {}", app.name_any()))?;
    let rendered = policy.render(&app, None).await?;
    let children = stamp::children(&app, policy.digest(), rendered);
    stream::iter(children)
        .map(|object| crate::baseline::apply(client, ns, MANAGER, object))
        .buffer_unordered(2)
        .try_collect::<Vec<()>>()
        .await?;
    let patch = Patch::Apply(json!({
        "apiVersion": AppService::api_version(&()),
        "kind": AppService::kind(&()),
        "status": status(&app, policy.digest()),
    }));
    api.patch_status(
        &app.name_any(),
        &PatchParams::apply(MANAGER).force(),
        &patch,
    )
    .await
    .with_context(|| format!("failed to write the status of {}", app.name_any()))?;
    Ok(())
}

/// The status an operator reports right after applying `app`'s children: observed, rolling out.
fn status(app: &AppService, digest: &str) -> AppServiceStatus {
    let generation = app.metadata.generation;
    AppServiceStatus {
        observed_generation: generation,
        replicas: Some(0),
        ready_replicas: Some(0),
        available_replicas: Some(0),
        ready: Some(format!("0/{}", app.spec.replicas.unwrap_or(1))),
        guest_digest: Some(digest.to_owned()),
        conditions: vec![Condition {
            type_: "Ready".into(),
            status: "False".into(),
            reason: "RolloutInProgress".into(),
            message: "the Deployment is rolling out".into(),
            observed_generation: generation,
            last_transition_time: Time(Timestamp::now()),
        }],
        ..AppServiceStatus::default()
    }
}

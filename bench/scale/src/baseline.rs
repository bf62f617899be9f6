//! The API server's own write rate: server-side applies of the objects the operator would apply
//! for N AppServices, from one client, with no operator running.

use std::time::{Duration, Instant};

use anyhow::Context;
use app_operator::crd::AppService;
use app_operator::guest::{self, DesiredObject};
use app_operator::stamp;
use app_operator_e2e::TestNamespace;
use futures::{StreamExt, TryStreamExt, stream};
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Api, Client};

/// What the baseline measured.
pub(crate) struct Baseline {
    /// Objects applied (a Deployment and a Service per AppService).
    pub writes: usize,
    /// Wall time of all the applies.
    pub elapsed: Duration,
}

/// Applies the rendered children of `apps` in a namespace of its own, `concurrency` at a time,
/// then deletes the namespace and waits until it is gone (freeing the nodePorts).
pub(crate) async fn run(
    client: &Client,
    apps: Vec<AppService>,
    concurrency: usize,
) -> anyhow::Result<Baseline> {
    let ns = TestNamespace::create(client, "bench-baseline").await?;
    let runtime = guest::Runtime::new(guest::Config::default())?;
    let policy = runtime.load_default().await?;
    let mut objects = Vec::new();
    for mut app in apps {
        app.metadata.namespace = Some(ns.name().to_owned());
        let rendered = policy.render(&app, None).await?;
        objects.extend(stamp::children(&app, policy.digest(), rendered));
    }
    let writes = objects.len();
    let started = Instant::now();
    stream::iter(objects)
        .map(|object| apply(client, ns.name(), "bench-baseline", object))
        .buffer_unordered(concurrency)
        .try_collect::<Vec<()>>()
        .await?;
    let elapsed = started.elapsed();
    crate::delete_namespace(client, ns).await?;
    Ok(Baseline { writes, elapsed })
}

/// Server-side applies `object` in `ns` as field manager `manager`, forced.
pub(crate) async fn apply(
    client: &Client,
    ns: &str,
    manager: &str,
    object: DesiredObject,
) -> anyhow::Result<()> {
    let (group, version) = match object.api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", object.api_version.as_str()),
    };
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, &object.kind));
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
    api.patch(
        &object.name,
        &PatchParams::apply(manager).force(),
        &Patch::Apply(&object.body),
    )
    .await
    .with_context(|| format!("failed to apply {} {}", object.kind, object.name))?;
    Ok(())
}

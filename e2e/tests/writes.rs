//! The operator writes only what changed: a new AppService costs its children's applies and the
//! status writes that carry news, no routine Event, no reconcile for the echo of its own apply;
//! a resync of an unchanged fleet and a swap whose output is the same write nothing to the
//! children; nor does the deletion of a namespace. Requests are counted by the controller's own
//! client, as in the binary.

use std::collections::BTreeMap;
use std::time::Duration;

use app_operator::controller;
use app_operator::guest;
use app_operator::metrics::{Metrics, RequestLabel, resource};
use app_operator_e2e::appservice::{create, events_about, sample_named, wait_ready};
use app_operator_e2e::operator::Operator;
use app_operator_e2e::swap::{SwapOperator, push, wait_digest, with_custom_section};
use app_operator_e2e::{TestNamespace, client, wait};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::api::{DeleteParams, ListParams};
use kube::{Api, Client, Resource, ResourceExt};

/// Requests the controller sent so far, by method and resource; the pairs never sent are left
/// out.
fn requests(metrics: &Metrics) -> BTreeMap<(&'static str, &'static str), u64> {
    let mut out = BTreeMap::new();
    for method in ["GET", "POST", "PUT", "PATCH", "DELETE", "OTHER"] {
        for resource in resource::LABELS {
            let count = metrics
                .kube_requests
                .get_or_create(&RequestLabel { method, resource })
                .get();
            if count > 0 {
                out.insert((method, resource), count);
            }
        }
    }
    out
}

/// Requests with `method` the controller sent so far, whatever the resource.
fn sent(metrics: &Metrics, method: &str) -> u64 {
    requests(metrics)
        .into_iter()
        .filter(|((m, _), _)| *m == method)
        .map(|(_, count)| count)
        .sum()
}

/// Writes (every request but GET) the controller sent so far.
fn writes(metrics: &Metrics) -> u64 {
    requests(metrics)
        .into_iter()
        .filter(|((method, _), _)| *method != "GET")
        .map(|(_, count)| count)
        .sum()
}

/// `Kind/name -> resourceVersion` of every Deployment and Service in `ns`.
async fn versions(client: &Client, ns: &str) -> anyhow::Result<BTreeMap<String, String>> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    let mut out = BTreeMap::new();
    for d in deployments.list(&ListParams::default()).await? {
        out.insert(format!("Deployment/{}", d.name_any()), version(&d));
    }
    for s in services.list(&ListParams::default()).await? {
        out.insert(format!("Service/{}", s.name_any()), version(&s));
    }
    Ok(out)
}

/// Creates samples of `replicas` replicas named `names` in `ns` and waits until each is Ready.
async fn create_ready(
    client: &Client,
    ns: &str,
    names: &[&str],
    replicas: i32,
) -> anyhow::Result<()> {
    let apps = Api::namespaced(client.clone(), ns);
    for name in names {
        let mut app = sample_named(name);
        app.spec.replicas = Some(replicas);
        create(client, ns, &app).await?;
    }
    for name in names {
        wait_ready(&apps, name, &format!("{replicas}/{replicas}")).await?;
    }
    Ok(())
}

fn version<K: Resource>(object: &K) -> String {
    object.meta().resource_version.clone().unwrap_or_default()
}

#[tokio::test]
async fn a_new_appservice_costs_its_applies_and_its_news() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "writes-new").await?;
    // NB: a settle window longer than any rollout here, so that the count measures the
    // coalescing, not how fast a loaded machine gets three pods ready (with the default 2 s, a
    // slow rollout writes its progress after the window, one status per pod that turns ready).
    let config = controller::Config {
        namespace: Some(ns.name().to_owned()),
        status_settle: Duration::from_secs(30),
        ..controller::Config::default()
    };
    let operator = Operator::start_configured(&client, guest::default_guest(), config).await?;
    let before = writes(&operator.metrics);
    let before_by_kind = requests(&operator.metrics);
    let reads_before = sent(&operator.metrics, "GET");
    let renders_before = renders(&operator.metrics);

    // NB: three at once, so that the echo check below does not hang on one race.
    let names = ["web-0", "web-1", "web-2"];
    create_ready(&client, ns.name(), &names, 3).await?;
    // NB: anything still on its way (a late status, an Event) would be counted below.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let by_kind = requests(&operator.metrics);
    let written = writes(&operator.metrics) - before;
    let patched = |resource| {
        let key = ("PATCH", resource);
        by_kind.get(&key).copied().unwrap_or(0) - before_by_kind.get(&key).copied().unwrap_or(0)
    };
    let echoes = operator.metrics.child_echoes_skipped.get();
    eprintln!(
        "{} new AppServices, converged and Ready: {written} writes ({by_kind:?}), \
         {echoes} echoes skipped",
        names.len()
    );
    // Per AppService, two applies (Deployment, Service) and one status write, "applied" and
    // "ready" in one. NB: a reconcile that a Deployment's status update triggers before the
    // Service watch (or the AppService watch) shows what this process just wrote does not
    // write it again (controller/echo.rs `pending`, controller/written.rs); before those, 10
    // to 12 writes were counted here.
    let apps = names.len() as u64;
    assert!(written <= 3 * apps, "{written} writes: {by_kind:?}");
    assert_eq!(
        (patched("deployments"), patched("services")),
        (apps, apps),
        "one apply per child: {by_kind:?}"
    );
    assert_eq!(
        patched("appservices/status"),
        apps,
        "one status write per AppService, applied and ready in one: {by_kind:?}"
    );
    // NB: the children are created by create-only applies, which refuse an existing object: no
    // read before them (watches count once, when they open, before `reads_before`).
    assert_eq!(
        sent(&operator.metrics, "GET") - reads_before,
        0,
        "no read for a new AppService's children: {by_kind:?}"
    );
    assert_eq!(
        sent(&operator.metrics, "POST"),
        0,
        "no Event for routine work: {by_kind:?}"
    );
    for name in names {
        let events = events_about(&client, ns.name(), name).await?;
        assert!(events.is_empty(), "routine Events about {name}: {events:?}");
    }
    // NB: an apply's echo may reach the watch before the apply's response is read
    // (controller/echo.rs); it then reconciles once more, writing nothing. Of six, at least one
    // comes after.
    assert!(echoes >= 1, "no apply's echo was skipped");
    // NB: the reconciles that pods turning ready bring call no guest, nor does the one the
    // Deployment controller's revision annotation brings (no guest may set it). One render per
    // AppService, and a spare for a reconcile that raced its own apply. Counted once the
    // controller stopped, so that no reconcile is half-way.
    let metrics = operator.metrics.clone();
    operator.stop().await?;
    let rendered = renders(&metrics) - renders_before;
    eprintln!("{rendered} renders");
    assert!(
        rendered < 2 * apps,
        "{rendered} renders for {apps} new AppServices"
    );
    Ok(())
}

/// Reconciles that called the guest (none fails in these tests).
fn renders(metrics: &Metrics) -> u64 {
    metrics.reconciles.get() - metrics.renders_skipped.get()
}

#[tokio::test]
async fn a_resync_of_an_unchanged_fleet_writes_nothing() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "writes-resync").await?;
    let config = controller::Config {
        namespace: Some(ns.name().to_owned()),
        resync: Duration::from_secs(2),
        ..controller::Config::default()
    };
    let operator = Operator::start_configured(&client, guest::default_guest(), config).await?;
    let names = ["a", "b", "c"];
    create_ready(&client, ns.name(), &names, 1).await?;
    // NB: let a held-back status or a late Deployment update land before counting.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let children = versions(&client, ns.name()).await?;
    let (writes_before, reconciles_before) =
        (writes(&operator.metrics), operator.metrics.reconciles.get());
    let skipped_before = operator.metrics.renders_skipped.get();

    // At least two resyncs of every AppService.
    let target = reconciles_before + 2 * names.len() as u64;
    wait::until(
        "two resyncs of every AppService",
        Duration::from_secs(30),
        || {
            let reconciles = operator.metrics.reconciles.get();
            async move { Ok((reconciles >= target).then_some(())) }
        },
    )
    .await?;
    let written = writes(&operator.metrics) - writes_before;
    assert_eq!(
        written,
        0,
        "a resync wrote: {:?}",
        requests(&operator.metrics)
    );
    assert_eq!(
        versions(&client, ns.name()).await?,
        children,
        "a child changed"
    );
    // NB: a resync renders nothing: the guest input, guest and children are as last rendered
    // (the Deployment controller's revision annotation is not part of what was applied).
    // Counted once the controller stopped, so that no reconcile is half-way.
    let metrics = operator.metrics.clone();
    operator.stop().await?;
    let reconciled = metrics.reconciles.get() - reconciles_before;
    let skipped = metrics.renders_skipped.get() - skipped_before;
    assert_eq!(
        skipped, reconciled,
        "{skipped} of {reconciled} resync reconciles skipped the guest call"
    );
    Ok(())
}

/// The namespace controller deletes the children before their AppServices (usually), and the API
/// server refuses to create anything in a namespace being deleted: the operator must not
/// re-apply them (nor report each refusal in an Event and a status).
#[tokio::test]
async fn a_namespace_being_deleted_gets_nothing_written() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "writes-ns-deleted").await?;
    let config = controller::Config {
        namespace: Some(ns.name().to_owned()),
        ..controller::Config::default()
    };
    let operator = Operator::start_configured(&client, guest::default_guest(), config).await?;
    let names = ["a", "b", "c"];
    create_ready(&client, ns.name(), &names, 1).await?;
    // NB: let a held-back status or a late Deployment update land before counting.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let (before, writes_before, reconciles_before) = (
        requests(&operator.metrics),
        writes(&operator.metrics),
        operator.metrics.reconciles.get(),
    );

    let namespaces = Api::<Namespace>::all(client.clone());
    namespaces
        .delete(ns.name(), &DeleteParams::background())
        .await?;
    wait::until("the namespace gone", Duration::from_secs(180), || async {
        Ok(namespaces.get_opt(ns.name()).await?.is_none().then_some(()))
    })
    .await?;
    let after = requests(&operator.metrics);
    let written = writes(&operator.metrics) - writes_before;
    // NB: the namespace controller deleted the children before the AppServices in most runs
    // (then each deletion triggers a reconcile, which must write nothing), but not in every one.
    let reconciled = operator.metrics.reconciles.get() - reconciles_before;
    assert_eq!(
        written, 0,
        "written while the namespace went ({reconciled} reconciles): {before:?} -> {after:?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_swap_with_the_same_output_writes_no_child() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "writes-swap").await?;
    let operator = SwapOperator::start(&client, ns.name()).await?;
    let default = guest::digest(guest::default_guest());
    let names = ["a", "b"];
    create_ready(&client, ns.name(), &names, 1).await?;
    for name in names {
        wait_digest(&client, ns.name(), name, &default).await?;
    }
    tokio::time::sleep(Duration::from_secs(6)).await;
    let children = versions(&client, ns.name()).await?;

    let same = with_custom_section(guest::default_guest(), "same-output");
    let digest = guest::digest(&same);
    push(ns.name(), &same, None).await?;
    for name in names {
        // The status names the guest in force: that is where the provenance goes.
        wait_digest(&client, ns.name(), name, &digest).await?;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        versions(&client, ns.name()).await?,
        children,
        "a child was written for a guest that renders the same objects"
    );
    operator.stop().await;
    Ok(())
}

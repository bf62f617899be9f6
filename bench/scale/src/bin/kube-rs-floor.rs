//! `kube-rs-floor`: the Go seed operator's work done with app-operator's own client stack
//! (kube-rs, hyper, rustls, serde_json), and nothing else; a benchmark peer.
//!
//! What `bench/peers/go-seed` does, step for step: watch the AppServices of one namespace,
//! keep a cache of its Deployments, and with one worker reconcile each AppService by looking
//! its Deployment up in that cache and, when it is not there, creating (POST) the Deployment and
//! then the Service the seed builds. No status, no Events, no guest, no apply, no log line per
//! reconcile. Its CPU and memory are what this stack costs for the Go seed's own work: the
//! floor under anything app-operator does on the same stack.
//!
//! It counts its requests in app-operator's `app_operator_kube_requests_total` (the same client
//! layer), serves them on `--metrics-addr` and answers `/readyz` on `--probe-addr` once its
//! caches have listed (as app-operator's does; the Go seed's answers before).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use app_operator::cli::Connection;
use app_operator::crd::AppService;
use app_operator::metrics::{self, Metrics};
use app_operator::server;
use futures::{StreamExt, TryStreamExt, future};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::api::PostParams;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;
use tokio::sync::watch;

/// The Go seed's work on app-operator's client stack.
#[derive(Debug, clap::Parser)]
struct Args {
    /// The namespace whose AppServices to reconcile.
    #[arg(long)]
    namespace: String,
    /// Address for `/metrics`.
    #[arg(long)]
    metrics_addr: std::net::SocketAddr,
    /// Address for `/readyz`.
    #[arg(long)]
    probe_addr: std::net::SocketAddr,
}

/// What a reconcile needs.
struct Ctx {
    client: Client,
    deployments: Store<Deployment>,
}

// NB: on app-operator's runtime (one thread that waits a moment before it sleeps,
// `app_operator::runtime`), as its `run` is: the floor is the least this client stack costs, so
// it runs the way that costs least.
fn main() -> anyhow::Result<()> {
    let args = <Args as clap::Parser>::parse();
    app_operator::runtime::build(app_operator::runtime::DEFAULT_WAKE_PAUSE)?.block_on(run(args))
}

/// The floor's work until the process is stopped.
async fn run(args: Args) -> anyhow::Result<()> {
    let mut registry = metrics::registry();
    let metrics = Metrics::register(&mut registry);
    let client = Connection::default().client(Some(&metrics)).await?;
    let (ready_tx, ready_rx) = watch::channel(false);
    let ready_tx = Arc::new(ready_tx);
    serve(&args, server::metrics_router(Arc::new(registry)), ready_rx).await?;

    let ns = args.namespace.as_str();
    // NB: ready once both watches have listed; a Store wakes only its last waiter, and the
    // controller waits on the AppService store itself, so the streams are read instead.
    let listed = Arc::new(AtomicUsize::new(0));
    let (deployments, deployment_events) =
        reflected::<Deployment>(&client, ns, "deployments", &listed, &ready_tx);
    tokio::spawn(deployment_events.for_each(|_| future::ready(())));
    let (apps, app_events) =
        reflected::<AppService>(&client, ns, "appservices", &listed, &ready_tx);
    let app_events = app_events.applied_objects();
    let controller = Controller::for_stream(app_events, apps)
        // NB: controller-runtime's default, which the Go seed keeps: one worker.
        .with_config(controller::Config::default().concurrency(1));
    let ctx = Arc::new(Ctx {
        client,
        deployments,
    });
    controller
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|_| future::ready(()))
        .await;
    Ok(())
}

/// A watch of the `K`s in `ns` kept in a store, counted in `listed` once it has listed.
fn reflected<K>(
    client: &Client,
    ns: &str,
    name: &'static str,
    listed: &Arc<AtomicUsize>,
    ready: &Arc<watch::Sender<bool>>,
) -> (
    Store<K>,
    impl futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + use<K>,
)
where
    K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store();
    let events = watcher(
        Api::<K>::namespaced(client.clone(), ns),
        watcher::Config::default(),
    )
    .default_backoff()
    .reflect(writer)
    .inspect_ok(on_listed(name, listed, ready));
    (store, events)
}

/// An `inspect_ok` callback for watch `name`: at its first `InitDone`, counts it in `listed`,
/// and when both watches have listed, sends `true` to `ready`.
fn on_listed<K>(
    name: &'static str,
    listed: &Arc<AtomicUsize>,
    ready: &Arc<watch::Sender<bool>>,
) -> impl FnMut(&watcher::Event<K>) + use<K> {
    let (listed, ready) = (listed.clone(), ready.clone());
    let mut first = true;
    move |event| {
        if first && matches!(event, watcher::Event::InitDone) {
            first = false;
            if listed.fetch_add(1, Ordering::SeqCst) == 1 {
                eprintln!("kube-rs-floor: caches synced ({name} last)");
                ready.send_replace(true);
            }
        }
    }
}

/// `/metrics` on one address, `/readyz` (200 once the caches have listed) on the other.
async fn serve(
    args: &Args,
    metrics: axum::Router,
    ready: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let (metrics_listener, _) = server::bind(args.metrics_addr).await?;
    let (probe_listener, _) = server::bind(args.probe_addr).await?;
    let readyz = axum::routing::get(move || {
        let ready = *ready.borrow();
        async move {
            if ready {
                (axum::http::StatusCode::OK, "ready")
            } else {
                (axum::http::StatusCode::SERVICE_UNAVAILABLE, "not ready")
            }
        }
    });
    let probes = axum::Router::new().route("/readyz", readyz);
    let never = future::pending::<()>;
    tokio::spawn(server::serve(metrics_listener, metrics, never()));
    tokio::spawn(server::serve(probe_listener, probes, never()));
    Ok(())
}

/// The Go seed's `Reconcile`: when the cache has no Deployment of the AppService's name, create
/// its Deployment, then its Service.
async fn reconcile(app: Arc<AppService>, ctx: Arc<Ctx>) -> Result<Action, kube::Error> {
    let ns = app.namespace().unwrap_or_default();
    let name = app.name_any();
    let cached = ctx
        .deployments
        .get(&ObjectRef::new(&name).within(&ns))
        .is_some();
    if !cached {
        let post = PostParams::default();
        Api::<Deployment>::namespaced(ctx.client.clone(), &ns)
            .create(&post, &deployment(&app))
            .await?;
        Api::<Service>::namespaced(ctx.client.clone(), &ns)
            .create(&post, &service(&app))
            .await?;
    }
    Ok(Action::await_change())
}

/// A failed reconcile is retried (controller-runtime retries with a backoff from 5 ms).
fn error_policy(_: Arc<AppService>, _: &kube::Error, _: Arc<Ctx>) -> Action {
    Action::requeue(Duration::from_millis(100))
}

/// The seed's `NewDeploy`.
fn deployment(app: &AppService) -> Deployment {
    let name = app.name_any();
    let ports: Vec<_> = app
        .spec
        .ports
        .iter()
        .map(|p| json!({"containerPort": target_port(p)}))
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": name, "ownerReferences": [owner(app)]},
        "spec": {
            "replicas": app.spec.replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{
                    "name": name,
                    "image": app.spec.image,
                    "ports": ports,
                    "imagePullPolicy": "IfNotPresent",
                }]},
            },
        },
    }))
    .expect("the seed's Deployment is a valid Deployment")
}

/// The seed's `NewService`.
fn service(app: &AppService) -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": app.name_any(), "ownerReferences": [owner(app)]},
        "spec": {"type": "NodePort", "ports": app.spec.ports, "selector": {"app": app.name_any()}},
    }))
    .expect("the seed's Service is a valid Service")
}

/// The seed's `targetPort.IntVal`: 0 for a named or absent target port.
fn target_port(port: &k8s_openapi::api::core::v1::ServicePort) -> i32 {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    match port.target_port {
        Some(IntOrString::Int(n)) => n,
        _ => 0,
    }
}

/// `metav1.NewControllerRef(app, ...)`.
fn owner(app: &AppService) -> serde_json::Value {
    json!({
        "apiVersion": AppService::api_version(&()),
        "kind": AppService::kind(&()),
        "name": app.name_any(),
        "uid": app.uid().unwrap_or_default(),
        "controller": true,
        "blockOwnerDeletion": true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_objects_carry_its_fields_and_the_controller_reference() {
        let app: AppService = serde_json::from_value(json!({
            "apiVersion": "apps.kudevops.io/v1alpha1",
            "kind": "AppService",
            "metadata": {"name": "web", "namespace": "ns", "uid": "u-1"},
            "spec": {"replicas": 2, "image": "nginx", "ports": [{"port": 80, "targetPort": 8080}]},
        }))
        .expect("an AppService");
        let d = serde_json::to_value(deployment(&app)).unwrap();
        assert_eq!(d["spec"]["replicas"], 2);
        assert_eq!(
            d["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"],
            8080
        );
        assert_eq!(d["metadata"]["ownerReferences"][0]["uid"], "u-1");
        assert_eq!(d["metadata"]["ownerReferences"][0]["controller"], true);
        let s = serde_json::to_value(service(&app)).unwrap();
        assert_eq!(s["spec"]["type"], "NodePort");
        assert_eq!(s["spec"]["selector"]["app"], "web");
        assert_eq!(s["spec"]["ports"][0]["port"], 80);
    }
}

//! `bench-scale` (`make bench-scale`): N AppServices created at once on the local control plane,
//! reconciled by the operator binary running as a separate process. First rounds side by side
//! with the Go seed operator (`rounds`): in each, both create the children of the same
//! AppServices, alone on the cluster one after the other, with times, CPU, peak RSS and API
//! requests for both and the ratios, beside the cluster's limit (`limit`: the benchmark writing
//! the children and statuses itself). Then, on app-operator only: the time until every AppService
//! has its children applied and until every one is Ready, reconcile p50/p99, the API requests
//! the operator made, its peak RSS, and the API server's own write rate for the same objects
//! with no operator, for the ratio; then it swaps the guest through the guest ConfigMap and
//! prints the time until every AppService's children carry the new guest, and the reconciles
//! that failed meanwhile.

mod baseline;
mod contender;
mod control_plane;
mod limit;
mod prom;
mod rounds;
mod swap;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use app_operator::crd::AppService;
use app_operator_e2e::operator::install_crd;
use app_operator_e2e::{TestNamespace, client, wait};
use clap::Parser;
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::api::PostParams;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::contender::Contender;
use app_operator_e2e::process::OperatorProcess;

/// Scale benchmark of app-operator against the local control plane.
#[derive(Debug, Parser)]
struct Args {
    /// AppServices to create.
    #[arg(long, env = "COUNT", default_value_t = 1000)]
    count: usize,
    /// Replicas of each AppService.
    #[arg(long, env = "REPLICAS", default_value_t = 1)]
    replicas: i32,
    /// Requests in flight when creating AppServices and when applying the baseline.
    #[arg(long, env = "CONCURRENCY", default_value_t = 16)]
    concurrency: usize,
    /// The app-operator binary.
    #[arg(long, env = "OPERATOR_BIN")]
    operator: PathBuf,
    /// The Go seed operator's binary (`hack/controlplane/build-go-seed.sh` prints its path);
    /// needed unless `--rounds 0`.
    #[arg(long, env = "GO_SEED_BIN")]
    go_seed: Option<PathBuf>,
    /// The kube-rs floor's binary (built beside this one): when given, the rounds run it too.
    #[arg(long, env = "FLOOR_BIN")]
    floor: Option<PathBuf>,
    /// Rounds side by side with the Go seed operator (0: none).
    #[arg(long, env = "ROUNDS", default_value_t = 3)]
    rounds: usize,
    /// Only the rounds: skip the Ready wait, the baseline and the guest swaps after them.
    #[arg(long)]
    rounds_only: bool,
    /// Address for the operator's metrics endpoint.
    #[arg(long, default_value = "127.0.0.1:18080")]
    metrics_addr: String,
    /// Address for the operator's probes.
    #[arg(long, default_value = "127.0.0.1:18081")]
    probe_addr: String,
    /// Address for the Go seed operator's metrics endpoint.
    #[arg(long, default_value = "127.0.0.1:18090")]
    peer_metrics_addr: String,
    /// Address for the Go seed operator's probes.
    #[arg(long, default_value = "127.0.0.1:18091")]
    peer_probe_addr: String,
    /// Address for the kube-rs floor's metrics endpoint.
    #[arg(long, default_value = "127.0.0.1:18092")]
    floor_metrics_addr: String,
    /// Address for the kube-rs floor's probes.
    #[arg(long, default_value = "127.0.0.1:18093")]
    floor_probe_addr: String,
    /// Skip the no-operator baseline.
    #[arg(long)]
    skip_baseline: bool,
    /// Skip the guest swap.
    #[arg(long)]
    skip_swap: bool,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 1800)]
    timeout_secs: u64,
    /// Run app-operator without the default guest precompiled ahead of time (which the image
    /// ships, and this benchmark otherwise makes with the binary before the rounds): it then
    /// compiles the guest at every start.
    #[arg(long)]
    compile_at_start: bool,
    /// The directory of the precompiled default guest, when there is one.
    #[arg(skip)]
    precompiled_dir: Option<PathBuf>,
}

/// Precompiles the default guest with the operator binary, as the image build does, into
/// `bench-scale-guests/` (not counted in the operator's figures: it is part of the build).
fn precompile(operator: &Path) -> anyhow::Result<PathBuf> {
    let dir = PathBuf::from("bench-scale-guests");
    let started = Instant::now();
    let out = std::process::Command::new(operator)
        .args(["guest", "precompile", "--out-dir"])
        .arg(&dir)
        .output()
        .with_context(|| format!("running {}", operator.display()))?;
    if !out.status.success() {
        bail!(
            "{} guest precompile failed: {}",
            operator.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    println!(
        "default guest precompiled ahead of time, as the image ships it ({:.2} s, not counted; \
         --compile-at-start compiles it at every start instead)",
        started.elapsed().as_secs_f64()
    );
    Ok(dir)
}

/// One bench AppService: `app-<i>`, one unnamed port 80, no fixed nodePort.
fn bench_app(i: usize, replicas: i32) -> AppService {
    serde_json::from_value(json!({
        "apiVersion": "apps.kudevops.io/v1alpha1",
        "kind": "AppService",
        "metadata": {"name": format!("app-{i:05}")},
        "spec": {"replicas": replicas, "image": "nginx:alpine", "ports": [{"port": 80, "targetPort": 80}]},
    }))
    .expect("a valid AppService")
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = Args::parse();
    if !args.compile_at_start {
        args.precompiled_dir = Some(precompile(&args.operator)?);
    }
    let client = client().await?;
    install_crd(&client).await?;
    let apps: Vec<AppService> = (0..args.count)
        .map(|i| bench_app(i, args.replicas))
        .collect();
    println!(
        "bench-scale: {} AppServices x {} replica(s), {} requests in flight; load average {}",
        args.count,
        args.replicas,
        args.concurrency,
        load_average()
    );
    if args.rounds > 0 {
        let go_seed = args.go_seed.as_deref().context(
            "no Go seed operator: pass --go-seed or GO_SEED_BIN \
             (hack/controlplane/build-go-seed.sh builds it), or --rounds 0",
        )?;
        rounds::run(&client, &args, &apps, go_seed).await?;
    }
    if args.rounds_only {
        return Ok(());
    }

    let baseline = if args.skip_baseline {
        None
    } else {
        let b = baseline::run(&client, apps.clone(), args.concurrency).await?;
        println!(
            "baseline (no operator): {} server-side applies in {:.1} s = {:.0} applies/s",
            b.writes,
            b.elapsed.as_secs_f64(),
            b.writes as f64 / b.elapsed.as_secs_f64()
        );
        Some(b)
    };

    let ns = TestNamespace::create(&client, "bench-scale").await?;
    let contender = Contender::app_operator(&args, ns.name());
    let mut operator = contender.spawn(Path::new("bench-scale-operator.log"))?;
    let result = measure(&client, &args, ns.name(), apps, &mut operator).await;
    let swap = match (&result, args.skip_swap) {
        (Ok(_), false) => Some(swap::run(&client, &args, ns.name(), &mut operator).await),
        _ => None,
    };
    let (_, shutdown) = operator.terminate_timed().await?;
    // NB: waited for, so that the next run (or benchmark) does not share the cluster with the
    // garbage collection of this one's objects.
    let deleted = delete_namespace(&client, ns).await;
    let run = result?;
    let swap = swap.transpose()?;
    let deleted = deleted?;

    let applies_per_s = 2.0 * args.count as f64 / run.applied.as_secs_f64();
    println!("operator:");
    println!(
        "  all children applied   {:>8.1} s  ({applies_per_s:.0} child applies/s)",
        run.applied.as_secs_f64()
    );
    println!(
        "  all Ready              {:>8.1} s",
        run.ready.as_secs_f64()
    );
    println!(
        "  reconcile p50 / p99    {:>8.1} / {:.1} ms",
        run.p50 * 1e3,
        run.p99 * 1e3
    );
    println!(
        "  reconciles             {:>8}   ({} failed)",
        run.reconciles, run.failures
    );
    let by_method = prom::METHODS
        .iter()
        .zip(run.requests_by_method)
        .map(|(m, n)| format!("{m} {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    println!(
        "  API requests           {:>8}   ({by_method})",
        run.requests_by_method.iter().sum::<u64>()
    );
    let (per_app, writes) = per_app_and_breakdown(&run.writes, args.count);
    println!("  writes per AppService  {per_app:>8.2}   ({writes})");
    let (per_app, events) = per_app_and_breakdown(&run.watch_events, args.count);
    println!("  watch events per AppService {per_app:>3.2}   ({events})");
    println!(
        "  peak RSS               {:>8.1} MiB",
        run.peak_rss_kib as f64 / 1024.0
    );
    println!("  operator CPU           {:>8.2} s", run.cpu_secs);
    let components = run
        .control_plane
        .iter()
        .map(|(name, secs)| format!("{name} {secs:.2}"))
        .collect::<Vec<_>>()
        .join(", ");
    println!(
        "  control-plane CPU      {:>8.2} s  ({components})",
        run.control_plane.total()
    );
    for swap in swap.into_iter().flatten() {
        swap.print(args.count);
    }
    println!("  SIGTERM to exit        {:>8.2} s", shutdown.as_secs_f64());
    println!(
        "  namespace gone         {:>8.1} s after its deletion",
        deleted.as_secs_f64()
    );
    println!("  load average at the end {}", load_average());
    if let Some(b) = baseline {
        let base = b.writes as f64 / b.elapsed.as_secs_f64();
        println!(
            "  applied-rate ratio     {:>8.2}   (operator child applies/s over baseline applies/s)",
            applies_per_s / base
        );
    }
    Ok(())
}

/// The sum of `counts` per AppService of `count`, and the counts as `key n, key n`.
fn per_app_and_breakdown(counts: &BTreeMap<String, u64>, count: usize) -> (f64, String) {
    let breakdown = counts
        .iter()
        .map(|(key, n)| format!("{key} {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let per_app = counts.values().sum::<u64>() as f64 / count.max(1) as f64;
    (per_app, breakdown)
}

/// The 1, 5 and 15 minute load averages, to judge how busy the machine was.
fn load_average() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// What the operator run measured.
struct Run {
    applied: Duration,
    ready: Duration,
    p50: f64,
    p99: f64,
    reconciles: u64,
    failures: u64,
    requests_by_method: [u64; 5],
    /// Writes by method and resource (`"PATCH deployments"`).
    writes: BTreeMap<String, u64>,
    /// Objects each watch delivered, by watch (`deployments`).
    watch_events: BTreeMap<String, u64>,
    peak_rss_kib: u64,
    /// The operator's CPU seconds from its start until every AppService was Ready.
    cpu_secs: f64,
    /// The control plane's CPU seconds from the creation of the AppServices until every one was
    /// Ready, by component.
    control_plane: control_plane::Sample,
}

async fn measure(
    client: &Client,
    args: &Args,
    ns: &str,
    apps: Vec<AppService>,
    operator: &mut OperatorProcess,
) -> anyhow::Result<Run> {
    operator.wait_ready(Duration::from_secs(60)).await?;
    let stores = Stores::watch(client, ns).await?;
    let count = apps.len();
    let control_plane_start = control_plane::Sample::take()?;
    let started = Instant::now();
    create_apps(client, ns, apps, args.concurrency).await?;
    println!(
        "  created {count} AppServices in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let (mut applied, mut ready) = (None, None);
    let deadline = started + Duration::from_secs(args.timeout_secs);
    while ready.is_none() {
        operator.check_alive()?;
        let with_children = stores.with_children();
        let ready_now = stores.apps.state().iter().filter(|a| is_ready(a)).count();
        if applied.is_none() && with_children == count {
            applied = Some(started.elapsed());
        }
        if ready_now == count {
            ready = Some(started.elapsed());
        }
        if Instant::now() > deadline {
            bail!("timed out: {with_children}/{count} with children, {ready_now}/{count} Ready");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let cpu_secs = operator.cpu_seconds()?;
    let control_plane = control_plane::Sample::take()?.since(&control_plane_start);
    let metrics = http_get(&args.metrics_addr, "/metrics").await?;
    let histogram = "app_operator_reconcile_duration_seconds";
    Ok(Run {
        applied: applied.expect("set before ready"),
        ready: ready.expect("loop ends when set"),
        p50: prom::quantile(&metrics, histogram, 0.5).unwrap_or_default(),
        p99: prom::quantile(&metrics, histogram, 0.99).unwrap_or_default(),
        reconciles: prom::sum(&metrics, "app_operator_reconciles_total", "") as u64,
        failures: prom::sum(&metrics, "app_operator_reconcile_errors_total", "") as u64,
        requests_by_method: prom::by_method(&metrics, "app_operator_kube_requests_total"),
        writes: prom::writes_by_resource(&metrics, "app_operator_kube_requests_total"),
        watch_events: prom::by_label(&metrics, "app_operator_watch_events_total", "kind"),
        peak_rss_kib: operator.peak_rss_kib()?,
        cpu_secs,
        control_plane,
    })
}

/// Creates `apps` in `ns`, `concurrency` requests in flight.
async fn create_apps(
    client: &Client,
    ns: &str,
    apps: Vec<AppService>,
    concurrency: usize,
) -> anyhow::Result<()> {
    let api: Api<AppService> = Api::namespaced(client.clone(), ns);
    stream::iter(apps)
        .map(|app| {
            let api = api.clone();
            async move { api.create(&PostParams::default(), &app).await.map(|_| ()) }
        })
        .buffer_unordered(concurrency)
        .try_collect::<Vec<()>>()
        .await
        .context("failed to create the AppServices")?;
    Ok(())
}

/// Deletes `ns` and waits until it is gone (its objects deleted, their nodePorts freed); returns
/// how long that took.
async fn delete_namespace(client: &Client, ns: TestNamespace) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let name = ns.name().to_owned();
    drop(ns);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    wait::until(
        &format!("namespace {name} deleted"),
        Duration::from_secs(900),
        || async { Ok(namespaces.get_opt(&name).await?.is_none().then_some(())) },
    )
    .await?;
    Ok(started.elapsed())
}

fn names<K: Resource<DynamicType = ()> + Clone + 'static>(store: &Store<K>) -> HashSet<String> {
    store.state().iter().map(|o| o.name_any()).collect()
}

fn is_ready(app: &AppService) -> bool {
    let Some(status) = &app.status else {
        return false;
    };
    status.observed_generation == app.metadata.generation
        && status
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// The AppServices, Deployments and Services of the bench namespace, as the benchmark sees them.
struct Stores {
    apps: Store<AppService>,
    deployments: Store<Deployment>,
    services: Store<Service>,
}

impl Stores {
    /// Watches the three kinds in `ns` and returns once each store holds its first list.
    async fn watch(client: &Client, ns: &str) -> anyhow::Result<Self> {
        let stores = Self {
            apps: watch(client, ns),
            deployments: watch(client, ns),
            services: watch(client, ns),
        };
        stores.apps.wait_until_ready().await?;
        stores.deployments.wait_until_ready().await?;
        stores.services.wait_until_ready().await?;
        Ok(stores)
    }

    /// How many AppServices have both their Deployment and their Service.
    fn with_children(&self) -> usize {
        let (d, s) = (names(&self.deployments), names(&self.services));
        self.apps
            .state()
            .iter()
            .filter(|a| d.contains(&a.name_any()) && s.contains(&a.name_any()))
            .count()
    }
}

/// A store of the `K`s in `ns`, kept up to date by a background task.
fn watch<K>(client: &Client, ns: &str) -> Store<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    K: Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    let (store, writer) = reflector::store();
    let stream = watcher(
        Api::<K>::namespaced(client.clone(), ns),
        watcher::Config::default(),
    )
    .default_backoff()
    .reflect(writer)
    .applied_objects();
    tokio::spawn(stream.for_each(|_| async {}));
    store
}

/// The body of `GET http://<addr><path>`, failing unless it answers 200.
async fn http_get(addr: &str, path: &str) -> anyhow::Result<String> {
    let socket = addr
        .parse()
        .with_context(|| format!("{addr} is not an address"))?;
    // NB: a blocking GET; off the async workers, which keep the benchmark's watches going while
    // the swap phase polls /metrics every 100 ms.
    let get = path.to_owned();
    let answer =
        tokio::task::spawn_blocking(move || app_operator_e2e::process::http_get(socket, &get))
            .await?;
    match answer {
        Some((200, body)) => Ok(body),
        Some((code, _)) => bail!("GET {path}: HTTP {code}"),
        None => bail!("GET http://{addr}{path}: no answer"),
    }
}

//! `bench-scale` (`make bench-scale`): N AppServices created at once on the local control plane,
//! reconciled by the operator binary running as a separate process. Prints the time until every
//! AppService has its children applied and until every one is Ready, reconcile p50/p99, the API
//! requests the operator made, its peak RSS, and the API server's own write rate for the same
//! objects with no operator, for the ratio. Then it swaps the guest through the guest ConfigMap
//! and prints the time until every AppService's children carry the new guest, and the reconciles
//! that failed meanwhile.

mod baseline;
mod prom;
mod swap;

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use app_operator::consts::GUEST_CONFIGMAP;
use app_operator::crd::AppService;
use app_operator_e2e::operator::install_crd;
use app_operator_e2e::{TestNamespace, client};
use clap::Parser;
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::api::PostParams;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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
    /// Address for the operator's metrics endpoint.
    #[arg(long, default_value = "127.0.0.1:18080")]
    metrics_addr: String,
    /// Address for the operator's probes.
    #[arg(long, default_value = "127.0.0.1:18081")]
    probe_addr: String,
    /// Skip the no-operator baseline.
    #[arg(long)]
    skip_baseline: bool,
    /// Skip the guest swap.
    #[arg(long)]
    skip_swap: bool,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 1800)]
    timeout_secs: u64,
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
    let args = Args::parse();
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
    let mut operator = Operator::spawn(&args, ns.name())?;
    let result = measure(&client, &args, ns.name(), apps, &mut operator).await;
    let swap = match (&result, args.skip_swap) {
        (Ok(_), false) => Some(swap::run(&client, &args, ns.name(), &mut operator).await),
        _ => None,
    };
    let shutdown = operator.terminate()?;
    let run = result?;
    let swap = swap.transpose()?;

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
    println!(
        "  API requests           {:>8}   ({})",
        run.requests, run.requests_by_method
    );
    println!(
        "  peak RSS               {:>8.1} MiB",
        run.peak_rss_kib as f64 / 1024.0
    );
    for swap in swap.into_iter().flatten() {
        swap.print(args.count);
    }
    println!("  SIGTERM to exit        {:>8.2} s", shutdown.as_secs_f64());
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
    requests: u64,
    requests_by_method: String,
    peak_rss_kib: u64,
}

async fn measure(
    client: &Client,
    args: &Args,
    ns: &str,
    apps: Vec<AppService>,
    operator: &mut Operator,
) -> anyhow::Result<Run> {
    operator.wait_ready(Duration::from_secs(60)).await?;
    let Stores {
        apps: app_store,
        deployments,
        services,
    } = Stores::watch(client, ns).await?;
    let count = apps.len();
    let api: Api<AppService> = Api::namespaced(client.clone(), ns);
    let started = Instant::now();
    stream::iter(apps)
        .map(|app| {
            let api = api.clone();
            async move { api.create(&PostParams::default(), &app).await.map(|_| ()) }
        })
        .buffer_unordered(args.concurrency)
        .try_collect::<Vec<()>>()
        .await
        .context("failed to create the AppServices")?;
    println!(
        "  created {count} AppServices in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let (mut applied, mut ready) = (None, None);
    let deadline = started + Duration::from_secs(args.timeout_secs);
    while ready.is_none() {
        operator.check_alive()?;
        let (d, s) = (names(&deployments), names(&services));
        let apps_now = app_store.state();
        let with_children = apps_now
            .iter()
            .filter(|a| d.contains(&a.name_any()) && s.contains(&a.name_any()))
            .count();
        let ready_now = apps_now.iter().filter(|a| is_ready(a)).count();
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
    let metrics = http_get(&args.metrics_addr, "/metrics").await?;
    let histogram = "app_operator_reconcile_duration_seconds";
    let methods = ["GET", "POST", "PUT", "PATCH", "DELETE"]
        .iter()
        .map(|m| {
            format!(
                "{m} {}",
                prom::sum(
                    &metrics,
                    "app_operator_kube_requests_total",
                    &format!("\"{m}\"")
                )
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    Ok(Run {
        applied: applied.expect("set before ready"),
        ready: ready.expect("loop ends when set"),
        p50: prom::quantile(&metrics, histogram, 0.5).unwrap_or_default(),
        p99: prom::quantile(&metrics, histogram, 0.99).unwrap_or_default(),
        reconciles: prom::sum(&metrics, "app_operator_reconciles_total", "") as u64,
        failures: prom::sum(&metrics, "app_operator_reconcile_errors_total", "") as u64,
        requests: prom::sum(&metrics, "app_operator_kube_requests_total", "") as u64,
        requests_by_method: methods,
        peak_rss_kib: operator.peak_rss_kib()?,
    })
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

/// The operator binary, running as a child process, reading its guest from ConfigMap
/// [`GUEST_CONFIGMAP`] in the bench namespace.
struct Operator {
    child: Child,
    probe_addr: String,
}

impl Operator {
    fn spawn(args: &Args, ns: &str) -> anyhow::Result<Self> {
        let log = std::fs::File::create("bench-scale-operator.log")?;
        let child = Command::new(&args.operator)
            .args(["run", "--namespace", ns, "--log-format", "json"])
            .args(["--guest-configmap", GUEST_CONFIGMAP])
            .args(["--guest-configmap-namespace", ns])
            .args([
                "--metrics-addr",
                &args.metrics_addr,
                "--probe-addr",
                &args.probe_addr,
            ])
            .env("KUBECONFIG", app_operator_e2e::cluster::kubeconfig_path())
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("failed to start {}", args.operator.display()))?;
        Ok(Self {
            child,
            probe_addr: args.probe_addr.clone(),
        })
    }

    async fn wait_ready(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            self.check_alive()?;
            if let Ok(body) = http_get(&self.probe_addr, "/readyz").await
                && body == "ready"
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("the operator is not ready after {timeout:?} (see bench-scale-operator.log)");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn check_alive(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!("the operator exited with {status} (see bench-scale-operator.log)");
        }
        Ok(())
    }

    /// Peak resident set size (VmHWM) in KiB.
    fn peak_rss_kib(&self) -> anyhow::Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        let line = status
            .lines()
            .find(|l| l.starts_with("VmHWM:"))
            .context("no VmHWM")?;
        Ok(line
            .split_whitespace()
            .nth(1)
            .context("no VmHWM value")?
            .parse()?)
    }

    /// Sends SIGTERM and returns how long the operator took to exit.
    fn terminate(&mut self) -> anyhow::Result<Duration> {
        let started = Instant::now();
        Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()?;
        while self.child.try_wait()?.is_none() {
            if started.elapsed() > Duration::from_secs(30) {
                self.child.kill()?;
                bail!("the operator did not exit within 30 s of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(started.elapsed())
    }
}

/// The body of `GET http://<addr><path>` (HTTP/1.1, no keep-alive).
async fn http_get(addr: &str, path: &str) -> anyhow::Result<String> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .context("no HTTP header end")?;
    if !head.starts_with("HTTP/1.1 200") {
        bail!("GET {path}: {}", head.lines().next().unwrap_or_default());
    }
    Ok(body.to_owned())
}

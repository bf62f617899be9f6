//! Faults on the operator's path to the API server, the quick ones: an API outage of 15 s, 1 s
//! of added latency on every request, connection resets every 3 s, and kill -9 in the middle of
//! creating 200 AppServices. The operator (the binary) talks to the API server through a
//! Toxiproxy proxy (`app_operator_e2e::faults`); the test's own client goes direct.
//!
//! After each fault every AppService converges (`fleet::converged`), a user's Deployment and
//! Service in the namespace are left unwritten, and no child that existed before the fault is
//! deleted and created again unless the test deleted it; that count is asserted to be 0. Each
//! scenario prints one summary line: the time until every child was applied and until all
//! converged after the fault ended, the operator's API requests during the fault and after it,
//! its peak RSS and the load average (times are printed, not asserted).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use app_operator::crd::AppService;
use app_operator_e2e::appservice::CONVERGE;
use app_operator_e2e::cluster::kubeconfig_path;
use app_operator_e2e::faults::{Stream, Toxiproxy, kubeconfig_through};
use app_operator_e2e::fleet::{Converged, create_all, samples, wait_converged};
use app_operator_e2e::operator::install_crd;
use app_operator_e2e::process::OperatorProcess;
use app_operator_e2e::snapshot::{Snapshot, bystanders};
use app_operator_e2e::{TestNamespace, client};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;

/// How long the operator gets to converge after a fault ends. Generous: kube's watcher backs
/// off after errors (800 ms doubling up to 30 s), so recovery can take tens of seconds.
const RECOVERY: Duration = Duration::from_secs(90);

/// [`RECOVERY`] after the outage, longer: seen from 2 s to over 90 s (in 2 runs of about 30).
// NB: kube's Controller backs off its merged trigger stream (`trigger_backoff`) on top of each
// watch's own backoff: while it sleeps no watch is polled, so the errors of the other watches
// are taken one per (doubling) step, and a connection opened before a step is stale after it
// (`tls handshake eof`), another error.
const OUTAGE_RECOVERY: Duration = Duration::from_secs(240);

/// The scenarios run one at a time, so that one's figures do not include another's load.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// One scenario's namespace, with a user's objects in it, and a work directory for logs.
struct Scene {
    client: Client,
    ns: TestNamespace,
    work: PathBuf,
    bystanders: Vec<String>,
}

impl Scene {
    async fn new(prefix: &str) -> anyhow::Result<Self> {
        let client = client().await?;
        install_crd(&client).await?;
        let ns = TestNamespace::create(&client, prefix).await?;
        let work = std::env::temp_dir().join(format!("app-operator-{}", ns.name()));
        let bystanders = bystanders(&client, ns.name()).await?;
        Ok(Self {
            client,
            ns,
            work,
            bystanders,
        })
    }

    fn name(&self) -> &str {
        self.ns.name()
    }

    /// Starts `app-operator run` for the namespace with `kubeconfig`, and waits until it is
    /// ready.
    async fn operator(&self, name: &str, kubeconfig: &Path) -> anyhow::Result<OperatorProcess> {
        let args = ["--namespace", self.name(), "--guest-configmap", ""];
        let mut operator = OperatorProcess::start(name, kubeconfig, &args, &self.work)?;
        operator.wait_readyz("ready").await?;
        Ok(operator)
    }

    async fn create(&self, apps: Vec<AppService>) -> anyhow::Result<()> {
        create_all(&self.client, self.name(), apps).await
    }

    /// Waits until the namespace holds `count` AppServices, all converged; times from `since`.
    async fn converge(
        &self,
        count: usize,
        since: Instant,
        timeout: Duration,
    ) -> anyhow::Result<Converged> {
        wait_converged(&self.client, self.name(), count, since, timeout).await
    }

    /// What the fault lost or wrongly touched since `before`: children gone or created again
    /// (but those in `deleted`, which the test deleted), the user's objects written.
    async fn damage(&self, before: &Snapshot, deleted: &[String]) -> anyhow::Result<Vec<String>> {
        let after = Snapshot::take(&self.client, self.name()).await?;
        let mut damage = before.recreated(&after, deleted);
        damage.extend(before.written(&after, &self.bystanders));
        Ok(damage)
    }

    fn done(self) {
        let _ = std::fs::remove_dir_all(&self.work);
    }
}

/// The operator's API requests so far, by GETs (watches included) and writes (every other
/// method).
#[derive(Clone, Copy, Debug, Default)]
struct Requests {
    gets: f64,
    writes: f64,
}

impl Requests {
    fn of(operator: &OperatorProcess) -> Self {
        let total = operator
            .metric_sum("app_operator_kube_requests_total")
            .unwrap_or(0.0);
        let gets = operator
            .metric(r#"app_operator_kube_requests_total{method="GET"}"#)
            .unwrap_or(0.0);
        Self {
            gets,
            writes: total - gets,
        }
    }

    /// `self - earlier`, as "N GET, M writes".
    fn since(self, earlier: Requests) -> String {
        format!(
            "{} GET, {} writes",
            self.gets - earlier.gets,
            self.writes - earlier.writes
        )
    }
}

/// One scenario's figures.
struct Figures<'a> {
    scenario: &'a str,
    /// Times to converge after the fault ended.
    converged: Converged,
    /// The operator's requests when the fault began and when it ended (the summary counts the
    /// rest up to its check).
    requests: (Requests, Requests),
}

/// Prints the scenario's summary line, and fails when anything was lost or wrongly touched.
fn summary(figures: Figures, operator: &OperatorProcess, damage: &[String]) -> anyhow::Result<()> {
    let Figures {
        scenario,
        converged,
        requests: (began, ended),
    } = figures;
    let now = Requests::of(operator);
    let peak = operator.status_kib("VmHWM")? as f64 / 1024.0;
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load = load.split_whitespace().next().unwrap_or("?").to_owned();
    println!(
        "fault {scenario}: after the fault ended, children applied in {:.1} s, all converged in \
         {:.1} s; requests during the fault {}, during recovery {}; peak RSS {peak:.1} MiB; \
         lost or wrongly touched: {}; load {load}",
        converged.children.as_secs_f64(),
        converged.all.as_secs_f64(),
        ended.since(began),
        now.since(ended),
        damage.len(),
    );
    anyhow::ensure!(
        damage.is_empty(),
        "{scenario}: {damage:?}; operator log tail:\n{}",
        operator.log_tail(20)
    );
    Ok(())
}

#[tokio::test]
async fn an_api_outage_heals_and_what_changed_meanwhile_converges() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let scene = Scene::new("faults-outage").await?;
    let toxiproxy = Toxiproxy::start(&scene.work).await?;
    let proxy = toxiproxy.api_server_proxy("outage").await?;
    let operator = scene
        .operator("outage", &kubeconfig_through(&proxy, &scene.work)?)
        .await?;
    scene.create(samples("app", 0..20)).await?;
    scene.converge(20, Instant::now(), CONVERGE).await?;
    let before = Snapshot::take(&scene.client, scene.name()).await?;

    // 15 s cut off; meanwhile AppServices are created, children deleted and a spec changed.
    let began = Requests::of(&operator);
    proxy.disable().await?;
    let cut = Instant::now();
    scene.create(samples("new", 0..10)).await?;
    let deployments: Api<Deployment> = Api::namespaced(scene.client.clone(), scene.name());
    let services: Api<Service> = Api::namespaced(scene.client.clone(), scene.name());
    let gone = DeleteParams::background();
    deployments.delete("app-0", &gone).await?;
    services.delete("app-1", &gone).await?;
    deployments.delete("app-2", &gone).await?;
    let apps: Api<AppService> = Api::namespaced(scene.client.clone(), scene.name());
    let scale = json!({"spec": {"replicas": 2}});
    apps.patch("app-3", &PatchParams::default(), &Patch::Merge(&scale))
        .await?;
    tokio::time::sleep(Duration::from_secs(10).saturating_sub(cut.elapsed())).await;
    let readyz = operator.probe("/readyz");
    tokio::time::sleep(Duration::from_secs(15).saturating_sub(cut.elapsed())).await;
    let ended = Requests::of(&operator);
    proxy.enable().await?;

    let converged = scene.converge(30, Instant::now(), OUTAGE_RECOVERY).await?;
    let deleted = ["Deployment/app-0", "Service/app-1", "Deployment/app-2"].map(String::from);
    let damage = scene.damage(&before, &deleted).await?;
    println!("fault outage: /readyz 10 s into the outage: {readyz:?}");
    let figures = Figures {
        scenario: "outage 15 s",
        converged,
        requests: (began, ended),
    };
    summary(figures, &operator, &damage)?;
    scene.done();
    Ok(())
}

#[tokio::test]
async fn a_second_of_latency_on_every_request_still_converges() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let scene = Scene::new("faults-latency").await?;
    let toxiproxy = Toxiproxy::start(&scene.work).await?;
    let proxy = toxiproxy.api_server_proxy("latency").await?;
    let operator = scene
        .operator("latency", &kubeconfig_through(&proxy, &scene.work)?)
        .await?;
    scene.create(samples("app", 0..5)).await?;
    scene.converge(5, Instant::now(), CONVERGE).await?;
    let before = Snapshot::take(&scene.client, scene.name()).await?;

    // Half a second each way: every request's answer comes 1 s later, every watch event 0.5 s.
    for stream in Stream::BOTH {
        proxy.latency(stream, 500).await?;
    }
    let began = Requests::of(&operator);
    let slowed = Instant::now();
    scene.create(samples("slow", 0..10)).await?;
    // NB: the fault lasts until everything converged; the times are from the creations.
    let converged = scene.converge(15, slowed, RECOVERY).await?;
    let ended = Requests::of(&operator);
    proxy.clear_toxics().await?;
    let damage = scene.damage(&before, &[]).await?;
    let figures = Figures {
        scenario: "latency 1 s, 10 created under it (times from the creations)",
        converged,
        requests: (began, ended),
    };
    summary(figures, &operator, &damage)?;
    scene.done();
    Ok(())
}

#[tokio::test]
async fn connection_resets_every_few_seconds_do_not_lose_changes() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let scene = Scene::new("faults-resets").await?;
    let toxiproxy = Toxiproxy::start(&scene.work).await?;
    let proxy = toxiproxy.api_server_proxy("resets").await?;
    let operator = scene
        .operator("resets", &kubeconfig_through(&proxy, &scene.work)?)
        .await?;
    scene.create(samples("app", 0..5)).await?;
    scene.converge(5, Instant::now(), CONVERGE).await?;
    let before = Snapshot::take(&scene.client, scene.name()).await?;

    // Every 3 s for 15 s: for 1 s, every connection that carries data either way is reset (the
    // watches with it), and two AppServices are created.
    let began = Requests::of(&operator);
    for cycle in 0..5 {
        for stream in Stream::BOTH {
            proxy.reset_peer(stream, 0).await?;
        }
        scene
            .create(samples("reset", 2 * cycle..2 * cycle + 2))
            .await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        proxy.clear_toxics().await?;
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let ended = Requests::of(&operator);
    let converged = scene.converge(15, Instant::now(), RECOVERY).await?;
    let damage = scene.damage(&before, &[]).await?;
    let figures = Figures {
        scenario: "resets every 3 s for 15 s",
        converged,
        requests: (began, ended),
    };
    summary(figures, &operator, &damage)?;
    scene.done();
    Ok(())
}

/// AppServices created at once for the kill -9 scenario.
const BURST: usize = 200;

#[tokio::test]
async fn kill_9_in_the_middle_of_a_burst_loses_nothing() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let scene = Scene::new("faults-kill").await?;
    let mut first = scene.operator("kill-first", &kubeconfig_path()).await?;

    let began = Instant::now();
    let burst = {
        let (client, ns) = (scene.client.clone(), scene.name().to_owned());
        tokio::spawn(async move { create_all(&client, &ns, samples("app", 0..BURST)).await })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    let first_peak = first.status_kib("VmHWM")? as f64 / 1024.0;
    let first_requests = Requests::of(&first).since(Requests::default());
    first.kill()?;
    // What the first operator made before it died must survive the second one.
    let before = Snapshot::take(&scene.client, scene.name()).await?;
    let children = before.0.len() - scene.bystanders.len();
    burst.await??;
    let created = began.elapsed();

    let restarted = Instant::now();
    let second = scene.operator("kill-second", &kubeconfig_path()).await?;
    let converged = scene.converge(BURST, restarted, RECOVERY).await?;
    println!(
        "fault kill -9: the burst of {BURST} took {:.1} s to create; the first operator, killed \
         1 s into it, had sent {first_requests} (peak RSS {first_peak:.1} MiB) and made \
         {children} children",
        created.as_secs_f64()
    );
    let damage = scene.damage(&before, &[]).await?;
    let figures = Figures {
        scenario: "kill -9 amid 200 creations (times from the restart)",
        converged,
        requests: (Requests::default(), Requests::default()),
    };
    summary(figures, &second, &damage)?;
    scene.done();
    Ok(())
}

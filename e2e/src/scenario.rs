//! One fault scenario's set-up and report, shared by the quick scenarios (`tests/faults.rs`, in
//! `make test`) and the long ones (`tests/chaos.rs`, `make chaos`): a namespace with a user's
//! objects in it, the operator as a process, the proof that nothing was lost or wrongly touched,
//! and one summary line of figures.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kube::Client;

use crate::appservice::CONVERGE;
use crate::cluster::kubeconfig_path;
use crate::faults::{Proxy, Toxiproxy, kubeconfig_through};
use crate::fleet::{Converged, create_all, samples, wait_converged};
use crate::operator::install_crd;
use crate::process::OperatorProcess;
use crate::prom::sum_matching;
use crate::snapshot::{Snapshot, bystanders};
use crate::{TestNamespace, client};

use app_operator::crd::AppService;

/// How long the operator gets to converge after a fault ends (printed, not asserted, below it).
pub const RECOVERY: Duration = Duration::from_secs(90);

/// One scenario's namespace, with a user's objects in it, and a work directory for logs.
pub struct Scene {
    /// The test's own client, straight to the API server.
    pub client: Client,
    /// The scenario's namespace.
    pub ns: TestNamespace,
    /// Logs and kubeconfigs of the scenario.
    pub work: PathBuf,
    /// `Kind/name` of the user's objects beside the children.
    pub bystanders: Vec<String>,
}

impl Scene {
    /// A fresh namespace named after `prefix`, the CRD installed and a user's objects created.
    pub async fn new(prefix: &str) -> anyhow::Result<Self> {
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

    /// The namespace's name.
    pub fn name(&self) -> &str {
        self.ns.name()
    }

    /// Starts `app-operator run` for the namespace with `kubeconfig` and `extra` flags, and
    /// waits until `/readyz` says `state` (`ready`, or `standby` for a second replica).
    pub async fn operator_with(
        &self,
        name: &str,
        kubeconfig: &Path,
        extra: &[String],
        state: &str,
    ) -> anyhow::Result<OperatorProcess> {
        let mut args = vec!["--guest-configmap", ""];
        if !extra.iter().any(|a| a == "--namespace") {
            args.extend(["--namespace", self.name()]);
        }
        args.extend(extra.iter().map(String::as_str));
        let mut operator = OperatorProcess::start(name, kubeconfig, &args, &self.work)?;
        operator.wait_readyz(state).await?;
        Ok(operator)
    }

    /// [`Scene::operator_with`] no extra flags, waiting until it is ready.
    pub async fn operator(&self, name: &str, kubeconfig: &Path) -> anyhow::Result<OperatorProcess> {
        self.operator_with(name, kubeconfig, &[], "ready").await
    }

    /// The operator `name`, talking to the API server through a Toxiproxy proxy of its own,
    /// with AppServices `app-0` .. `app-<count-1>` created and converged, and the namespace's
    /// objects recorded after that.
    pub async fn behind_proxy(&self, name: &str, count: usize) -> anyhow::Result<Proxied> {
        let toxiproxy = Toxiproxy::start(&self.work).await?;
        let proxy = toxiproxy.api_server_proxy(name).await?;
        let operator = self
            .operator(name, &kubeconfig_through(&proxy, &self.work)?)
            .await?;
        let before = self.converged_fleet(count).await?;
        Ok(Proxied {
            toxiproxy,
            proxy,
            operator,
            before,
        })
    }

    /// Creates AppServices `app-0` .. `app-<count-1>`, waits until they converged and records the
    /// namespace's objects.
    pub async fn converged_fleet(&self, count: usize) -> anyhow::Result<Snapshot> {
        self.create(samples("app", 0..count)).await?;
        self.converge(count, Instant::now(), CONVERGE).await?;
        Snapshot::take(&self.client, self.name()).await
    }

    /// Creates `apps` in the namespace, 16 at once.
    pub async fn create(&self, apps: Vec<AppService>) -> anyhow::Result<()> {
        create_all(&self.client, self.name(), apps).await
    }

    /// Waits until the namespace holds `count` AppServices, all converged; times from `since`.
    pub async fn converge(
        &self,
        count: usize,
        since: Instant,
        timeout: Duration,
    ) -> anyhow::Result<Converged> {
        wait_converged(&self.client, self.name(), count, since, timeout).await
    }

    /// What the fault lost or wrongly touched since `before`: children gone or created again
    /// (but those in `deleted`, which the test deleted), the user's objects written.
    pub async fn damage(
        &self,
        before: &Snapshot,
        deleted: &[String],
    ) -> anyhow::Result<Vec<String>> {
        let after = Snapshot::take(&self.client, self.name()).await?;
        let mut damage = before.recreated(&after, deleted);
        damage.extend(before.written(&after, &self.bystanders));
        Ok(damage)
    }

    /// The operator killed with SIGKILL 1 s into creating `count` AppServices at once, then
    /// started again: every AppService converges, and nothing the first one made is lost.
    pub async fn kill_9_amid(self, count: usize) -> anyhow::Result<()> {
        let mut first = self.operator("kill-first", &kubeconfig_path()).await?;
        let began = Instant::now();
        let burst = {
            let (client, ns) = (self.client.clone(), self.name().to_owned());
            tokio::spawn(async move { create_all(&client, &ns, samples("app", 0..count)).await })
        };
        tokio::time::sleep(Duration::from_secs(1)).await;
        let first_peak = first.status_kib("VmHWM")? as f64 / 1024.0;
        let first_requests = Requests::of(&first).since(Requests::default());
        first.kill()?;
        // What the first operator made before it died must survive the second one.
        let before = Snapshot::take(&self.client, self.name()).await?;
        let children = before.0.len() - self.bystanders.len();
        burst.await??;
        let created = began.elapsed();

        let restarted = Instant::now();
        let second = self.operator("kill-second", &kubeconfig_path()).await?;
        let converged = self.converge(count, restarted, RECOVERY).await?;
        println!(
            "fault kill -9: the burst of {count} took {:.1} s to create; the first operator, \
             killed 1 s into it, had sent {first_requests} (peak RSS {first_peak:.1} MiB) and \
             made {children} children",
            created.as_secs_f64()
        );
        let scenario = format!("kill -9 amid {count} creations (times from the restart)");
        let figures = Figures {
            scenario: &scenario,
            converged,
            requests: (Requests::default(), Requests::default()),
        };
        self.report(figures, &second, &before, &[]).await
    }

    /// Reports the scenario ([`summary`]) with what the fault lost or wrongly touched since
    /// `before` (but the children in `deleted`), and removes the work directory; fails when
    /// anything was.
    pub async fn report(
        self,
        figures: Figures<'_>,
        operator: &OperatorProcess,
        before: &Snapshot,
        deleted: &[String],
    ) -> anyhow::Result<()> {
        let damage = self.damage(before, deleted).await?;
        summary(figures, operator, &damage)?;
        self.done();
        Ok(())
    }

    /// Removes the work directory (the namespace goes when the scene is dropped).
    pub fn done(self) {
        let _ = std::fs::remove_dir_all(&self.work);
    }
}

/// An operator behind its own proxy ([`Scene::behind_proxy`]).
///
/// NB: destructure it binding `toxiproxy` to a name (`toxiproxy: _proxy`), not `..`: the proxy
/// server stops when it is dropped.
pub struct Proxied {
    /// The proxy server.
    pub toxiproxy: Toxiproxy,
    /// The operator's path to the API server.
    pub proxy: Proxy,
    /// The operator.
    pub operator: OperatorProcess,
    /// The namespace's objects once the first AppServices converged.
    pub before: Snapshot,
}

/// An operator's API requests so far, by GETs (watches included) and writes (every other
/// method).
#[derive(Clone, Copy, Debug, Default)]
pub struct Requests {
    /// GET requests, watches and lists included.
    pub gets: f64,
    /// Every other method.
    pub writes: f64,
}

impl Requests {
    /// What `operator`'s `/metrics` count now, from one scrape (two could see a request
    /// between them and count it as a write taken back).
    pub fn of(operator: &OperatorProcess) -> Self {
        let metrics = operator.metrics().unwrap_or_default();
        let of = |label| sum_matching(&metrics, "app_operator_kube_requests_total", label);
        let total = of("").unwrap_or(0.0);
        let gets = of(r#"method="GET""#).unwrap_or(0.0);
        Self {
            gets,
            writes: total - gets,
        }
    }

    /// `self - earlier`, as "N GET, M writes".
    pub fn since(self, earlier: Requests) -> String {
        format!(
            "{} GET, {} writes",
            self.gets - earlier.gets,
            self.writes - earlier.writes
        )
    }
}

/// One scenario's figures.
pub struct Figures<'a> {
    /// What the scenario did, for the summary line.
    pub scenario: &'a str,
    /// Times to converge after the fault ended.
    pub converged: Converged,
    /// The operator's requests when the fault began and when it ended (the summary counts the
    /// rest up to its check).
    pub requests: (Requests, Requests),
}

/// Prints the scenario's summary line (`fault <scenario>: ...`), and fails when anything was
/// lost or wrongly touched.
pub fn summary(
    figures: Figures,
    operator: &OperatorProcess,
    damage: &[String],
) -> anyhow::Result<()> {
    let Figures {
        scenario,
        converged,
        requests: (began, ended),
    } = figures;
    let now = Requests::of(operator);
    let peak = operator.status_kib("VmHWM")? as f64 / 1024.0;
    println!(
        "fault {scenario}: after the fault ended, children applied in {:.1} s, all converged in \
         {:.1} s; requests during the fault {}, during recovery {}; peak RSS {peak:.1} MiB; \
         lost or wrongly touched: {}; load {}",
        converged.children.as_secs_f64(),
        converged.all.as_secs_f64(),
        ended.since(began),
        now.since(ended),
        damage.len(),
        load(),
    );
    anyhow::ensure!(
        damage.is_empty(),
        "{scenario}: {damage:?}; operator log tail:\n{}",
        operator.log_tail(20)
    );
    Ok(())
}

/// The 1-minute load average, for the summary lines.
pub fn load() -> String {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    load.split_whitespace().next().unwrap_or("?").to_owned()
}

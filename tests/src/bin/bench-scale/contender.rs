//! The operators the benchmark runs, each as a child process: app-operator and the Go seed peer
//! (`bench/peers/go-seed`), described by a [`Contender`] and run as an [`Operator`].

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use app_operator::consts::GUEST_CONFIGMAP;

use app_operator_e2e::process;

use crate::{Args, http_get};

/// How to run one operator and read its figures: its command line, the address whose `/readyz`
/// answers 200 once it is ready, and the counter of its API requests (labelled `method`).
pub(crate) struct Contender {
    /// Short name, in tables and log file names.
    pub name: &'static str,
    /// The binary.
    program: PathBuf,
    /// Its arguments.
    args: Vec<String>,
    /// Environment variables set on top of the benchmark's own.
    env: Vec<(&'static str, String)>,
    /// Address of the probe endpoint serving `/readyz`.
    probe_addr: String,
    /// Address of the Prometheus endpoint serving `/metrics`.
    pub metrics_addr: String,
    /// The counter of API requests by `method` on that endpoint.
    pub requests_metric: &'static str,
    /// Whether it writes AppService statuses (the Go seed writes none).
    pub writes_status: bool,
}

impl Contender {
    /// app-operator watching namespace `ns`, with its guest ConfigMap in `ns` (what the swap
    /// phase writes), logging at `RUST_LOG` (default `warn`) as JSON.
    pub(crate) fn app_operator(args: &Args, ns: &str) -> Self {
        let args_of = [
            "run",
            "--namespace",
            ns,
            "--log-format",
            "json",
            "--guest-configmap",
            GUEST_CONFIGMAP,
            "--guest-configmap-namespace",
            ns,
            "--metrics-addr",
            &args.metrics_addr,
            "--probe-addr",
            &args.probe_addr,
        ];
        Self {
            name: "app-operator",
            program: args.operator.clone(),
            args: args_of.map(str::to_owned).to_vec(),
            env: vec![(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )],
            probe_addr: args.probe_addr.clone(),
            metrics_addr: args.metrics_addr.clone(),
            requests_metric: "app_operator_kube_requests_total",
            writes_status: true,
        }
    }

    /// The Go seed operator `program` watching namespace `ns` (`WATCH_NAMESPACE`), with its
    /// scaffold's flags and defaults otherwise (development logging, no leader election).
    pub(crate) fn go_seed(program: &Path, args: &Args, ns: &str) -> Self {
        let args_of = [
            "--metrics-bind-address",
            &args.peer_metrics_addr,
            "--health-probe-bind-address",
            &args.peer_probe_addr,
        ];
        Self {
            name: "go-seed",
            program: program.to_owned(),
            args: args_of.map(str::to_owned).to_vec(),
            env: vec![("WATCH_NAMESPACE", ns.to_owned())],
            probe_addr: args.peer_probe_addr.clone(),
            metrics_addr: args.peer_metrics_addr.clone(),
            // NB: controller-runtime registers client-go's request counter under this name
            // (pkg/metrics/client_go_adapter.go), labelled code, method and host.
            requests_metric: "rest_client_requests_total",
            writes_status: false,
        }
    }
}

/// A running [`Contender`], a child process with the cluster's kubeconfig, its stderr in a log
/// file of its own.
pub(crate) struct Operator {
    child: Child,
    name: &'static str,
    probe_addr: String,
    log: PathBuf,
}

impl Operator {
    /// Starts `contender`, its stderr to `log`.
    pub(crate) fn spawn(contender: &Contender, log: &Path) -> anyhow::Result<Self> {
        let file = std::fs::File::create(log)
            .with_context(|| format!("failed to create {}", log.display()))?;
        let child = Command::new(&contender.program)
            .args(&contender.args)
            .env("KUBECONFIG", app_operator_e2e::cluster::kubeconfig_path())
            .envs(contender.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .with_context(|| format!("failed to start {}", contender.program.display()))?;
        Ok(Self {
            child,
            name: contender.name,
            probe_addr: contender.probe_addr.clone(),
            log: log.to_owned(),
        })
    }

    /// Waits until `/readyz` answers 200, failing after `timeout` or if the process exits.
    pub(crate) async fn wait_ready(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            self.check_alive()?;
            if http_get(&self.probe_addr, "/readyz").await.is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "{} is not ready after {timeout:?} (see {})",
                    self.name,
                    self.log.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Fails if the process has exited.
    pub(crate) fn check_alive(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!(
                "{} exited with {status} (see {})",
                self.name,
                self.log.display()
            );
        }
        Ok(())
    }

    /// Peak resident set size (VmHWM) in KiB.
    pub(crate) fn peak_rss_kib(&self) -> anyhow::Result<u64> {
        process::status_kib(self.child.id(), "VmHWM")
    }

    /// CPU time the process has used so far, user plus system, all threads, in seconds.
    pub(crate) fn cpu_seconds(&self) -> anyhow::Result<f64> {
        process::cpu_seconds(self.child.id())
    }

    /// Sends SIGTERM and returns how long the process took to exit (killed after 30 s).
    pub(crate) fn terminate(&mut self) -> anyhow::Result<Duration> {
        let started = Instant::now();
        Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()?;
        while self.child.try_wait()?.is_none() {
            if started.elapsed() > Duration::from_secs(30) {
                self.child.kill()?;
                self.child.wait()?;
                bail!("{} did not exit within 30 s of SIGTERM", self.name);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(started.elapsed())
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        // NB: a benchmark that fails half-way must not leave an operator running on the shared
        // cluster.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

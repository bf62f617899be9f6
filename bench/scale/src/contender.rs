//! The operators the benchmark runs, each as a child process: app-operator, the Go seed peer
//! (`bench/peers/go-seed`) and the kube-rs floor (`src/bin/kube-rs-floor.rs`), described by a [`Contender`] and run as the e2e crate's
//! [`OperatorProcess`].

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;
use app_operator::consts::GUEST_CONFIGMAP;
use app_operator_e2e::process::OperatorProcess;

use crate::Args;

/// How to run one operator and read its figures: its command line, the address whose `/readyz`
/// answers 200 once it is ready, and the counter of its API requests (labelled `method`).
pub(crate) struct Contender {
    /// Short name, in tables and log file names.
    pub(crate) name: &'static str,
    /// The binary.
    program: PathBuf,
    /// Its arguments.
    args: Vec<String>,
    /// Environment variables set on top of the benchmark's own.
    env: Vec<(&'static str, String)>,
    /// Address of the probe endpoint serving `/readyz`.
    probe_addr: String,
    /// Address of the Prometheus endpoint serving `/metrics`.
    pub(crate) metrics_addr: String,
    /// The counter of API requests by `method` on that endpoint.
    pub(crate) requests_metric: &'static str,
    /// Whether it writes AppService statuses (the Go seed writes none).
    pub(crate) writes_status: bool,
}

impl Contender {
    /// app-operator watching namespace `ns`, with its guest ConfigMap in `ns` (what the swap
    /// phase writes), logging at `RUST_LOG` (default `warn`) as JSON, loading the default guest
    /// precompiled unless `--compile-at-start`.
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
        let mut args_of = args_of.map(str::to_owned).to_vec();
        if let Some(dir) = &args.precompiled_dir {
            args_of.push("--guest-precompiled-dir".to_owned());
            args_of.push(dir.display().to_string());
        }
        Self {
            name: "app-operator",
            program: args.operator.clone(),
            args: args_of,
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

    /// The kube-rs floor `program` (the Go seed's work on app-operator's client stack) for
    /// namespace `ns`.
    pub(crate) fn floor(program: &Path, args: &Args, ns: &str) -> Self {
        let args_of = [
            "--namespace",
            ns,
            "--metrics-addr",
            &args.floor_metrics_addr,
            "--probe-addr",
            &args.floor_probe_addr,
        ];
        Self {
            name: "kube-rs-floor",
            program: program.to_owned(),
            args: args_of.map(str::to_owned).to_vec(),
            env: Vec::new(),
            probe_addr: args.floor_probe_addr.clone(),
            metrics_addr: args.floor_metrics_addr.clone(),
            // NB: it counts its requests with app-operator's own client layer.
            requests_metric: "app_operator_kube_requests_total",
            writes_status: false,
        }
    }
}

impl Contender {
    /// Starts the contender as a child process with the cluster's kubeconfig, its output to
    /// `log`.
    pub(crate) fn spawn(&self, log: &Path) -> anyhow::Result<OperatorProcess> {
        let mut command = Command::new(&self.program);
        command
            .args(&self.args)
            .env("KUBECONFIG", app_operator_e2e::cluster::kubeconfig_path())
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        let addr = |a: &str| {
            a.parse()
                .with_context(|| format!("{}: {a} is not an address", self.name))
        };
        OperatorProcess::spawn(
            command,
            addr(&self.probe_addr)?,
            addr(&self.metrics_addr)?,
            log.to_owned(),
        )
    }
}

//! `app-operator run`: loads the guest, serves metrics and probes, and runs the controller until
//! SIGTERM or Ctrl-C.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use kube::Client;
use tracing::{info, warn};

use super::Connection;
use crate::code_pages;
use crate::controller;
use crate::guest;
use crate::leader;
use crate::memory;
use crate::metrics::{self, Metrics};
use crate::operator::Operator;
use crate::reachability::{self, Reachability};
use crate::readiness::{Readiness, Verdict};
use crate::server;
use crate::swap;
use crate::swap::trust::TrustedKeys;
use crate::telemetry::{self, LogFormat};
use crate::{Error, Result};

/// Arguments of `app-operator run`. Every flag can also be set from the environment.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Which cluster to connect to.
    #[command(flatten)]
    pub connection: Connection,
    /// Watch only this namespace. Default: all namespaces.
    #[arg(long, short = 'n', env = "APP_OPERATOR_NAMESPACE")]
    pub namespace: Option<String>,
    /// Guest component (.wasm) to reconcile with. Default: the embedded default guest.
    #[arg(long, env = "APP_OPERATOR_GUEST")]
    pub guest: Option<PathBuf>,
    /// ConfigMap to read guests from (key `guest.wasm`, and `canary.wasm` for a canary); empty
    /// disables it. Without the ConfigMap, the base guest (`--guest`, or the embedded one) runs.
    #[arg(long, env = "APP_OPERATOR_GUEST_CONFIGMAP", default_value = crate::consts::GUEST_CONFIGMAP)]
    pub guest_configmap: String,
    /// Namespace of the guest ConfigMap. Default: the operator's own (in-cluster), else the
    /// kubeconfig context's.
    #[arg(long, env = "APP_OPERATOR_GUEST_CONFIGMAP_NAMESPACE")]
    pub guest_configmap_namespace: Option<String>,
    /// Ed25519 public key (PEM, as `openssl pkey -pubout` writes it), or a directory of such
    /// `*.pem` keys, that guests from the ConfigMap must be signed with; repeatable (the
    /// variable takes a comma-separated list). With any, an unsigned or wrongly signed guest is
    /// rejected. The base guest is not checked.
    #[arg(
        long = "guest-trusted-key",
        value_name = "PATH",
        env = "APP_OPERATOR_GUEST_TRUSTED_KEYS",
        value_delimiter = ','
    )]
    pub guest_trusted_keys: Vec<PathBuf>,
    /// The digest (`sha256:<hex>`) the stable guest from the ConfigMap must have. Set here, in
    /// the operator's Deployment, a pin is out of reach of whoever can write the ConfigMap.
    #[arg(long, value_name = "DIGEST", env = "APP_OPERATOR_GUEST_PIN")]
    pub guest_pin: Option<String>,
    /// The digest the canary guest from the ConfigMap must have.
    #[arg(long, value_name = "DIGEST", env = "APP_OPERATOR_CANARY_PIN")]
    pub canary_pin: Option<String>,
    /// Wall-clock budget of one guest call, in milliseconds.
    #[arg(long, env = "APP_OPERATOR_GUEST_DEADLINE_MS")]
    pub guest_deadline_ms: Option<u64>,
    /// Memory and fuel of the guest engine.
    #[command(flatten)]
    pub engine: super::EngineArgs,
    /// Memory the operator needs besides the guest instances, in MiB; start-up refuses a budget
    /// plus this reserve over the memory limit.
    #[arg(long, env = "APP_OPERATOR_MEMORY_RESERVE_MIB", default_value_t = crate::memory::DEFAULT_RESERVE_MIB)]
    pub memory_reserve_mib: usize,
    /// The memory the process may use, in MiB. Default: its cgroup's limit (a container's
    /// `resources.limits.memory`), if any.
    #[arg(long, env = "APP_OPERATOR_MEMORY_LIMIT_MIB")]
    pub memory_limit_mib: Option<u64>,
    /// Directory for precompiled guests, and (under `oci/`) for the components of guests pulled
    /// from a registry, by digest. Default: no disk cache.
    #[arg(long, env = "APP_OPERATOR_GUEST_CACHE_DIR")]
    pub guest_cache_dir: Option<PathBuf>,
    /// Read-only directory of guests precompiled by `app-operator guest precompile` with the
    /// same engine flags (the image ships the default guest's in /guests), loaded instead of
    /// compiled at start. **Loaded as native code**: it must be writable by no one but whoever
    /// builds the image. Default: none.
    #[arg(long, env = "APP_OPERATOR_GUEST_PRECOMPILED_DIR")]
    pub guest_precompiled_dir: Option<PathBuf>,
    /// Compile guests in this process instead of a child process running this binary
    /// (`guest compile`). The child keeps Cranelift and the compile's memory out of the
    /// operator, and is stopped if a compile runs away.
    #[arg(long, env = "APP_OPERATOR_GUEST_COMPILE_IN_PROCESS")]
    pub guest_compile_in_process: bool,
    /// Secret of type `kubernetes.io/dockerconfigjson`, in the guest ConfigMap's namespace,
    /// holding the credentials for pulling guests given by reference (`guest.ref`). Default:
    /// anonymous pulls.
    #[arg(long, env = "APP_OPERATOR_GUEST_REGISTRY_SECRET")]
    pub guest_registry_secret: Option<String>,
    /// CA bundle (PEM) to trust, besides the system's, for the registry guests are pulled from.
    #[arg(long, env = "APP_OPERATOR_GUEST_REGISTRY_CA")]
    pub guest_registry_ca: Option<PathBuf>,
    /// The largest guest pulled from a registry, in bytes; a larger one is cut off and rejected.
    #[arg(long, env = "APP_OPERATOR_GUEST_MAX_BYTES", default_value_t = crate::oci::DEFAULT_MAX_GUEST_BYTES)]
    pub guest_max_bytes: u64,
    /// What a guest's output may contain.
    #[command(flatten)]
    pub policy: super::PolicyArgs,
    /// Most reconciliations running at once.
    #[arg(long, env = "APP_OPERATOR_CONCURRENCY", default_value_t = 16)]
    pub concurrency: u16,
    /// Reconcile every AppService at least this often, in seconds.
    #[arg(long, env = "APP_OPERATOR_RESYNC_SECS", default_value_t = 600)]
    pub resync_secs: u64,
    /// Longest time, in milliseconds, the status of a rollout under way is held back waiting
    /// for readiness, so that both are one status write, counted from when the Deployment
    /// controller has seen the spec; never held more than five times this after the change
    /// (fifteen while the Deployment controller is seen far behind; 0: write every step).
    #[arg(long, env = "APP_OPERATOR_STATUS_SETTLE_MS", default_value_t = 2000)]
    pub status_settle_ms: u64,
    /// How long, in milliseconds, a reconcile request waits for more changes of the same
    /// AppService (its children's status updates come in bursts) before it runs (0: at once).
    #[arg(long, env = "APP_OPERATOR_RECONCILE_DEBOUNCE_MS", default_value_t = controller::DEFAULT_DEBOUNCE.as_millis() as u64)]
    pub reconcile_debounce_ms: u64,
    /// How long, in milliseconds, the operator's one thread waits when it has nothing left to
    /// run before it sleeps, so that the answers and watch events arriving meanwhile wake it
    /// once rather than once each (0: it sleeps at once). The price is up to this much latency
    /// for each; nothing runnable waits.
    #[arg(long, env = "APP_OPERATOR_WAKE_PAUSE_MS", default_value_t = crate::runtime::DEFAULT_WAKE_PAUSE.as_millis() as u64)]
    pub wake_pause_ms: u64,
    /// Longest time a request to the API server other than a watch may take, in seconds; one
    /// that takes longer fails and counts as the API server being unreachable.
    #[arg(long, env = "APP_OPERATOR_API_TIMEOUT_SECS", default_value_t = reachability::DEFAULT_REQUEST_TIMEOUT.as_secs())]
    pub api_timeout_secs: u64,
    /// Log format.
    #[arg(long, env = "APP_OPERATOR_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Address of the `/metrics` endpoint.
    #[arg(
        long,
        env = "APP_OPERATOR_METRICS_ADDR",
        default_value = "0.0.0.0:8080"
    )]
    pub metrics_addr: SocketAddr,
    /// Address of the `/healthz` and `/readyz` endpoints.
    #[arg(long, env = "APP_OPERATOR_PROBE_ADDR", default_value = "0.0.0.0:8081")]
    pub probe_addr: SocketAddr,
    /// Leader election: reconcile only while holding a Lease, so that replicas can stand by.
    #[command(flatten)]
    pub leader: LeaderArgs,
}

/// Leader-election flags of `app-operator run`. NB: the field names are the clap argument ids
/// and must not clash with those of [`Args`] (e.g. `namespace`). Off by default (one local process needs none);
/// `config/manager` turns it on.
#[derive(Debug, clap::Args)]
pub struct LeaderArgs {
    /// Reconcile only while holding the leader Lease.
    #[arg(long = "leader-elect", env = "APP_OPERATOR_LEADER_ELECT")]
    pub leader_elect: bool,
    /// Namespace of the Lease. Default: the client's namespace (in a Pod, its own).
    #[arg(
        long = "leader-elect-namespace",
        env = "APP_OPERATOR_LEADER_ELECT_NAMESPACE"
    )]
    pub leader_elect_namespace: Option<String>,
    /// This replica's identity. Default: $POD_NAME, else <hostname>-<pid>.
    #[arg(
        long = "leader-elect-identity",
        env = "APP_OPERATOR_LEADER_ELECT_IDENTITY"
    )]
    pub leader_elect_identity: Option<String>,
    /// Seconds the Lease stays valid after its last renewal (a standby takes over within this).
    #[arg(
        long = "leader-elect-lease-secs",
        env = "APP_OPERATOR_LEADER_ELECT_LEASE_SECS",
        default_value_t = 15,
        value_parser = clap::value_parser!(u64).range(2..)
    )]
    pub leader_elect_lease_secs: u64,
    /// Seconds before expiry at which the leader renews the Lease (less than the lease).
    #[arg(
        long = "leader-elect-renew-grace-secs",
        env = "APP_OPERATOR_LEADER_ELECT_RENEW_GRACE_SECS",
        default_value_t = 5,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub leader_elect_renew_grace_secs: u64,
    /// Seconds after its last confirmed renewal at which the leader stops writing and gives up
    /// the Lease (failed renewals are retried until then); at least 1 s less than the lease and
    /// more than lease minus grace. Default: the lease minus half the grace, at least 1 s (13).
    #[arg(
        long = "leader-elect-renew-deadline-secs",
        env = "APP_OPERATOR_LEADER_ELECT_RENEW_DEADLINE_SECS",
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub leader_elect_renew_deadline_secs: Option<u64>,
}

impl LeaderArgs {
    /// The leader-election settings, or `None` when it is off.
    pub fn config(&self, client: &Client) -> Option<leader::Config> {
        if !self.leader_elect {
            return None;
        }
        let namespace = self
            .leader_elect_namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_owned());
        let mut config = leader::Config::new(namespace);
        config.identity = self.identity();
        config.lease_duration = Duration::from_secs(self.leader_elect_lease_secs);
        config.renew_grace = Duration::from_secs(self.leader_elect_renew_grace_secs);
        config.renew_deadline = self.renew_deadline();
        Some(config)
    }

    /// This replica's identity: the flag, else [`leader::default_identity`].
    pub fn identity(&self) -> String {
        self.leader_elect_identity
            .clone()
            .unwrap_or_else(leader::default_identity)
    }

    /// The fence of the leader's client, or `None` when leader election is off.
    pub fn fence(&self) -> Option<leader::Fence> {
        self.leader_elect
            .then(|| leader::Fence::new(self.identity(), self.renew_deadline()))
    }

    fn renew_deadline(&self) -> Duration {
        match self.leader_elect_renew_deadline_secs {
            Some(secs) => Duration::from_secs(secs),
            None => leader::Config::default_renew_deadline(
                Duration::from_secs(self.leader_elect_lease_secs),
                Duration::from_secs(self.leader_elect_renew_grace_secs),
            ),
        }
    }
}

impl Args {
    /// The guest runtime settings: the runtime's defaults, overridden by the flags given.
    pub fn guest_config(&self) -> guest::Config {
        let mut config = guest::Config::default();
        if let Some(ms) = self.guest_deadline_ms {
            config.deadline = Duration::from_millis(ms);
        }
        self.engine.apply(&mut config);
        config.cache_dir = self.guest_cache_dir.clone().or(config.cache_dir);
        config.precompiled_dir = self
            .guest_precompiled_dir
            .clone()
            .or(config.precompiled_dir);
        if !self.guest_compile_in_process {
            // NB: without a path to this binary (rare), `guest::compiler` falls back to here.
            config.compiler = std::env::current_exe().ok();
        }
        config.output = self.policy.config();
        config
    }

    /// The fetcher of guests given by reference: the credentials of `--guest-registry-secret`
    /// (read from `namespace` at start-up, and again when the registry refuses a pull, so a
    /// rotated Secret is taken without a restart), `--guest-registry-ca`, `--guest-max-bytes`
    /// and the cache under `--guest-cache-dir`.
    pub async fn fetcher(
        &self,
        client: &kube::Client,
        namespace: &str,
    ) -> Result<crate::oci::Fetcher> {
        use crate::oci;
        let options = oci::client::Options {
            credentials: oci::Credentials::default(),
            ca_file: self.guest_registry_ca.clone(),
            limits: oci::Limits {
                max_guest_bytes: self.guest_max_bytes,
            },
        };
        let cache = self
            .guest_cache_dir
            .as_ref()
            .map(|dir| oci::cache::Cache::new(dir.join("oci")));
        Ok(match &self.guest_registry_secret {
            Some(name) => {
                oci::Fetcher::from_secret(client, namespace, name, options, cache).await?
            }
            None => oci::Fetcher::new(oci::Registry::new(options)?, cache),
        })
    }

    /// The process's memory limit: `--memory-limit-mib`, else its cgroup's, if any.
    pub fn memory_limit(&self) -> Option<memory::Limit> {
        match self.memory_limit_mib {
            Some(mib) => Some(memory::Limit {
                bytes: mib.saturating_mul(1 << 20),
                source: "--memory-limit-mib".into(),
            }),
            None => memory::cgroup_limit(),
        }
    }

    /// Checks that the guest memory budget plus the reserve fit under `limit`.
    pub fn check_memory(&self, limit: Option<&memory::Limit>) -> Result<()> {
        let config = self.guest_config();
        let reserve = self.memory_reserve_mib.saturating_mul(1 << 20);
        Ok(memory::check(config.memory_budget, reserve, limit)?)
    }

    /// The keys of `--guest-trusted-key`, or `None` when none is given.
    pub fn trusted_keys(&self) -> Result<Option<Arc<TrustedKeys>>> {
        if self.guest_trusted_keys.is_empty() {
            return Ok(None);
        }
        let keys = TrustedKeys::load(&self.guest_trusted_keys).map_err(Error::TrustedKeys)?;
        Ok(Some(Arc::new(keys)))
    }

    /// The guest ConfigMap source's settings, or `None` when `--guest-configmap` is empty (then
    /// the base guest renders every AppService and the trusted keys have no use).
    pub fn source_config(
        &self,
        client: &Client,
        trusted_keys: Option<Arc<TrustedKeys>>,
    ) -> Option<swap::source::Config> {
        if self.guest_configmap.is_empty() {
            if trusted_keys.is_some() {
                warn!("--guest-trusted-key has no effect without a guest ConfigMap");
            }
            return None;
        }
        let config = swap::source::Config {
            namespace: self
                .guest_configmap_namespace
                .clone()
                .unwrap_or_else(|| client.default_namespace().to_owned()),
            name: self.guest_configmap.clone(),
            apps_namespace: self.namespace.clone(),
            trusted_keys,
            pins: swap::pin::Pins {
                stable: self.guest_pin.as_deref().map(swap::pin::normalize),
                canary: self.canary_pin.as_deref().map(swap::pin::normalize),
            },
        };
        info!(namespace = %config.namespace, name = %config.name, "reading guests from a ConfigMap");
        match &config.trusted_keys {
            Some(keys) => {
                let keys: Vec<_> = keys.files().map(|f| f.display().to_string()).collect();
                info!(
                    ?keys,
                    "guests from the ConfigMap must be signed by a trusted key"
                );
            }
            None => info!("guest signatures are not required (no --guest-trusted-key)"),
        }
        Some(config)
    }

    /// The controller settings.
    pub fn controller_config(&self) -> controller::Config {
        controller::Config {
            namespace: self.namespace.clone(),
            concurrency: self.concurrency,
            resync: Duration::from_secs(self.resync_secs),
            status_settle: Duration::from_millis(self.status_settle_ms),
            debounce: Duration::from_millis(self.reconcile_debounce_ms),
            ..controller::Config::default()
        }
    }
}

/// Runs the operator until SIGTERM or Ctrl-C.
pub async fn exec(args: Args) -> Result<()> {
    telemetry::init(args.log_format);
    let memory_limit = args.memory_limit();
    args.check_memory(memory_limit.as_ref())?;
    let guest_config = args.guest_config();
    info!(
        instances = guest_config.instances(),
        instance_mib = args.engine.guest_memory_mib,
        budget_mib = args.engine.guest_memory_budget_mib,
        reserve_mib = args.memory_reserve_mib,
        limit_mib = memory_limit.as_ref().map(|l| l.bytes >> 20),
        limit_source = memory_limit.as_ref().map(|l| l.source.as_str()),
        "guest memory budget"
    );
    let trusted_keys = args.trusted_keys()?;
    let mut registry = metrics::registry();
    let metrics = Metrics::register(&mut registry);
    let fence = args.leader.fence();
    let api = Reachability::new(
        Duration::from_secs(args.api_timeout_secs),
        Some(metrics.clone()),
    );
    let client = args
        .connection
        .operator_client(Some(&metrics), Some(&api), fence.as_ref())
        .await?;

    let leader_gauge = leader::register(&mut registry);
    let readiness = Arc::new(Readiness::new(api));
    tokio::spawn(release_start_up_pages(readiness.clone()));
    let shutdown = shutdown_signal().boxed().shared();

    let (metrics_listener, metrics_addr) = server::bind(args.metrics_addr).await?;
    let (probe_listener, probe_addr) = server::bind(args.probe_addr).await?;
    let metrics_server = tokio::spawn(server::serve(
        metrics_listener,
        server::metrics_router(Arc::new(registry)),
        shutdown.clone(),
    ));
    let probe_server = tokio::spawn(server::serve(
        probe_listener,
        server::probes_router(readiness.clone()),
        shutdown.clone(),
    ));
    info!(%metrics_addr, %probe_addr, "serving metrics and probes");

    let runtime = guest::Runtime::new(guest_config)?;
    let mut builder = Operator::builder(client.clone(), runtime)
        .controller(args.controller_config())
        .metrics(metrics)
        .readiness(readiness.clone());
    if let Some(path) = &args.guest {
        let wasm = std::fs::read(path).map_err(|source| Error::Read {
            path: path.clone(),
            source,
        })?;
        builder = builder.base_guest(wasm);
    }
    if let Some(config) = args.source_config(&client, trusted_keys) {
        let fetcher = args.fetcher(&client, &config.namespace).await?;
        builder = builder.guest_source(config).fetcher(fetcher);
    }
    let operator = builder.build().await?;

    match (args.leader.config(&client), fence) {
        (Some(election), Some(fence)) => {
            leader::run(
                client.clone(),
                election,
                fence,
                readiness.clone(),
                leader_gauge,
                shutdown,
                // NB: the whole operator, the guest source included, runs only while leading:
                // a standby neither records Events nor annotates the ConfigMap, and takes the
                // ConfigMap's guests when it becomes the leader.
                |stop| operator.run(stop),
            )
            .await?;
        }
        _ => {
            leader_gauge.set(1);
            operator.run(shutdown).await?;
        }
    }
    for server in [metrics_server, probe_server] {
        // NB: a server task only ends with an error or after the shutdown signal.
        if let Ok(result) = server.await {
            result?;
        }
    }
    Ok(())
}

/// Unmaps the pages of the binary that start-up ran ([`code_pages`]) when this replica first
/// stands by for the Lease and when it is first ready, then ends; looks at `readiness` once a
/// second until then.
async fn release_start_up_pages(readiness: Arc<Readiness>) {
    let mut released = false;
    loop {
        let verdict = readiness.verdict();
        let ready = verdict == Verdict::Ready;
        if ready || (verdict == Verdict::Standby && !released) {
            released = true;
            match code_pages::release() {
                Ok(pages) => info!(
                    segments = pages.segments,
                    mib = pages.bytes >> 20,
                    resident_file_kib_before = pages.resident_file_kib_before,
                    resident_file_kib_after = pages.resident_file_kib_after,
                    state = if ready { "ready" } else { "standby" },
                    "unmapped the binary's start-up pages"
                ),
                Err(error) => warn!(%error, "could not unmap the binary's start-up pages"),
            }
            if ready {
                return;
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Completes on SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing a SIGTERM handler only fails outside a tokio runtime");
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    info!("shutdown signal received");
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use serde::Deserialize;

    use crate::cli::{Cli, Command};
    use crate::guest;

    #[test]
    fn leader_flags_parse_beside_the_others() {
        let cli = Cli::try_parse_from([
            "app-operator",
            "run",
            "--namespace",
            "apps",
            "--leader-elect",
            "--leader-elect-namespace",
            "ops",
            "--leader-elect-identity",
            "a",
            "--leader-elect-lease-secs",
            "6",
            "--leader-elect-renew-grace-secs",
            "2",
        ])
        .expect("the flags parse");
        let Command::Run(args) = cli.command else {
            panic!("not run");
        };
        assert_eq!(args.namespace.as_deref(), Some("apps"));
        assert!(args.leader.leader_elect);
        assert_eq!(args.leader.leader_elect_namespace.as_deref(), Some("ops"));
        assert_eq!(args.leader.leader_elect_identity.as_deref(), Some("a"));
        assert_eq!(
            (
                args.leader.leader_elect_lease_secs,
                args.leader.leader_elect_renew_grace_secs
            ),
            (6, 2)
        );
        assert!(
            Cli::try_parse_from(["app-operator", "run", "--leader-elect-lease-secs", "1"]).is_err()
        );
    }

    /// The memory limit of `config/manager`'s container, and its args.
    fn manager() -> (u64, Vec<String>) {
        let yaml = include_str!("../../../config/manager/manager.yaml");
        let deployment = serde_yaml_ng::Deserializer::from_str(yaml)
            .map(|doc| serde_yaml_ng::Value::deserialize(doc).expect("valid YAML"))
            .find(|doc| doc["kind"] == "Deployment")
            .expect("a Deployment");
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        let limit = container["resources"]["limits"]["memory"]
            .as_str()
            .expect("a memory limit");
        let mib: u64 = limit
            .strip_suffix("Mi")
            .and_then(|n| n.parse().ok())
            .expect("the limit is written in Mi");
        let args = container["args"]
            .as_sequence()
            .expect("args")
            .iter()
            .map(|a| a.as_str().expect("a string").to_owned())
            .collect();
        (mib << 20, args)
    }

    #[test]
    fn the_manager_limit_holds_its_guest_budget_and_reserve() {
        let (limit, args) = manager();
        let line = std::iter::once("app-operator".to_owned()).chain(args);
        let Command::Run(args) = Cli::try_parse_from(line).expect("parses").command else {
            panic!("not run");
        };
        let limit = crate::memory::Limit {
            bytes: limit,
            source: "config/manager".into(),
        };
        args.check_memory(Some(&limit))
            .expect("config/manager's limit holds the budget and the reserve");
        assert!(args.guest_config().instances() >= 1);
        // The same limit with a budget of 16 instances (the finding) is refused.
        let mut over = args;
        over.engine.guest_memory_budget_mib = 16 * over.engine.guest_memory_mib;
        assert!(over.check_memory(Some(&limit)).is_err());
    }

    #[test]
    fn the_default_budget_holds_four_default_instances() {
        let Command::Run(args) = Cli::try_parse_from(["app-operator", "run"])
            .expect("parses")
            .command
        else {
            panic!("not run");
        };
        let config = args.guest_config();
        assert_eq!(config.memory_limit, guest::DEFAULT_MEMORY_LIMIT);
        assert_eq!(config.instances(), 4);
    }

    #[test]
    fn engine_and_precompiled_flags_reach_the_guest_config() {
        let cli = Cli::try_parse_from([
            "app-operator",
            "run",
            "--guest-precompiled-dir",
            "/guests",
            "--guest-memory-mib",
            "32",
            "--guest-memory-budget-mib",
            "128",
            "--guest-fuel",
            "5",
        ])
        .expect("the flags parse");
        let Command::Run(args) = cli.command else {
            panic!("not run");
        };
        let config = args.guest_config();
        assert_eq!(
            config.precompiled_dir.as_deref(),
            Some(std::path::Path::new("/guests"))
        );
        assert_eq!(config.cache_dir, None);
        assert_eq!(
            (config.memory_limit, config.memory_budget, config.fuel),
            (32 << 20, 128 << 20, Some(5))
        );
    }

    #[test]
    fn trusted_keys_repeat_and_split_on_commas() {
        let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/keys");
        let (trusted, untrusted, p256) = (
            format!("{fixtures}/trusted.pub.pem"),
            format!("{fixtures}/untrusted.pub.pem"),
            format!("{fixtures}/p256.pub.pem"),
        );
        let args = |keys: &[&str]| {
            let mut line = vec!["app-operator", "run"];
            for key in keys {
                line.extend(["--guest-trusted-key", key]);
            }
            let Command::Run(args) = Cli::try_parse_from(line).expect("parses").command else {
                panic!("not run");
            };
            args
        };
        assert!(args(&[]).trusted_keys().expect("no keys").is_none());
        let both = format!("{trusted},{untrusted}");
        for line in [
            vec![trusted.as_str(), untrusted.as_str()],
            vec![both.as_str()],
        ] {
            let keys = args(&line).trusted_keys().expect("they load");
            assert_eq!(keys.map(|k| k.len()), Some(2));
        }
        let err = args(&[&trusted, &p256])
            .trusted_keys()
            .expect_err("not Ed25519");
        let text = crate::error_chain(&err);
        assert!(
            text.starts_with("failed to load the trusted guest keys: ")
                && text.contains("p256.pub.pem"),
            "{text}"
        );
    }
}

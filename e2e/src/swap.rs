//! The operator with its guest ConfigMap source, for the hot swap tests: the ConfigMap lives in
//! the test's namespace, and `guest push` is run in-process against it.

use std::borrow::Cow;
use std::sync::Arc;

use anyhow::Context;
use app_operator::cli::registry::RegistryArgs;
use app_operator::cli::{Connection, push};
use app_operator::consts::GUEST_CONFIGMAP;
use app_operator::crd::AppService;
use app_operator::metrics::Metrics;
use app_operator::operator::Operator;
use app_operator::readiness::Readiness;
use app_operator::swap::pin::Pins;
use app_operator::swap::trust::TrustedKeys;
use app_operator::swap::{Guests, source};
use app_operator::{controller, guest};
use k8s_openapi::api::apps::v1::Deployment;
use kube::{Api, Client};
use tokio::task::JoinHandle;
use wasm_encoder::{ComponentSection, CustomSection};

use crate::appservice::CONVERGE;
use crate::{cluster, operator, wait};

/// What the ConfigMap source of a [`SwapOperator`] checks besides the dry run.
#[derive(Default)]
pub struct Options {
    /// Guests from the ConfigMap must be signed by one of these keys (`--guest-trusted-key`).
    pub trusted_keys: Option<Arc<TrustedKeys>>,
    /// The digests the guests must have (`--guest-pin`, `--canary-pin`).
    pub pins: Pins,
    /// Fetches the guests given by reference (`--guest-registry-secret`, `--guest-registry-ca`,
    /// the cache of `--guest-cache-dir`); default: anonymous, uncached.
    pub fetcher: Option<app_operator::oci::Fetcher>,
    /// Directory for precompiled guests (`--guest-cache-dir`); default: none.
    pub guest_cache_dir: Option<std::path::PathBuf>,
}

/// The controller and the ConfigMap source, running on tasks of the test's runtime. Dropping it
/// aborts both.
pub struct SwapOperator {
    /// Its metrics, to read counters from.
    pub metrics: Metrics,
    /// The resident guests.
    pub guests: Guests,
    /// What `/readyz` would answer.
    pub readiness: Arc<Readiness>,
    tasks: Vec<JoinHandle<()>>,
}

impl SwapOperator {
    /// Installs the CRD and starts the controller for `namespace`, reading guests from
    /// ConfigMap `app-operator-guest` in the same namespace.
    pub async fn start(client: &Client, namespace: &str) -> anyhow::Result<Self> {
        Self::start_with(client, namespace, Options::default()).await
    }

    /// [`SwapOperator::start`] with the source's `options`; returns once the operator is
    /// ready.
    pub async fn start_with(
        client: &Client,
        namespace: &str,
        options: Options,
    ) -> anyhow::Result<Self> {
        let operator = Self::spawn(client, namespace, options).await?;
        operator.wait_ready().await?;
        Ok(operator)
    }

    /// Starts the operator as [`SwapOperator::start_with`] does without waiting: the source
    /// restores the guests in force (which may wait for a registry), then the controller runs,
    /// as `app-operator run` does.
    pub async fn spawn(client: &Client, namespace: &str, options: Options) -> anyhow::Result<Self> {
        let Options {
            trusted_keys,
            pins,
            fetcher,
            guest_cache_dir,
        } = options;
        app_operator::telemetry::init(app_operator::telemetry::LogFormat::Text);
        operator::install_crd(client).await?;
        let runtime = guest::Runtime::new(guest::Config {
            cache_dir: guest_cache_dir,
            ..guest::Config::default()
        })?;
        let config = source::Config {
            namespace: namespace.to_owned(),
            name: GUEST_CONFIGMAP.to_owned(),
            apps_namespace: Some(namespace.to_owned()),
            trusted_keys,
            pins,
        };
        let controller_config = controller::Config {
            namespace: Some(namespace.to_owned()),
            reporter: "app-operator-e2e".into(),
            ..controller::Config::default()
        };
        let mut builder = Operator::builder(client.clone(), runtime)
            .controller(controller_config)
            .guest_source(config);
        if let Some(fetcher) = fetcher {
            builder = builder.fetcher(fetcher);
        }
        let built = builder.build().await?;
        let (metrics, guests, readiness) = (
            built.metrics().clone(),
            built.guests().clone(),
            built.readiness().clone(),
        );
        // NB: aborting the task stops the controller and the source, as a killed process would.
        let task = tokio::spawn(async move {
            if let Err(err) = built.run(futures::future::pending()).await {
                eprintln!("operator failed: {}", app_operator::error_chain(&err));
            }
        });
        Ok(Self {
            metrics,
            guests,
            readiness,
            tasks: vec![task],
        })
    }

    /// Waits until the guests in force are restored and the controller's caches synced.
    pub async fn wait_ready(&self) -> anyhow::Result<()> {
        wait::until("the controller's caches to sync", CONVERGE, || {
            let ready = self.readiness.clone();
            async move { Ok(ready.is_ready().then_some(())) }
        })
        .await
    }
}

impl SwapOperator {
    /// Stops the controller and the source, and waits until both are gone, as a terminated
    /// process would be: [`SwapOperator::start`] again on the same namespace restarts the
    /// operator on the same ConfigMap.
    pub async fn stop(mut self) {
        for task in std::mem::take(&mut self.tasks) {
            task.abort();
            // NB: an aborted task ends with a cancellation error; that is the point.
            let _ = task.await;
        }
    }
}

impl Drop for SwapOperator {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Runs `app-operator guest push <wasm> [--canary selector]` against the test namespace and
/// waits up to 60 s for the operator's verdict.
pub async fn push(namespace: &str, wasm: &[u8], canary: Option<&str>) -> anyhow::Result<()> {
    push_with(push_args(namespace, wasm, canary)?).await
}

/// The arguments of `app-operator guest push <wasm> [--canary selector]` against the test
/// namespace, waiting up to 60 s, with `wasm` written to a file; for tests that add flags.
pub fn push_args(namespace: &str, wasm: &[u8], canary: Option<&str>) -> anyhow::Result<push::Args> {
    let dir = std::env::temp_dir().join(format!("app-operator-push-{namespace}"));
    std::fs::create_dir_all(&dir)?;
    let file = dir.join("guest.wasm");
    std::fs::write(&file, wasm)?;
    Ok(push::Args {
        file,
        canary: canary.map(str::to_owned),
        pin: false,
        sign_key: None,
        signature: None,
        configmap: GUEST_CONFIGMAP.to_owned(),
        namespace: Some(namespace.to_owned()),
        wait: 60,
        to: None,
        registry: RegistryArgs::default(),
        connection: Connection {
            kubeconfig: Some(cluster::kubeconfig_path()),
            ..Connection::default()
        },
    })
}

/// Runs `app-operator guest push` in-process with `args`.
pub async fn push_with(args: push::Args) -> anyhow::Result<()> {
    push::exec(args)
        .await
        .map_err(|e| anyhow::anyhow!(app_operator::error_chain(&e)))
}

/// Waits until AppService `name` was reconciled, at its latest generation, by guest `digest`
/// (its `status.guestDigest`), and its Deployment exists. Returns the Deployment, whose digest
/// annotation names the guest that last *changed* it: a guest that renders the same objects as
/// the one before it rewrites no child.
pub async fn wait_digest(
    client: &Client,
    ns: &str,
    name: &str,
    digest: &str,
) -> anyhow::Result<Deployment> {
    let apps: Api<AppService> = Api::namespaced(client.clone(), ns);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let what = format!("AppService {name} to be rendered by {digest}");
    wait::until(&what, CONVERGE, || async {
        let app = apps.get(name).await?;
        let status = app.status.clone().unwrap_or_default();
        let app_ok = status.guest_digest.as_deref() == Some(digest)
            && status.observed_generation == app.metadata.generation;
        if !app_ok {
            return Ok(None);
        }
        Ok(deployments.get_opt(name).await?)
    })
    .await
    .context("the swap did not reach the AppService")
}

/// `wasm` with an empty custom section named `name` appended: a component that behaves the same
/// under another digest.
pub fn with_custom_section(wasm: &[u8], name: &str) -> Vec<u8> {
    let mut out = wasm.to_vec();
    CustomSection {
        name: name.into(),
        data: Cow::Borrowed(&[]),
    }
    .append_to_component(&mut out);
    out
}

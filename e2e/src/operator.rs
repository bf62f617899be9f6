//! The operator under test: the CRD installed, and the controller running in-process, watching
//! one test namespace.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use app_operator::cli::Connection;
use app_operator::controller;
use app_operator::crd::AppService;
use app_operator::guest;
use app_operator::metrics::Metrics;
use app_operator::operator;
use app_operator::readiness::Readiness;
use futures::FutureExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, CustomResourceExt, ResourceExt};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::{cluster, wait};

/// Field manager of the writes the tests make as "a user".
pub const TEST_MANAGER: &str = "app-operator-e2e";

/// Installs (server-side applies) the AppService CRD and waits until it is established.
pub async fn install_crd(client: &Client) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = AppService::crd();
    let name = crd.name_any();
    crds.patch(
        &name,
        &PatchParams::apply(TEST_MANAGER).force(),
        &Patch::Apply(&crd),
    )
    .await
    .with_context(|| format!("failed to install CRD {name}"))?;
    wait::until(
        &format!("CRD {name} established"),
        Duration::from_secs(30),
        || async {
            let crd = crds.get(&name).await?;
            let established = crd
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            Ok(established.then_some(()))
        },
    )
    .await
}

/// The controller running on a task of the test's runtime, watching one namespace.
///
/// Dropping it aborts the task; [`Operator::stop`] shuts it down gracefully.
pub struct Operator {
    /// The controller's metrics; its API requests are counted in `kube_requests`.
    pub metrics: Metrics,
    digest: String,
    readiness: Arc<Readiness>,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<app_operator::Result<()>>>,
}

impl Operator {
    /// Installs the CRD and starts the controller for `namespace` with the default guest.
    pub async fn start(client: &Client, namespace: &str) -> anyhow::Result<Self> {
        Self::start_with(client, namespace, guest::default_guest()).await
    }

    /// Installs the CRD and starts the controller for `namespace` with the guest `wasm`,
    /// through the production guest runtime. Logs go to stderr when `RUST_LOG` is set.
    pub async fn start_with(client: &Client, namespace: &str, wasm: &[u8]) -> anyhow::Result<Self> {
        let config = controller::Config {
            namespace: Some(namespace.to_owned()),
            ..controller::Config::default()
        };
        Self::start_configured(client, wasm, config).await
    }

    /// [`Operator::start_with`] with the controller's `config` (whose namespace it watches). Its
    /// client is its own, built like the binary's, counting requests in [`Operator::metrics`].
    pub async fn start_configured(
        client: &Client,
        wasm: &[u8],
        config: controller::Config,
    ) -> anyhow::Result<Self> {
        if std::env::var_os("RUST_LOG").is_some() {
            app_operator::telemetry::init(app_operator::telemetry::LogFormat::Text);
        }
        install_crd(client).await?;
        let metrics = Metrics::default();
        let connection = Connection {
            kubeconfig: Some(cluster::kubeconfig_path()),
            ..Connection::default()
        };
        let counting = connection
            .client(Some(&metrics))
            .await
            .map_err(|e| anyhow::anyhow!(app_operator::error_chain(&e)))?;
        let runtime = guest::Runtime::new(guest::Config::default())?;
        let built = operator::Operator::builder(counting, runtime)
            .base_guest(wasm)
            .controller(config)
            .metrics(metrics.clone())
            .build()
            .await?;
        let digest = built.guests().current().stable.digest().to_owned();
        let readiness = built.readiness().clone();
        let (tx, rx) = oneshot::channel::<()>();
        let shutdown = async move {
            let _ = rx.await;
        };
        let task = tokio::spawn(built.run(shutdown.boxed().shared()));
        let operator = Self {
            metrics,
            digest,
            readiness,
            shutdown: Some(tx),
            task: Some(task),
        };
        let ready = operator.readiness.clone();
        wait::until(
            "the controller's caches to sync",
            Duration::from_secs(30),
            || {
                let ready = ready.clone();
                async move { Ok(ready.is_ready().then_some(())) }
            },
        )
        .await?;
        Ok(operator)
    }

    /// Digest of the guest the controller runs.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// Signals shutdown and waits for the reconciliations in flight to finish.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(30), task)
                .await
                .context("the controller did not stop within 30 s")???;
        }
        Ok(())
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

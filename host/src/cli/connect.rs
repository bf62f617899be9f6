//! Connecting to a cluster: the kubeconfig flags every cluster-facing subcommand shares.

use std::path::PathBuf;

use kube::Client;
use kube::client::ClientBuilder;
use kube::config::{KubeConfigOptions, Kubeconfig};
use tower::util::MapRequestLayer;

use super::http2;
use crate::leader::Fence;
use crate::metrics::Metrics;
use crate::reachability::Reachability;
use crate::{Error, Result};

/// Which cluster to talk to, and as whom.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct Connection {
    /// Kubeconfig file. Default: $KUBECONFIG, then ~/.kube/config, then the in-cluster config.
    #[arg(long, env = "APP_OPERATOR_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context. Default: the current context.
    #[arg(long, env = "APP_OPERATOR_CONTEXT")]
    pub context: Option<String>,
    /// Speak HTTP/1.1 to the API server, one connection per request in flight, as kube does
    /// by default. Without it, HTTP/2 is offered (one connection for everything) and HTTP/1.1
    /// spoken only to a server that does not take it, or through a proxy.
    #[arg(long, env = "APP_OPERATOR_API_HTTP1_ONLY")]
    pub api_http1_only: bool,
}

impl Connection {
    /// A client from `kubeconfig` (and `context`), or from the environment's usual sources, that
    /// counts its requests in `metrics` when given.
    pub async fn client(&self, metrics: Option<&Metrics>) -> Result<Client> {
        self.operator_client(metrics, None, None).await
    }

    /// [`Connection::client`] that reports each request's outcome to `api` (which also times
    /// out requests other than watches), and whose writes pass only while `fence`, when given,
    /// is open; refused writes are neither counted in `metrics` nor reported to `api`.
    pub async fn operator_client(
        &self,
        metrics: Option<&Metrics>,
        api: Option<&Reachability>,
        fence: Option<&Fence>,
    ) -> Result<Client> {
        let (kubeconfig, context) = (self.kubeconfig.as_ref(), self.context.as_deref());
        let options = KubeConfigOptions {
            context: context.map(str::to_owned),
            ..KubeConfigOptions::default()
        };
        let config = match kubeconfig {
            Some(path) => {
                let file =
                    Kubeconfig::read_from(path).map_err(|e| Error::KubeConfig(Box::new(e)))?;
                kube::Config::from_custom_kubeconfig(file, &options)
                    .await
                    .map_err(|e| Error::KubeConfig(Box::new(e)))?
            }
            None if context.is_some() => kube::Config::from_kubeconfig(&options)
                .await
                .map_err(|e| Error::KubeConfig(Box::new(e)))?,
            None => kube::Config::infer()
                .await
                .map_err(|e| Error::KubeConfig(Box::new(e)))?,
        };
        let metrics = metrics.cloned();
        let count = MapRequestLayer::new(move |request: http::Request<kube::client::Body>| {
            if let Some(metrics) = &metrics {
                metrics.kube_request(request.method(), request.uri().path());
            }
            request
        });
        let http2 = if self.api_http1_only {
            None
        } else {
            http2::builder(&config)?
        };
        let builder = match http2 {
            Some(builder) => builder,
            None => ClientBuilder::try_from(config).map_err(Error::Client)?,
        };
        let builder = builder
            .with_layer(&count)
            // NB: without `api`, the layer still bounds how long a request may hang.
            .with_layer(&api.cloned().unwrap_or_default().layer());
        Ok(match fence {
            Some(fence) => builder.with_layer(&fence.layer()).build(),
            None => builder.build(),
        })
    }
}

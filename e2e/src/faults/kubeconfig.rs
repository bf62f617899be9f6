//! Kubeconfigs and clients that reach the tests' API server through a [`Proxy`].

use std::path::{Path, PathBuf};

use anyhow::Context;
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

use super::Proxy;
use crate::cluster::kubeconfig_path;

/// The API server's `host:port`, from the tests' kubeconfig (its current context).
pub async fn api_server_addr() -> anyhow::Result<String> {
    let config = cluster_config().await?;
    let authority = config
        .cluster_url
        .authority()
        .context("the kubeconfig's server URL has no host")?;
    let port = authority.port_u16().unwrap_or(443);
    Ok(format!("{}:{port}", authority.host()))
}

async fn cluster_config() -> anyhow::Result<kube::Config> {
    let path = kubeconfig_path();
    let kubeconfig = Kubeconfig::read_from(&path)
        .with_context(|| format!("failed to read kubeconfig {}", path.display()))?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .with_context(|| format!("failed to load kubeconfig {}", path.display()))
}

/// The tests' kubeconfig with every cluster's server moved to `https://127.0.0.1:<port of
/// proxy>`, so that a client of it goes through the proxy.
///
/// The API server's certificate must cover the original host: when that is not 127.0.0.1, it is
/// set as `tls-server-name` (unless the kubeconfig sets one).
pub fn kubeconfig_via(proxy: &Proxy) -> anyhow::Result<Kubeconfig> {
    let path = kubeconfig_path();
    let mut kubeconfig = Kubeconfig::read_from(&path)
        .with_context(|| format!("failed to read kubeconfig {}", path.display()))?;
    let through = format!("https://{}", proxy.listen());
    for named in &mut kubeconfig.clusters {
        let Some(cluster) = named.cluster.as_mut() else {
            continue;
        };
        let original: Option<http::Uri> = cluster.server.as_deref().and_then(|s| s.parse().ok());
        let host = original.as_ref().and_then(|u| u.host()).unwrap_or_default();
        if host != "127.0.0.1" && cluster.tls_server_name.is_none() {
            cluster.tls_server_name = Some(host.trim_matches(['[', ']']).to_owned());
        }
        cluster.server = Some(through.clone());
    }
    Ok(kubeconfig)
}

/// Writes [`kubeconfig_via`] `proxy` to `<dir>/kubeconfig-<proxy name>` and returns its path.
pub fn kubeconfig_through(proxy: &Proxy, dir: &Path) -> anyhow::Result<PathBuf> {
    let kubeconfig = kubeconfig_via(proxy)?;
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!("kubeconfig-{}", proxy.name));
    let yaml = serde_yaml_ng::to_string(&kubeconfig).context("failed to encode the kubeconfig")?;
    std::fs::write(&path, yaml).with_context(|| format!("failed to write {}", path.display()))?;
    Ok(path)
}

/// A client of the tests' cluster that goes through `proxy` (not checked to answer: the proxy
/// may be cut).
pub async fn client_through(proxy: &Proxy) -> anyhow::Result<Client> {
    let config =
        kube::Config::from_custom_kubeconfig(kubeconfig_via(proxy)?, &KubeConfigOptions::default())
            .await
            .context("failed to load the proxied kubeconfig")?;
    Client::try_from(config).context("failed to build a Kubernetes client")
}

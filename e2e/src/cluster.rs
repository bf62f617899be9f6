//! Connecting to the local control plane that `hack/controlplane/up.sh` starts.

use std::path::PathBuf;

use anyhow::{Context, bail};
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// The hint every "no control plane" failure carries.
const START_HINT: &str =
    "start the local control plane with `make cluster-up` (or run `make test`)";

/// The kubeconfig the tests use: `$KUBECONFIG` when set, else the admin kubeconfig that
/// `hack/controlplane/up.sh` writes to `$APP_OPERATOR_CLUSTER_DIR/kubeconfig` (by default
/// `~/.cache/app-operator/cluster/kubeconfig`).
pub fn kubeconfig_path() -> PathBuf {
    if let Some(path) = std::env::var_os("KUBECONFIG").filter(|p| !p.is_empty()) {
        // NB: of a `KUBECONFIG` list, the first file names the cluster the tests use.
        if let Some(first) = std::env::split_paths(&path).next() {
            return first;
        }
    }
    cluster_dir().join("kubeconfig")
}

/// Where `hack/controlplane/up.sh` keeps the cluster: `$APP_OPERATOR_CLUSTER_DIR`, by default
/// `~/.cache/app-operator/cluster`.
fn cluster_dir() -> PathBuf {
    std::env::var_os("APP_OPERATOR_CLUSTER_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").unwrap_or_default();
            PathBuf::from(home).join(".cache/app-operator/cluster")
        })
}

/// The control plane's processes as `hack/controlplane/up.sh` recorded them (`pids/<name>.pid`):
/// each component's name and pid, sorted by name. A component whose pid file is missing or
/// unreadable is left out; the caller reads the process through `/proc` and fails there if it
/// is gone.
pub fn component_pids() -> anyhow::Result<Vec<(String, u32)>> {
    let dir = cluster_dir().join("pids");
    let mut pids = Vec::new();
    for entry in std::fs::read_dir(&dir).with_context(|| {
        format!(
            "no recorded control plane in {}; {START_HINT}",
            dir.display()
        )
    })? {
        let path = entry?.path();
        let Some(name) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".pid"))
        else {
            continue;
        };
        let Some(pid) = std::fs::read_to_string(&path)
            .ok()
            .and_then(|text| text.trim().parse().ok())
        else {
            continue;
        };
        pids.push((name.to_owned(), pid));
    }
    pids.sort();
    Ok(pids)
}

/// A client for the local control plane, checked to answer.
///
/// Fails, saying how to start the control plane, when the kubeconfig is missing or the API
/// server does not answer. Make one per test: a client belongs to the runtime that made it.
pub async fn client() -> anyhow::Result<Client> {
    let path = kubeconfig_path();
    if !path.exists() {
        bail!(
            "no local control plane: kubeconfig {} not found; {START_HINT}",
            path.display()
        );
    }
    let kubeconfig = Kubeconfig::read_from(&path)
        .with_context(|| format!("failed to read kubeconfig {}", path.display()))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .with_context(|| format!("failed to load kubeconfig {}", path.display()))?;
    let url = config.cluster_url.clone();
    let client = Client::try_from(config).context("failed to build a Kubernetes client")?;
    client
        .apiserver_version()
        .await
        .with_context(|| format!("the API server at {url} does not answer; {START_HINT}"))?;
    Ok(client)
}

//! The operator's connections to the API server: HTTP/2 by default, every request and watch
//! on one TLS connection; `--api-http1-only` goes back to kube's HTTP/1.1, one connection per
//! request in flight. Both converge the same AppServices.

use std::time::{Duration, Instant};

use anyhow::Context;

use app_operator_e2e::TestNamespace;
use app_operator_e2e::cluster::{client, kubeconfig_path};
use app_operator_e2e::faults::api_server_addr;
use app_operator_e2e::fleet::{create_all, samples, wait_converged};
use app_operator_e2e::operator::install_crd;
use app_operator_e2e::process::{OperatorProcess, connections_to};

/// AppServices created at once, so that reconciles overlap.
const COUNT: usize = 24;

#[tokio::test]
async fn one_http2_connection_carries_everything_and_http1_takes_several() -> anyhow::Result<()> {
    let client = client().await?;
    install_crd(&client).await?;
    let port = api_server_port().await?;
    let mut counts = Vec::new();
    for (label, extra) in [("http2", None), ("http1", Some("--api-http1-only"))] {
        let ns = TestNamespace::create(&client, &format!("transport-{label}")).await?;
        let work = std::env::temp_dir().join(format!("app-operator-{}", ns.name()));
        let mut args = vec!["--namespace", ns.name(), "--guest-configmap", ""];
        args.extend(extra);
        let mut operator = OperatorProcess::start(label, &kubeconfig_path(), &args, &work)?;
        operator.wait_readyz("ready").await?;
        let since = Instant::now();
        create_all(&client, ns.name(), samples(label, 0..COUNT)).await?;
        wait_converged(&client, ns.name(), COUNT, since, Duration::from_secs(120)).await?;
        let connections = connections_to(operator.pid(), port)?;
        println!(
            "{label}: {connections} connection(s) to the API server after {COUNT} AppServices"
        );
        counts.push(connections);
        operator.terminate().await?;
    }
    anyhow::ensure!(
        counts[0] == 1,
        "HTTP/2: {} connections to the API server, not 1",
        counts[0]
    );
    // NB: kube's HTTP/1.1 holds one connection per watch at least (AppServices, Deployments,
    // Services), so the count above tells the two apart.
    anyhow::ensure!(
        counts[1] >= 3,
        "--api-http1-only: {} connections to the API server",
        counts[1]
    );
    Ok(())
}

/// The port of the API server the kubeconfig names ([`api_server_addr`]: `<host>:<port>`).
async fn api_server_port() -> anyhow::Result<u16> {
    let addr = api_server_addr().await?;
    let (_, port) = addr
        .rsplit_once(':')
        .with_context(|| format!("no port in {addr}"))?;
    Ok(port.parse()?)
}

//! High availability, proved: two operator processes with leader election against the local
//! control plane; only the Lease holder reconciles, and when it is killed the standby takes over
//! and converges the changes made meanwhile; a leader paused past its Lease sends no write once
//! resumed and exits.

use std::time::{Duration, Instant};

use anyhow::Context;
use app_operator::consts::LEADER_LEASE;
use app_operator::crd::AppService;
use app_operator_e2e::appservice::{create, images, sample_named, wait_deployment, wait_ready};
use app_operator_e2e::cluster::kubeconfig_path;
use app_operator_e2e::operator::install_crd;
use app_operator_e2e::process::{OperatorProcess, replica_args};
use app_operator_e2e::{TestNamespace, client, wait};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

/// Lease duration the two replicas use: short, so the test is quick.
const LEASE_SECS: u64 = 6;

async fn holder(leases: &Api<Lease>) -> anyhow::Result<Option<String>> {
    Ok(leases
        .get_opt(LEADER_LEASE)
        .await?
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity))
}

#[tokio::test]
async fn standby_takes_over_when_the_leader_dies() -> anyhow::Result<()> {
    let client = client().await?;
    install_crd(&client).await?;
    let ops = TestNamespace::create(&client, "ha-op").await?;
    let apps_ns = TestNamespace::create(&client, "ha-apps").await?;
    let work = std::env::temp_dir().join(format!("app-operator-ha-{}", ops.name()));
    let start = |identity: &'static str| {
        let args = replica_args(apps_ns.name(), ops.name(), identity, LEASE_SECS);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        OperatorProcess::start(identity, &kubeconfig_path(), &args, &work)
    };

    let mut first = start("ha-a")?;
    first.wait_readyz("ready").await?;
    let mut second = start("ha-b")?;
    second.wait_readyz("standby").await?;
    let leases: Api<Lease> = Api::namespaced(client.clone(), ops.name());
    assert_eq!(holder(&leases).await?.as_deref(), Some("ha-a"));

    let apps: Api<AppService> = Api::namespaced(client.clone(), apps_ns.name());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), apps_ns.name());
    create(&client, apps_ns.name(), &sample_named("web")).await?;
    wait_ready(&apps, "web", "3/3").await?;

    // Only the leader reconciled.
    let reconciles = "app_operator_reconciles_total";
    assert!(
        first.metric(reconciles).unwrap_or(0.0) > 0.0,
        "the leader did not reconcile"
    );
    assert_eq!(
        second.metric(reconciles),
        Some(0.0),
        "the standby reconciled"
    );
    assert_eq!(first.metric("app_operator_leader"), Some(1.0));
    assert_eq!(second.metric("app_operator_leader"), Some(0.0));

    // Kill the leader as a crash would (no release), and change the spec at once.
    first.kill()?;
    let killed = Instant::now();
    let change = json!({"spec": {"image": "nginx:1.27", "replicas": 2}});
    apps.patch("web", &PatchParams::default(), &Patch::Merge(&change))
        .await?;

    wait::until(
        "the standby to take the Lease",
        Duration::from_secs(LEASE_SECS * 5),
        || async { Ok((holder(&leases).await?.as_deref() == Some("ha-b")).then_some(())) },
    )
    .await
    .with_context(|| format!("standby log tail:\n{}", second.log_tail(20)))?;
    let takeover = killed.elapsed();
    second.wait_readyz("ready").await?;
    wait_deployment(&deployments, "web", 2, "nginx:1.27").await?;
    wait_ready(&apps, "web", "2/2").await?;
    let converged = killed.elapsed();
    println!(
        "lease {LEASE_SECS} s: takeover {:.1} s after the kill, change converged after {:.1} s",
        takeover.as_secs_f64(),
        converged.as_secs_f64()
    );
    // NB: the standby may take the Lease only after it expires, at most LEASE_SECS after the
    // leader's last renewal; up to 1 s of the crate's random back-off, its API calls and the test's polling get 4 s.
    assert!(
        takeover <= Duration::from_secs(LEASE_SECS + 4),
        "takeover took {takeover:?}, more than the {LEASE_SECS} s lease"
    );
    assert!(second.metric(reconciles).unwrap_or(0.0) > 0.0);
    assert_eq!(second.metric("app_operator_leader"), Some(1.0));
    assert!(
        second.terminate().await?,
        "the new leader did not exit cleanly"
    );
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}

/// What the fence logs (at debug) for every write it lets through, and for each it refuses.
const SENT: &str = "write sent under the leader Lease";
const REFUSED: &str = "write refused: the leader Lease is not surely held";

#[tokio::test]
async fn a_paused_leader_sends_no_write_after_losing_the_lease() -> anyhow::Result<()> {
    let client = client().await?;
    install_crd(&client).await?;
    let ops = TestNamespace::create(&client, "fence-op").await?;
    let apps_ns = TestNamespace::create(&client, "fence-apps").await?;
    let work = std::env::temp_dir().join(format!("app-operator-fence-{}", ops.name()));
    let start = |identity: &'static str| {
        let mut args = replica_args(apps_ns.name(), ops.name(), identity, LEASE_SECS);
        args.extend([
            "--leader-elect-renew-deadline-secs".to_owned(),
            "5".to_owned(),
        ]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let env = [("RUST_LOG", "info,app_operator::leader::fence=debug")];
        OperatorProcess::start_with_env(identity, &kubeconfig_path(), &args, &work, &env)
    };
    let mut first = start("fence-a")?;
    first.wait_readyz("ready").await?;
    let mut second = start("fence-b")?;
    second.wait_readyz("standby").await?;

    let apps: Api<AppService> = Api::namespaced(client.clone(), apps_ns.name());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), apps_ns.name());
    create(&client, apps_ns.name(), &sample_named("web")).await?;
    wait_ready(&apps, "web", "3/3").await?;

    // Pause the leader past its Lease (a partition, a stalled node), and change the spec.
    first.signal("STOP")?;
    let sent = first.log_count(SENT);
    assert!(sent > 0, "the leader's writes do not go through the fence");
    let change = json!({"spec": {"image": "nginx:1.27", "replicas": 2}});
    apps.patch("web", &PatchParams::default(), &Patch::Merge(&change))
        .await?;
    let leases: Api<Lease> = Api::namespaced(client.clone(), ops.name());
    wait::until(
        "the standby to take the Lease",
        Duration::from_secs(LEASE_SECS * 5),
        || async { Ok((holder(&leases).await?.as_deref() == Some("fence-b")).then_some(())) },
    )
    .await
    .with_context(|| format!("standby log tail:\n{}", second.log_tail(20)))?;
    wait_deployment(&deployments, "web", 2, "nginx:1.27").await?;

    // Resumed, the old leader has the watch events of the change (and of the new leader's
    // writes) to act on, but its renew deadline has passed: it must send nothing, and exit.
    first.signal("CONT")?;
    let status = first.wait_exit(Duration::from_secs(LEASE_SECS * 3)).await?;
    assert!(
        !status.success(),
        "the old leader exited cleanly without the Lease"
    );
    assert!(
        first.log_count("lost leadership of Lease") == 1,
        "log tail:\n{}",
        first.log_tail(20)
    );
    let refused = first.log_count(REFUSED);
    println!(
        "paused leader: {sent} writes sent while leading, {} after resuming, {refused} refused",
        first.log_count(SENT) - sent
    );
    assert_eq!(
        first.log_count(SENT),
        sent,
        "the old leader wrote after losing the Lease; log tail:\n{}",
        first.log_tail(30)
    );
    // What the new leader applied stands.
    let web = deployments.get("web").await?;
    assert_eq!(images(&web), ["nginx:1.27"]);
    assert_eq!(web.spec.replicas, Some(2));
    assert!(
        second.terminate().await?,
        "the new leader did not exit cleanly"
    );
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}

//! A swap survives a leader failover, proved with two operator processes against the local
//! control plane: the new leader restores the guests in force from their record, and does not
//! re-render the fleet with the base guest, although the guest ConfigMap holds a candidate that
//! was rejected and the guest in force refuses one AppService on purpose.

use std::time::Duration;

use anyhow::Context;
use app_operator::consts::LEADER_LEASE;
use app_operator::crd::AppService;
use app_operator::guest;
use app_operator::testing::hostile_guest;
use app_operator_e2e::appservice::{
    CONVERGE, assert_not_rerendered, condition, create, fingerprint, sample_named,
};
use app_operator_e2e::cluster::kubeconfig_path;
use app_operator_e2e::operator::install_crd;
use app_operator_e2e::process::{OperatorProcess, replica_args};
use app_operator_e2e::swap::{push, wait_digest};
use app_operator_e2e::{TestNamespace, client, wait};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;

/// Lease duration the two replicas use: short, so the test is quick.
const LEASE_SECS: u64 = 6;

#[tokio::test]
async fn a_new_leader_keeps_the_guest_in_force() -> anyhow::Result<()> {
    let client = client().await?;
    install_crd(&client).await?;
    let ops = TestNamespace::create(&client, "failover-op").await?;
    let apps_ns = TestNamespace::create(&client, "failover-apps").await?;
    let work = std::env::temp_dir().join(format!("app-operator-failover-{}", ops.name()));
    let start = |identity: &'static str| {
        let mut args = replica_args(apps_ns.name(), ops.name(), identity, LEASE_SECS);
        args.extend([
            "--guest-configmap-namespace".to_owned(),
            ops.name().to_owned(),
        ]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        OperatorProcess::start(identity, &kubeconfig_path(), &args, &work)
    };
    let mut first = start("failover-a")?;
    first.wait_readyz("ready").await?;
    let mut second = start("failover-b")?;
    second.wait_readyz("standby").await?;

    for name in ["web", "api"] {
        create(&client, apps_ns.name(), &sample_named(name)).await?;
    }
    push(ops.name(), hostile_guest(), None).await?;
    let hostile = guest::digest(hostile_guest());
    for name in ["web", "api"] {
        wait_digest(&client, apps_ns.name(), name, &hostile).await?;
    }
    // The guest in force refuses this one on purpose; the base guest would render it.
    create(&client, apps_ns.name(), &sample_named("policy-error")).await?;
    let apps: Api<AppService> = Api::namespaced(client.clone(), apps_ns.name());
    wait::until("policy-error to be refused", CONVERGE, || async {
        let app = apps.get("policy-error").await?;
        let refused = condition(&app, "GuestError").is_some_and(|c| c.status == "True");
        Ok(refused.then_some(()))
    })
    .await?;
    // A candidate pushed afterwards and rejected: the ConfigMap no longer holds the guest in
    // force.
    let err = push(ops.name(), b"not a component", None)
        .await
        .expect_err("garbage is rejected");
    assert!(format!("{err:#}").contains("failed to load"), "{err:#}");
    // NB: let the rollout settle so that only the operator's writes could move the spec.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), apps_ns.name());
    let mut before = Vec::new();
    for name in ["web", "api"] {
        before.push(fingerprint(&deployments.get(name).await?));
    }

    // The leader dies as a crash would; the standby takes over.
    first.kill()?;
    let leases: Api<Lease> = Api::namespaced(client.clone(), ops.name());
    wait::until(
        "the standby to take the Lease",
        Duration::from_secs(LEASE_SECS * 5),
        || async {
            let holder = leases
                .get_opt(LEADER_LEASE)
                .await?
                .and_then(|l| l.spec)
                .and_then(|s| s.holder_identity);
            Ok((holder.as_deref() == Some("failover-b")).then_some(()))
        },
    )
    .await
    .with_context(|| format!("standby log tail:\n{}", second.log_tail(20)))?;
    second.wait_readyz("ready").await?;
    let stable = format!("app_operator_guest_info{{digest=\"{hostile}\",role=\"stable\"}}");
    assert_eq!(
        second.metric(&stable),
        Some(1.0),
        "the new leader does not run the guest in force:\n{}",
        second.log_tail(20)
    );
    let readyz = second.probe("/readyz").map(|(_, body)| body);
    assert!(
        readyz
            .as_deref()
            .is_some_and(|b| b.lines().any(|l| l == format!("guests: {hostile}"))),
        "/readyz does not name the guest in force: {readyz:?}"
    );
    // The new leader reconciles every AppService; give it the time a swap would take.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_not_rerendered(&deployments, &["web", "api"], &hostile, before).await?;
    assert!(
        deployments.get_opt("policy-error").await?.is_none(),
        "the refused AppService was rendered by another guest"
    );
    let rejected = second.metric("app_operator_guest_rejections_total{kind=\"load\"}");
    assert_eq!(rejected, Some(1.0), "the candidate was not judged again");
    assert!(
        second.terminate().await?,
        "the new leader did not exit cleanly"
    );
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}

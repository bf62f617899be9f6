//! The operator binary's memory: AppServices rendered by the hostile guest's allocation bomb at
//! full concurrency fail cleanly with the memory limit error, the process stays up, and its peak
//! RSS stays under the memory limit it was given; a budget that does not fit that limit is
//! refused at start-up; once ready, the operator unmaps the pages of its binary that start-up
//! ran and goes on with its code faulted back in.

use std::time::Duration;

use anyhow::Context;
use app_operator::crd::AppService;
use app_operator_e2e::appservice::{CONVERGE, condition, create, sample_named, wait_ready};
use app_operator_e2e::cluster::kubeconfig_path;
use app_operator_e2e::operator::install_crd;
use app_operator_e2e::process::{OperatorProcess, binary, status_kib};
use app_operator_e2e::{TestNamespace, client, wait};
use kube::Api;
use kube::api::ListParams;

/// One guest instance's cap, in MiB; the bomb touches every page up to it.
const INSTANCE_MIB: u64 = 64;
/// The guests' budget, in MiB: two instances at once.
const BUDGET_MIB: u64 = 128;
/// The host's reserve, in MiB.
const RESERVE_MIB: u64 = 128;
/// AppServices rendered by the bomb, all at once (the controller runs 16 reconciles at once).
const APPS: usize = 24;

#[tokio::test]
async fn allocation_bombs_at_full_concurrency_stay_within_the_budget() -> anyhow::Result<()> {
    let client = client().await?;
    install_crd(&client).await?;
    let ns = TestNamespace::create(&client, "memory").await?;
    let work = std::env::temp_dir().join(format!("app-operator-memory-{}", ns.name()));
    std::fs::create_dir_all(&work)?;
    let guest = work.join("hostile.wasm");
    std::fs::write(&guest, app_operator::testing::hostile_guest())?;

    let limit_mib = BUDGET_MIB + RESERVE_MIB;
    let (instance, budget, reserve, limit) = (
        INSTANCE_MIB.to_string(),
        BUDGET_MIB.to_string(),
        RESERVE_MIB.to_string(),
        limit_mib.to_string(),
    );
    let args = [
        "--namespace",
        ns.name(),
        "--guest",
        guest.to_str().context("a UTF-8 temp path")?,
        "--guest-configmap",
        "",
        "--guest-memory-mib",
        &instance,
        "--guest-memory-budget-mib",
        &budget,
        "--memory-reserve-mib",
        &reserve,
        "--memory-limit-mib",
        &limit,
        "--concurrency",
        "16",
        // NB: long enough for the bomb to reach its cap on a loaded machine, so every call ends
        // with the memory error, not a deadline.
        "--guest-deadline-ms",
        "10000",
    ];
    let mut operator = OperatorProcess::start("memory", &kubeconfig_path(), &args, &work)?;
    operator.wait_readyz("ready").await?;
    let pid = operator.pid();
    let idle_kib = status_kib(pid, "VmRSS")?;

    for i in 0..APPS {
        let mut app = sample_named(&format!("bomb-{i}"));
        app.metadata.labels = Some(
            [("hostile.kudevops.io/misdeed".to_owned(), "alloc".to_owned())]
                .into_iter()
                .collect(),
        );
        create(&client, ns.name(), &app).await?;
    }

    // Every AppService fails with the memory limit, at least twice over (the first reconciles
    // and their retries), while the process serves its probes.
    let apps: Api<AppService> = Api::namespaced(client.clone(), ns.name());
    let memory_errors = r#"app_operator_guest_errors_total{kind="memory"}"#;
    wait::until(
        "every bomb to fail with MemoryLimitExceeded, twice",
        CONVERGE,
        || async {
            let failed = apps
                .list(&ListParams::default())
                .await?
                .items
                .iter()
                .filter(|app| {
                    condition(app, "GuestError")
                        .is_some_and(|c| c.status == "True" && c.reason == "MemoryLimitExceeded")
                })
                .count();
            let errors = operator.metric(memory_errors).unwrap_or(0.0);
            Ok((failed == APPS && errors >= (2 * APPS) as f64).then_some(()))
        },
    )
    .await
    .with_context(|| format!("operator log tail:\n{}", operator.log_tail(20)))?;

    let peak_kib = status_kib(pid, "VmHWM")?;
    let errors = operator.metric(memory_errors).unwrap_or(0.0);
    println!(
        "{APPS} allocation bombs of {INSTANCE_MIB} MiB, budget {BUDGET_MIB} MiB (2 instances), \
         reserve {RESERVE_MIB} MiB: RSS idle {:.1} MiB, peak {:.1} MiB (limit {limit_mib} MiB), \
         {errors} memory errors",
        idle_kib as f64 / 1024.0,
        peak_kib as f64 / 1024.0,
    );
    assert!(
        peak_kib < limit_mib << 10,
        "peak RSS {peak_kib} KiB is over the {limit_mib} MiB limit"
    );
    // The guests really used their memory: more than one instance's cap was resident at once
    // at some point, or the test proves nothing about the budget.
    assert!(
        peak_kib > idle_kib + (INSTANCE_MIB << 10),
        "peak RSS {peak_kib} KiB: the bombs did not reach their cap"
    );
    assert_eq!(
        operator.probe("/healthz").map(|(code, _)| code),
        Some(200),
        "the operator does not answer its liveness probe"
    );
    assert_eq!(
        operator
            .metric("app_operator_reconcile_errors_total{kind=\"guest\"}")
            .map(|n| n > 0.0),
        Some(true)
    );
    assert!(
        operator.terminate().await?,
        "the operator did not exit cleanly"
    );
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}

#[test]
fn a_budget_over_the_memory_limit_is_refused_at_start_up() -> anyhow::Result<()> {
    let output = std::process::Command::new(binary()?)
        .args([
            "run",
            "--guest-memory-mib",
            "64",
            "--guest-memory-budget-mib",
            "1024",
            "--memory-reserve-mib",
            "128",
            "--memory-limit-mib",
            "512",
        ])
        .arg("--kubeconfig")
        .arg(kubeconfig_path())
        .output()?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "it started: {stderr}");
    assert!(
        stderr.contains(
            "the guest memory budget (1024 MiB) plus the host's reserve (128 MiB) exceed the \
             memory limit of 512 MiB (--memory-limit-mib)"
        ),
        "{stderr}"
    );
    Ok(())
}

#[tokio::test]
async fn start_up_pages_are_unmapped_once_ready_and_the_operator_goes_on() -> anyhow::Result<()> {
    const UNMAPPED: &str = "unmapped the binary's start-up pages";
    let client = client().await?;
    install_crd(&client).await?;
    let ns = TestNamespace::create(&client, "pages").await?;
    let work = std::env::temp_dir().join(format!("app-operator-pages-{}", ns.name()));
    std::fs::create_dir_all(&work)?;
    let args = [
        "--namespace",
        ns.name(),
        "--guest-configmap",
        "",
        "--log-format",
        "json",
    ];
    let mut operator = OperatorProcess::start("pages", &kubeconfig_path(), &args, &work)?;
    operator.wait_readyz("ready").await?;
    wait::until(
        "the start-up pages to be unmapped",
        Duration::from_secs(30),
        || {
            let lines = operator.log_lines(UNMAPPED);
            async move { Ok((!lines.is_empty()).then_some(lines)) }
        },
    )
    .await
    .with_context(|| format!("operator log tail:\n{}", operator.log_tail(20)))?;
    let lines = operator.log_lines(UNMAPPED);
    anyhow::ensure!(lines.len() == 1, "unmapped more than once: {lines:?}");
    let event: serde_json::Value = serde_json::from_str(&lines[0])?;
    let field = |name: &str| {
        event[name]
            .as_u64()
            .with_context(|| format!("no {name} in {event}"))
    };
    let (before, after) = (
        field("resident_file_kib_before")?,
        field("resident_file_kib_after")?,
    );
    anyhow::ensure!(
        field("segments")? >= 1 && after < before,
        "nothing was unmapped: {event}"
    );

    // The code comes back as it runs: an AppService converges, and the process still holds
    // fewer pages of files than before the unmapping.
    let app = sample_named("after-unmapping");
    let ready = format!("{0}/{0}", app.spec.replicas.unwrap_or(1));
    create(&client, ns.name(), &app).await?;
    let apps: Api<AppService> = Api::namespaced(client.clone(), ns.name());
    wait_ready(&apps, "after-unmapping", &ready).await?;
    let now = operator.status_kib("RssFile")?;
    println!(
        "resident pages of files: {before} KiB before unmapping, {after} KiB right after, \
         {now} KiB after an AppService converged"
    );
    anyhow::ensure!(
        now < before,
        "RssFile {now} KiB, {before} KiB before unmapping"
    );
    assert!(
        operator.terminate().await?,
        "the operator did not exit cleanly"
    );
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}

//! The operator binary on a guest compiled ahead of time, as the image runs it: `guest
//! precompile` writes the default guest's artifact, and `run --guest-precompiled-dir` loads it
//! instead of compiling at start (no compile child ran: its CPU would count in the operator's
//! waited-children times), reconciles an AppService to Ready and writes nothing to the
//! directory. An operator whose engine differs (fuel-metered) does not take that artifact: it
//! compiles, says so, and converges just the same.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::SystemTime;

use anyhow::{Context, ensure};
use app_operator::crd::AppService;
use app_operator_e2e::appservice::{create, sample_named, wait_ready};
use app_operator_e2e::cluster::kubeconfig_path;
use app_operator_e2e::operator::install_crd;
use app_operator_e2e::process::{OperatorProcess, binary, children_cpu_seconds};
use app_operator_e2e::{TestNamespace, client};
use kube::{Api, Client};

/// The debug line of a guest loaded from the precompiled directory.
const LOADED: &str = "loaded precompiled guest";
/// The info line of a guest the directory has no artifact for.
const MISSED: &str = "guest not precompiled for this engine; compiling it";

#[tokio::test]
async fn a_precompiled_guest_starts_the_operator_without_a_compile() -> anyhow::Result<()> {
    let client = client().await?;
    install_crd(&client).await?;
    let ns = TestNamespace::create(&client, "precompiled").await?;
    let work = std::env::temp_dir().join(format!("app-operator-precompiled-{}", ns.name()));
    let dir = work.join("guests");
    std::fs::create_dir_all(&dir)?;
    let dir_arg = dir.to_str().context("a UTF-8 temp path")?;

    let out = Command::new(binary()?)
        .args(["guest", "precompile", "--out-dir", dir_arg])
        .output()?;
    ensure!(
        out.status.success(),
        "guest precompile failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written = listing(&dir)?;
    ensure!(
        written.len() == 1 && written.keys().all(|name| name.ends_with(".cwasm")),
        "guest precompile wrote one artifact, not {written:?}"
    );

    // Precompiled: loaded, no compile child, Ready.
    let mut operator = start(ns.name(), dir_arg, &[], &work, "loaded")?;
    operator.wait_readyz("ready").await?;
    let pid = operator.pid();
    converge(&client, ns.name(), "loaded").await?;
    ensure!(
        operator.log_count(LOADED) >= 1 && operator.log_count(MISSED) == 0,
        "the operator did not load its guest from {dir_arg}:\n{}",
        operator.log_tail(20)
    );
    let compile_cpu = children_cpu_seconds(pid)?;
    ensure!(
        compile_cpu == 0.0,
        "a child process used {compile_cpu} s of CPU: the guest was compiled"
    );
    operator.terminate().await?;
    ensure!(listing(&dir)? == written, "the operator wrote to {dir_arg}");

    // Another engine: the artifact does not fit, so the guest is compiled (in a child).
    let mut operator = start(
        ns.name(),
        dir_arg,
        &["--guest-fuel", "1000000000"],
        &work,
        "metered",
    )?;
    operator.wait_readyz("ready").await?;
    let pid = operator.pid();
    converge(&client, ns.name(), "metered").await?;
    ensure!(
        operator.log_count(MISSED) == 1 && operator.log_count(LOADED) == 0,
        "a fuel-metered operator took the artifact of another engine:\n{}",
        operator.log_tail(20)
    );
    let compile_cpu = children_cpu_seconds(pid)?;
    ensure!(
        compile_cpu > 0.0,
        "no compile child ran for a guest the directory had no artifact for"
    );
    operator.terminate().await?;
    ensure!(listing(&dir)? == written, "the operator wrote to {dir_arg}");
    std::fs::remove_dir_all(&work)?;
    Ok(())
}

/// Starts the operator for `namespace` on the embedded default guest with `dir` as its
/// precompiled directory and `extra` flags, logging the guest module at debug.
fn start(
    namespace: &str,
    dir: &str,
    extra: &[&str],
    work: &Path,
    name: &str,
) -> anyhow::Result<OperatorProcess> {
    let mut args = vec![
        "--namespace",
        namespace,
        "--guest-configmap",
        "",
        "--guest-precompiled-dir",
        dir,
    ];
    args.extend_from_slice(extra);
    OperatorProcess::start_with_env(
        name,
        &kubeconfig_path(),
        &args,
        work,
        &[("RUST_LOG", "info,app_operator::guest=debug")],
    )
}

/// Creates AppService `name` in `namespace` and waits until it is Ready with all its replicas.
async fn converge(client: &Client, namespace: &str, name: &str) -> anyhow::Result<()> {
    let app = sample_named(name);
    let ready = format!("{0}/{0}", app.spec.replicas.unwrap_or(1));
    create(client, namespace, &app).await?;
    let api: Api<AppService> = Api::namespaced(client.clone(), namespace);
    wait_ready(&api, name, &ready).await?;
    Ok(())
}

/// The files in `dir`: name, size and modification time.
fn listing(dir: &Path) -> anyhow::Result<BTreeMap<String, (u64, SystemTime)>> {
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        files.insert(
            entry.file_name().to_string_lossy().into_owned(),
            (meta.len(), meta.modified()?),
        );
    }
    Ok(files)
}

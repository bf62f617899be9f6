//! The long fault scenarios, run by `make chaos` (`hack/chaos.sh`) and ignored by `make test`:
//! they restart the shared API server or take minutes. The real API server is restarted (alone,
//! then with the whole control plane), etcd is compacted under the operator's watches, two
//! replicas are partitioned from each other's API path, NodePorts run out, and 10,000
//! AppServices are created at once.
//!
//! Each scenario checks that every AppService converges (`fleet::converged`), that nothing the
//! operator does not own was written and no child that existed before was lost or created again
//! (asserted to be 0), and prints one `fault ...` summary line (times are printed, not asserted).
//! The quick scenarios, which go through a proxy and run in `make test`, are in `faults.rs`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use app_operator::crd::AppService;
use app_operator_e2e::appservice::{CONVERGE, condition, wait_event};
use app_operator_e2e::cluster::kubeconfig_path;
use app_operator_e2e::faults::{Toxiproxy, kubeconfig_through};
use app_operator_e2e::fleet::{Converged, converged, samples};
use app_operator_e2e::process::{OperatorProcess, cpu_seconds, replica_args, status_kib};
use app_operator_e2e::scenario::{Figures, Proxied, RECOVERY, Requests, Scene, load, summary};
use app_operator_e2e::snapshot::Snapshot;
use app_operator_e2e::wait;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Service;
use kube::api::DeleteParams;
use kube::{Api, Client, ResourceExt};

/// A script of `hack/controlplane/`.
fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../hack/controlplane")
        .join(name)
}

/// Runs `hack/controlplane/<name> <args>` to completion.
async fn run_script(name: &'static str, args: Vec<String>) -> anyhow::Result<()> {
    run_script_with(name, args, &[]).await
}

/// [`run_script`] with the variables `env` set.
async fn run_script_with(
    name: &'static str,
    args: Vec<String>,
    env: &[(&'static str, &'static str)],
) -> anyhow::Result<()> {
    let env = env.to_vec();
    tokio::task::spawn_blocking(move || {
        let status = Command::new(script(name))
            .args(&args)
            .envs(env)
            .status()
            .with_context(|| format!("failed to run {name}"))?;
        ensure!(status.success(), "{name} {args:?} failed: {status}");
        Ok(())
    })
    .await?
}

/// Restarts `what` (`apiserver` or `all`) with `down` seconds down, polling the operator's
/// `/readyz` meanwhile; returns the first non-200 answer it gave.
async fn restart(
    what: &str,
    down: u64,
    operator: &OperatorProcess,
) -> anyhow::Result<Option<String>> {
    let restart = tokio::spawn(run_script(
        "restart.sh",
        vec![what.to_owned(), down.to_string()],
    ));
    let mut unready = None;
    while !restart.is_finished() {
        if let Some((code, body)) = operator.probe("/readyz")
            && code != 200
        {
            unready.get_or_insert(format!("{code} {body}"));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    restart.await??;
    Ok(unready)
}

/// Waits until `client` gets answers again after a restart.
async fn answers(client: &Client) -> anyhow::Result<()> {
    wait::until(
        "the API server to answer",
        Duration::from_secs(60),
        || async { Ok(client.apiserver_version().await.ok().map(drop)) },
    )
    .await
}

/// Deletes Deployments `<prefix>-0` .. `<prefix>-<n-1>`; returns their `Kind/name`s.
async fn delete_deployments(scene: &Scene, prefix: &str, n: usize) -> anyhow::Result<Vec<String>> {
    let api: Api<Deployment> = Api::namespaced(scene.client.clone(), scene.name());
    let mut deleted = Vec::new();
    for i in 0..n {
        let name = format!("{prefix}-{i}");
        api.delete(&name, &DeleteParams::background()).await?;
        deleted.push(format!("Deployment/{name}"));
    }
    Ok(deleted)
}

/// The API server restarted (`apiserver`) or the whole control plane (`all`) while the operator
/// runs with 100 converged AppServices; once it is back, 50 are created and 10 Deployments
/// deleted, and everything converges.
async fn restart_scenario(what: &str, down: u64) -> anyhow::Result<()> {
    let scene = Scene::new(&format!("chaos-restart-{what}")).await?;
    let operator = scene.operator(what, &kubeconfig_path()).await?;
    let before = scene.converged_fleet(100).await?;

    let began = Requests::of(&operator);
    let unready = restart(what, down, &operator).await?;
    answers(&scene.client).await?;
    let back = Instant::now();
    let ended = Requests::of(&operator);
    scene.create(samples("new", 0..50)).await?;
    let deleted = delete_deployments(&scene, "app", 10).await?;
    let converged = scene.converge(150, back, RECOVERY).await?;
    println!(
        "fault restart {what}: /readyz while down: {unready:?}; re-lists after 410: {}",
        operator.log_count("too old resource version")
    );
    let scenario = format!("restart {what} ({down} s down; times from its return)");
    let figures = Figures {
        scenario: &scenario,
        converged,
        requests: (began, ended),
    };
    scene.report(figures, &operator, &before, &deleted).await
}

#[tokio::test]
#[ignore = "make chaos: restarts the shared API server"]
async fn api_server_restart() -> anyhow::Result<()> {
    restart_scenario("apiserver", 15).await
}

#[tokio::test]
#[ignore = "make chaos: restarts the shared control plane"]
async fn control_plane_restart() -> anyhow::Result<()> {
    restart_scenario("all", 5).await
}

/// Cut off while AppServices are created and children deleted, etcd compacted at its current
/// revision and the API server restarted meanwhile, so that every resourceVersion the operator
/// holds is compacted away: its watches get `410 Gone` and re-list, and everything converges.
#[tokio::test]
#[ignore = "make chaos: compacts the shared etcd"]
async fn watch_expiry_after_compaction() -> anyhow::Result<()> {
    let scene = Scene::new("chaos-compact").await?;
    let Proxied {
        proxy,
        operator,
        before,
        toxiproxy: _proxy,
    } = scene.behind_proxy("compact", 30).await?;

    let began = Requests::of(&operator);
    proxy.disable().await?;
    let cut = Instant::now();
    scene.create(samples("new", 0..20)).await?;
    let deleted = delete_deployments(&scene, "app", 5).await?;
    run_script("compact.sh", Vec::new()).await?;
    // NB: compaction alone expires nothing the operator holds: the API server serves a resumed
    // watch from its own watch cache. Restarted, its new cache starts after the compaction.
    run_script("restart.sh", vec!["apiserver".into()]).await?;
    answers(&scene.client).await?;
    tokio::time::sleep(Duration::from_secs(15).saturating_sub(cut.elapsed())).await;
    let ended = Requests::of(&operator);
    proxy.enable().await?;
    let healed = Instant::now();
    let converged = scene.converge(50, healed, RECOVERY).await?;
    let relists = operator.log_count("too old resource version");
    println!("fault compaction: re-lists after 410: {relists}");
    ensure!(
        relists > 0,
        "no watch was expired by the compaction and restart"
    );
    let figures = Figures {
        scenario: "cut off, etcd compacted and the API server restarted meanwhile",
        converged,
        requests: (began, ended),
    };
    scene.report(figures, &operator, &before, &deleted).await
}

/// The operator killed with SIGKILL 1 s into creating 1000 AppServices at once, then started
/// again (`faults.rs` does it with 200 in `make test`).
#[tokio::test]
#[ignore = "make chaos: 1000 AppServices"]
async fn kill_9_amid_a_thousand_creations() -> anyhow::Result<()> {
    Scene::new("chaos-kill").await?.kill_9_amid(1000).await
}

/// Who holds Lease `name` in `namespace`.
async fn holder(client: &Client, namespace: &str) -> anyhow::Result<Option<String>> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let lease = leases.get_opt(app_operator::consts::LEADER_LEASE).await?;
    Ok(lease.and_then(|l| l.spec?.holder_identity))
}

/// Two replicas with leader election, each through its own proxy. The leader is cut off for
/// longer than the Lease: it stops writing, the standby takes over and converges what is
/// created meanwhile; after healing there is one leader.
#[tokio::test]
#[ignore = "make chaos: a minute of leader election"]
async fn partition_of_the_leader_longer_than_the_lease() -> anyhow::Result<()> {
    const LEASE: u64 = 6;
    let scene = Scene::new("chaos-partition").await?;
    let toxiproxy = Toxiproxy::start(&scene.work).await?;
    let (pa, pb) = (
        toxiproxy.api_server_proxy("a").await?,
        toxiproxy.api_server_proxy("b").await?,
    );
    let ns = scene.name().to_owned();
    let args = |id: &str| replica_args(&ns, &ns, id, LEASE);
    let a = scene
        .operator_with(
            "a",
            &kubeconfig_through(&pa, &scene.work)?,
            &args("a"),
            "ready",
        )
        .await?;
    let b = scene
        .operator_with(
            "b",
            &kubeconfig_through(&pb, &scene.work)?,
            &args("b"),
            "standby",
        )
        .await?;
    ensure!(holder(&scene.client, &ns).await?.as_deref() == Some("a"));
    let before = scene.converged_fleet(20).await?;

    let began = Requests::of(&b);
    pa.disable().await?;
    let cut = Instant::now();
    scene.create(samples("new", 0..20)).await?;
    let deleted = delete_deployments(&scene, "app", 3).await?;
    let took_over = wait::until("b to take the Lease", Duration::from_secs(60), || async {
        Ok((holder(&scene.client, &ns).await?.as_deref() == Some("b")).then(|| cut.elapsed()))
    })
    .await?;
    let writes_at_cut = Requests::of(&a);
    let converged_under_b = scene.converge(40, cut, RECOVERY).await?;
    tokio::time::sleep(Duration::from_secs(2 * LEASE)).await;
    let writes_later = Requests::of(&a);
    ensure!(
        writes_later.writes == writes_at_cut.writes,
        "the cut-off leader sent writes after losing the Lease: {}",
        writes_later.since(writes_at_cut)
    );
    let ended = Requests::of(&b);
    pa.enable().await?;
    tokio::time::sleep(Duration::from_secs(2 * LEASE)).await;
    let leader = holder(&scene.client, &ns).await?;
    let a_state = a.probe("/readyz").map(|(_, body)| body);
    ensure!(
        leader.as_deref() == Some("b"),
        "after healing the Lease is {leader:?}"
    );
    println!(
        "fault partition: b took the Lease {:.1} s into the cut (Lease {LEASE} s); a after \
         healing: {a_state:?}",
        took_over.as_secs_f64()
    );
    let figures = Figures {
        scenario: "leader cut off past its Lease (times from the cut)",
        converged: converged_under_b,
        requests: (began, ended),
    };
    scene.report(figures, &b, &before, &deleted).await
}

/// NodePorts in the narrowed range of the exhaustion scenario.
const NODE_PORTS: usize = 20;

/// The API server restarted with room for 20 NodePorts (the cluster's other Services hold
/// none, as `make chaos` runs alone), 25 AppServices with ports: 20 converge, the 5 past the
/// limit say why in their status and a Warning Event; deleting 5 converged ones frees ports
/// and the 5 converge. The default range is restored at the end, also on failure.
#[tokio::test]
#[ignore = "make chaos: restarts the shared API server twice"]
async fn node_port_exhaustion_is_reported_and_heals() -> anyhow::Result<()> {
    let scene = Scene::new("chaos-nodeports").await?;
    // NB: earlier scenarios' namespaces may still be going, their NodePorts with them.
    let all: Api<Service> = Api::all(scene.client.clone());
    wait::until("NodePorts 32000-32019 to be free", CONVERGE, || async {
        let taken = all.list(&Default::default()).await?.items.iter().any(|s| {
            let ports = s.spec.iter().flat_map(|spec| spec.ports.iter().flatten());
            ports
                .filter_map(|p| p.node_port)
                .any(|p| (32000..32020).contains(&p))
        });
        Ok((!taken).then_some(()))
    })
    .await?;
    let narrow = [("APP_OPERATOR_NODE_PORT_RANGE", "32000-32019")];
    run_script_with("restart.sh", vec!["apiserver".into()], &narrow).await?;
    answers(&scene.client).await?;
    let result = exhaustion(&scene).await;
    run_script("restart.sh", vec!["apiserver".into()]).await?;
    answers(&scene.client).await?;
    result?;
    scene.done();
    Ok(())
}

async fn exhaustion(scene: &Scene) -> anyhow::Result<()> {
    let operator = scene.operator("nodeports", &kubeconfig_path()).await?;
    let extra = 5;
    scene.create(samples("app", 0..NODE_PORTS + extra)).await?;
    let apps: Api<AppService> = Api::namespaced(scene.client.clone(), scene.name());
    let services: Api<Service> = Api::namespaced(scene.client.clone(), scene.name());
    // Which ones got a port is up to the order of the creations and reconciles.
    let (placed, refused) = wait::until(
        "20 Services, and 5 AppServices failed",
        CONVERGE,
        || async {
            let with_service: Vec<String> = services
                .list_metadata(&Default::default())
                .await?
                .items
                .into_iter()
                .filter_map(|s| s.metadata.name)
                .filter(|n| n.starts_with("app-"))
                .collect();
            let failed: Vec<(String, String)> = apps
                .list(&Default::default())
                .await?
                .items
                .into_iter()
                .filter(|a| !with_service.contains(&a.name_any()))
                .filter_map(|a| {
                    let c = condition(&a, "Ready")?;
                    (c.status == "False" && c.reason == "ApplyFailed")
                        .then(|| (a.name_any(), c.message.clone()))
                })
                .collect();
            Ok((with_service.len() == NODE_PORTS && failed.len() == extra)
                .then_some((with_service, failed)))
        },
    )
    .await?;
    let (name, message) = &refused[0];
    let event = wait_event(&scene.client, scene.name(), name, "ApplyFailed").await?;
    println!(
        "fault nodeports: {} of {} placed; {name}: Ready=False ApplyFailed: {message}; Event: {}",
        placed.len(),
        NODE_PORTS + extra,
        event.note.unwrap_or_default()
    );
    let before = Snapshot::take(&scene.client, scene.name()).await?;
    let freed = Instant::now();
    let gone: Vec<&String> = placed.iter().take(extra).collect();
    for name in &gone {
        apps.delete(name, &DeleteParams::foreground()).await?;
    }
    let deleted: Vec<String> = gone
        .iter()
        .flat_map(|n| [format!("Deployment/{n}"), format!("Service/{n}")])
        .collect();
    let converged = scene.converge(NODE_PORTS, freed, RECOVERY).await?;
    let damage = scene.damage(&before, &deleted).await?;
    let figures = Figures {
        scenario: "NodePorts exhausted, then 5 freed (times from the deletions)",
        converged,
        requests: (Requests::default(), Requests::default()),
    };
    summary(figures, &operator, &damage)
}

/// AppServices of the scale scenario.
const FLEET: usize = 10_000;

/// 10,000 AppServices created at once, without ports (the default NodePort range holds 2768)
/// and without replicas (the fake node's pods would take half an hour to start):
/// the operator converges them all; its peak RSS and time are printed, and the API server's
/// memory as the reference.
#[tokio::test]
#[ignore = "make chaos: 10,000 AppServices take minutes"]
async fn ten_thousand_appservices_at_once() -> anyhow::Result<()> {
    let scene = Scene::new("chaos-fleet").await?;
    let operator = scene.operator("fleet", &kubeconfig_path()).await?;
    let apiserver = apiserver_pid()?;
    let api_before = status_kib(apiserver, "VmRSS")?;
    let mut apps: Vec<AppService> = samples("app", 0..FLEET);
    for app in &mut apps {
        app.spec.ports.clear();
        // NB: 10,000 pods take this control plane's scheduler and kwok about 28 minutes (they
        // bind and start ~360 a minute); the operator's work is the same without them.
        app.spec.replicas = Some(0);
    }
    let began = Instant::now();
    scene.create(apps).await?;
    let created = began.elapsed();
    // NB: a check lists 30,000 objects; every 5 s is enough at this size.
    let mut children = None;
    let all = loop {
        let lag = converged(&scene.client, scene.name()).await?;
        if lag.apps == FLEET && lag.children.is_empty() && children.is_none() {
            children = Some(began.elapsed());
        }
        if lag.apps == FLEET && lag.is_empty() {
            break began.elapsed();
        }
        ensure!(
            began.elapsed() < Duration::from_secs(1200),
            "{FLEET} AppServices not converged after 20 minutes: {}",
            lag.first(3)
        );
        tokio::time::sleep(Duration::from_secs(5)).await;
    };
    let api_after = status_kib(apiserver, "VmRSS")?;
    println!(
        "fault fleet: {FLEET} AppServices created in {:.1} s; the API server's RSS {:.0} -> {:.0} \
         MiB; operator CPU {:.1} s",
        created.as_secs_f64(),
        api_before as f64 / 1024.0,
        api_after as f64 / 1024.0,
        cpu_seconds(operator.pid())?,
    );
    let figures = Figures {
        scenario: "10,000 AppServices at once, no ports, 0 replicas (times from the first creation)",
        converged: Converged {
            children: children.unwrap_or(all),
            all,
        },
        requests: (Requests::default(), Requests::default()),
    };
    summary(figures, &operator, &[])?;
    println!("fault fleet: load {}", load());
    scene.done();
    Ok(())
}

/// The running kube-apiserver's pid, from the control plane's pid file.
fn apiserver_pid() -> anyhow::Result<u32> {
    let cluster = kubeconfig_path()
        .parent()
        .context("kubeconfig has no directory")?
        .to_owned();
    let file = cluster.join("pids/kube-apiserver.pid");
    let pid = std::fs::read_to_string(&file)
        .with_context(|| format!("failed to read {}", file.display()))?;
    Ok(pid.trim().parse()?)
}

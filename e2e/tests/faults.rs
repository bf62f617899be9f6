//! Faults on the operator's path to the API server, the quick ones: an API outage of 15 s, 1 s
//! of added latency on every request, connection resets every 3 s, a connection gone silent both
//! ways until its HTTP/2 pings give it up, kill -9 in the middle of
//! creating 200 AppServices, and a user editing children as another field manager during a
//! guest swap. The operator (the binary) talks to the API server through a
//! Toxiproxy proxy (`app_operator_e2e::faults`); the test's own client goes direct.
//!
//! After each fault every AppService converges (`fleet::converged`), a user's Deployment and
//! Service in the namespace are left unwritten, and no child that existed before the fault is
//! deleted and created again unless the test deleted it; that count is asserted to be 0. Each
//! scenario prints one summary line: the time until every child was applied and until all
//! converged after the fault ended, the operator's API requests during the fault and after it,
//! its peak RSS and the load average (times are printed, not asserted).

use std::time::{Duration, Instant};

use app_operator::crd::AppService;
use app_operator::guest;
use app_operator::testing::tiered_guest;
use app_operator_e2e::appservice::{CONVERGE, create, sample_named};
use app_operator_e2e::faults::Stream;
use app_operator_e2e::fleet::samples;
use app_operator_e2e::scenario::{Figures, Proxied, RECOVERY, Requests, Scene};
use app_operator_e2e::swap::{SwapOperator, push, wait_digest};
use app_operator_e2e::{TestNamespace, wait};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

/// The scenarios run one at a time, so that one's figures do not include another's load.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test]
async fn an_api_outage_heals_and_what_changed_meanwhile_converges() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let scene = Scene::new("faults-outage").await?;
    let Proxied {
        proxy,
        operator,
        before,
        toxiproxy: _proxy,
    } = scene.behind_proxy("outage", 20).await?;

    // 15 s cut off; meanwhile AppServices are created, children deleted and a spec changed.
    let began = Requests::of(&operator);
    proxy.disable().await?;
    let cut = Instant::now();
    scene.create(samples("new", 0..10)).await?;
    let deployments: Api<Deployment> = Api::namespaced(scene.client.clone(), scene.name());
    let services: Api<Service> = Api::namespaced(scene.client.clone(), scene.name());
    let gone = DeleteParams::background();
    deployments.delete("app-0", &gone).await?;
    services.delete("app-1", &gone).await?;
    deployments.delete("app-2", &gone).await?;
    let apps: Api<AppService> = Api::namespaced(scene.client.clone(), scene.name());
    let scale = json!({"spec": {"replicas": 2}});
    apps.patch("app-3", &PatchParams::default(), &Patch::Merge(&scale))
        .await?;
    tokio::time::sleep(Duration::from_secs(10).saturating_sub(cut.elapsed())).await;
    let readyz = operator.probe("/readyz");
    tokio::time::sleep(Duration::from_secs(15).saturating_sub(cut.elapsed())).await;
    let ended = Requests::of(&operator);
    proxy.enable().await?;

    let converged = scene.converge(30, Instant::now(), RECOVERY).await?;
    let deleted = ["Deployment/app-0", "Service/app-1", "Deployment/app-2"].map(String::from);
    println!("fault outage: /readyz 10 s into the outage: {readyz:?}");
    anyhow::ensure!(
        readyz
            .as_ref()
            .is_some_and(|(code, body)| *code == 503 && body.contains("API server unreachable")),
        "/readyz did not say the API server was unreachable: {readyz:?}"
    );
    let figures = Figures {
        scenario: "outage 15 s",
        converged,
        requests: (began, ended),
    };
    scene.report(figures, &operator, &before, &deleted).await
}

#[tokio::test]
async fn a_second_of_latency_on_every_request_still_converges() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let scene = Scene::new("faults-latency").await?;
    let Proxied {
        proxy,
        operator,
        before,
        toxiproxy: _proxy,
    } = scene.behind_proxy("latency", 5).await?;

    // Half a second each way: every request's answer comes 1 s later, every watch event 0.5 s.
    for stream in Stream::BOTH {
        proxy.latency(stream, 500).await?;
    }
    let began = Requests::of(&operator);
    let slowed = Instant::now();
    scene.create(samples("slow", 0..10)).await?;
    // NB: the fault lasts until everything converged; the times are from the creations.
    let converged = scene.converge(15, slowed, RECOVERY).await?;
    let ended = Requests::of(&operator);
    proxy.clear_toxics().await?;
    let figures = Figures {
        scenario: "latency 1 s, 10 created under it (times from the creations)",
        converged,
        requests: (began, ended),
    };
    scene.report(figures, &operator, &before, &[]).await
}

#[tokio::test]
async fn connection_resets_every_few_seconds_do_not_lose_changes() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let scene = Scene::new("faults-resets").await?;
    let Proxied {
        proxy,
        operator,
        before,
        toxiproxy: _proxy,
    } = scene.behind_proxy("resets", 5).await?;

    // Every 3 s for 15 s: for 1 s, every connection that carries data either way is reset (the
    // watches with it), and two AppServices are created.
    let began = Requests::of(&operator);
    for cycle in 0..5 {
        for stream in Stream::BOTH {
            proxy.reset_peer(stream, 0).await?;
        }
        scene
            .create(samples("reset", 2 * cycle..2 * cycle + 2))
            .await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        proxy.clear_toxics().await?;
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let ended = Requests::of(&operator);
    let converged = scene.converge(15, Instant::now(), RECOVERY).await?;
    let figures = Figures {
        scenario: "resets every 3 s for 15 s",
        converged,
        requests: (began, ended),
    };
    scene.report(figures, &operator, &before, &[]).await
}

#[tokio::test]
async fn a_silent_connection_is_given_up_by_its_pings_and_what_changed_converges()
-> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let scene = Scene::new("faults-silent").await?;
    let Proxied {
        proxy,
        operator,
        before,
        toxiproxy: _proxy,
    } = scene.behind_proxy("silent", 5).await?;

    // Both ways silent, nothing closed: only the HTTP/2 pings (30 s, then 15 s for the answer)
    // tell the operator its connection is gone; an HTTP/1.1 watch would wait 290 s.
    let watch_errors = || {
        operator
            .metric_sum("app_operator_watch_errors_total")
            .unwrap_or(0.0)
    };
    let errors_before = watch_errors();
    let began = Requests::of(&operator);
    for stream in Stream::BOTH {
        proxy.blackhole(stream).await?;
    }
    let cut = Instant::now();
    scene.create(samples("silent", 0..5)).await?;
    let given_up = wait::until(
        "the watches to fail on the silent connection",
        Duration::from_secs(75),
        || async { Ok((watch_errors() > errors_before).then(|| cut.elapsed())) },
    )
    .await?;
    let ended = Requests::of(&operator);
    proxy.clear_toxics().await?;
    let converged = scene.converge(10, Instant::now(), RECOVERY).await?;
    println!(
        "fault silent: the watches failed {:.1} s into the silent cut",
        given_up.as_secs_f64()
    );
    let figures = Figures {
        scenario: "silent both ways until the watches failed (times from healing)",
        converged,
        requests: (began, ended),
    };
    scene.report(figures, &operator, &before, &[]).await
}

#[tokio::test]
async fn kill_9_in_the_middle_of_a_burst_loses_nothing() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let scene = Scene::new("faults-kill").await?;
    scene.kill_9_amid(200).await
}

/// A field manager the concurrent-edit scenario writes children as.
const USER: &str = "a-user";

#[tokio::test]
async fn a_user_edit_during_a_swap_keeps_the_users_field_and_the_guests() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let client = app_operator_e2e::client().await?;
    let ns = TestNamespace::create(&client, "faults-edit").await?;
    let _operator = SwapOperator::start(&client, ns.name()).await?;
    let names: Vec<String> = (0..10).map(|i| format!("app-{i}")).collect();
    for name in &names {
        create(&client, ns.name(), &sample_named(name)).await?;
    }
    let default = guest::digest(guest::default_guest());
    for name in &names {
        wait_digest(&client, ns.name(), name, &default).await?;
    }

    // The swap and the user's edits at once: the user (another field manager) adds an
    // annotation of its own and forces the replicas, a field the operator owns.
    let began = Instant::now();
    let swap = {
        let ns = ns.name().to_owned();
        tokio::spawn(async move { push(&ns, tiered_guest(), None).await })
    };
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.name());
    let edit = PatchParams::apply(USER).force();
    for name in &names {
        let body = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "annotations": {"example.com/note": "keep me"}},
            "spec": {"replicas": 5},
        });
        deployments.patch(name, &edit, &Patch::Apply(&body)).await?;
    }
    swap.await??;
    let tiered = guest::digest(tiered_guest());
    let mut lost = Vec::new();
    for name in &names {
        let d = wait_digest(&client, ns.name(), name, &tiered).await?;
        let d = wait::until(&format!("{name}'s replicas set back"), CONVERGE, || async {
            let d = deployments.get(name).await?;
            Ok((d.spec.replicas == Some(3)).then_some(d))
        })
        .await
        .unwrap_or(d);
        if d.annotations().get("example.com/note").map(String::as_str) != Some("keep me") {
            lost.push(format!("{name}: the user's annotation is gone"));
        }
    }
    println!(
        "fault edit during a swap: 10 Deployments edited by {USER} while the guest changed; \
         all on the new guest, replicas set back, in {:.1} s; lost: {}",
        began.elapsed().as_secs_f64(),
        lost.len()
    );
    anyhow::ensure!(lost.is_empty(), "{lost:?}");
    Ok(())
}

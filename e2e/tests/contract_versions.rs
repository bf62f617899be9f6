//! A 0.1.0 guest and a 0.2.0 guest side by side in one operator, on the local control plane:
//! the default guest (0.1.0) is stable, the conditions example guest (0.2.0) the canary of the
//! AppServices labelled `track=canary`. Only those get the guest's condition in their status
//! (`kubectl get -o yaml`) and its Event (`kubectl describe`), and the Event is not recorded
//! again by a routine reconcile.

use std::collections::BTreeMap;
use std::time::Duration;

use app_operator::crd::AppService;
use app_operator::guest;
use app_operator::testing::conditions_guest;
use app_operator_e2e::appservice::{CONVERGE, condition, create, events, sample_named, wait_event};
use app_operator_e2e::kubectl::kubectl;
use app_operator_e2e::swap::{SwapOperator, push, wait_digest};
use app_operator_e2e::{TestNamespace, client, wait};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

/// The condition and Event reason of the conditions guest for a tag (not a digest) image.
const CONDITION: &str = "ImagePinned";
const EVENT: &str = "ImageNotPinned";

fn labelled(name: &str, track: &str) -> AppService {
    let mut app = sample_named(name);
    app.metadata.labels = Some(BTreeMap::from([("track".to_owned(), track.to_owned())]));
    app
}

#[tokio::test]
async fn a_0_1_0_and_a_0_2_0_guest_run_side_by_side() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "contracts").await?;
    let _operator = SwapOperator::start(&client, ns.name()).await?;
    let default = guest::digest(guest::default_guest());
    create(&client, ns.name(), &labelled("picked", "canary")).await?;
    create(&client, ns.name(), &labelled("spared", "stable")).await?;
    wait_digest(&client, ns.name(), "picked", &default).await?;
    wait_digest(&client, ns.name(), "spared", &default).await?;

    push(ns.name(), conditions_guest(), Some("track=canary")).await?;
    let v0_2 = guest::digest(conditions_guest());
    wait_digest(&client, ns.name(), "picked", &v0_2).await?;
    let apps: Api<AppService> = Api::namespaced(client.clone(), ns.name());
    let what = format!("condition {CONDITION} on AppService picked");
    let pinned = wait::until(&what, CONVERGE, || async {
        Ok(condition(&apps.get("picked").await?, CONDITION).cloned())
    })
    .await?;
    assert_eq!(
        (pinned.status.as_str(), pinned.reason.as_str()),
        ("False", "NotPinned")
    );
    let generation = apps.get("picked").await?.metadata.generation;
    assert_eq!(pinned.observed_generation, generation);
    let yaml = kubectl(&["get", "appservice", "picked", "-n", ns.name(), "-o", "yaml"])?;
    assert!(yaml.contains("type: ImagePinned"), "{yaml}");
    let event = wait_event(&client, ns.name(), "picked", EVENT).await?;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    let describe = kubectl(&["describe", "appservice", "picked", "-n", ns.name()])?;
    assert!(describe.contains(EVENT), "{describe}");

    // The 0.1.0 guest's AppService has neither.
    let spared = apps.get("spared").await?;
    assert_eq!(
        spared
            .status
            .as_ref()
            .and_then(|s| s.guest_digest.as_deref()),
        Some(default.as_str())
    );
    assert!(condition(&spared, CONDITION).is_none());
    assert!(
        events(&client, ns.name(), "spared", EVENT)
            .await?
            .is_empty()
    );

    // A reconcile that changes nothing (a label outside the selector) records no Event again.
    let touch = json!({"metadata": {"labels": {"touched": "yes"}}});
    apps.patch("picked", &PatchParams::default(), &Patch::Merge(&touch))
        .await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let again = events(&client, ns.name(), "picked", EVENT).await?;
    assert_eq!(again.len(), 1, "{again:?}");
    assert!(again[0].series.is_none(), "recorded again: {:?}", again[0]);

    // A pinned image: the condition turns True and the guest reports no Event.
    let pinned_image = format!("nginx@sha256:{}", "a".repeat(64));
    let spec = json!({"spec": {"image": pinned_image}});
    apps.patch("picked", &PatchParams::default(), &Patch::Merge(&spec))
        .await?;
    wait::until("ImagePinned to turn True", CONVERGE, || async {
        let app = apps.get("picked").await?;
        Ok(condition(&app, CONDITION)
            .filter(|c| c.status == "True" && c.observed_generation == app.metadata.generation)
            .cloned())
    })
    .await?;

    // Back to the 0.1.0 guest: its render reports nothing, so the guest's condition is removed.
    push(ns.name(), guest::default_guest(), None).await?;
    wait::until("the 0.2.0 condition to be removed", CONVERGE, || async {
        let app = apps.get("picked").await?;
        let back =
            app.status.as_ref().and_then(|s| s.guest_digest.as_deref()) == Some(default.as_str());
        Ok((back && condition(&app, CONDITION).is_none()).then_some(()))
    })
    .await?;
    Ok(())
}

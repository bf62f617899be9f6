//! Pinned digests against the local control plane: a pin covers the canary as well as the
//! stable guest, binds a guest already running, can be set outside the ConfigMap (the `run`
//! flags), and `guest push` refuses what a pin would reject.

use app_operator::consts::{
    ANNOTATION_GUEST_MESSAGE, ANNOTATION_GUEST_PIN, ANNOTATION_GUEST_STATE, GUEST_CONFIGMAP,
};
use app_operator::guest;
use app_operator::swap::pin::Pins;
use app_operator::testing::hostile_guest;
use app_operator_e2e::appservice::{CONVERGE, create, sample_named};
use app_operator_e2e::swap::{Options, SwapOperator, push, wait_digest, with_custom_section};
use app_operator_e2e::{TestNamespace, client, wait};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

#[tokio::test]
async fn pins_cover_the_canary_and_bind_a_running_guest() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "swap-pins").await?;
    let hostile = guest::digest(hostile_guest());
    // As `run --canary-pin <hostile>` would.
    let pins = Pins {
        stable: None,
        canary: Some(hostile.clone()),
    };
    let options = Options {
        pins,
        ..Options::default()
    };
    let operator = SwapOperator::start_with(&client, ns.name(), options).await?;
    let mut web = sample_named("web");
    web.metadata.labels = Some([("track".to_owned(), "canary".to_owned())].into());
    create(&client, ns.name(), &web).await?;
    create(&client, ns.name(), &sample_named("api")).await?;

    // The stable guest is not pinned by the flags.
    let stable = with_custom_section(guest::default_guest(), "e2e-stable");
    push(ns.name(), &stable, None).await?;
    let stable_digest = guest::digest(&stable);
    wait_digest(&client, ns.name(), "api", &stable_digest).await?;

    // A canary of another digest is rejected, naming the flag.
    let other = with_custom_section(hostile_guest(), "e2e-other");
    let err = push(ns.name(), &other, Some("track=canary"))
        .await
        .expect_err("a canary the flag does not pin");
    let message = format!("{err:#}");
    assert!(
        message.contains(&format!(
            "the canary guest {} does not match the pin {hostile} (--canary-pin)",
            guest::digest(&other)
        )),
        "{message}"
    );
    assert!(operator.guests.current().canary.is_none());

    // The pinned canary is put in force.
    push(ns.name(), hostile_guest(), Some("track=canary")).await?;
    wait_digest(&client, ns.name(), "web", &hostile).await?;

    // A pin on the ConfigMap that the running stable guest does not match: rejected, although
    // that guest is already running (it stays, nothing else to run).
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    let wrong = guest::digest(b"another guest");
    let pin = json!({"metadata": {"annotations": {ANNOTATION_GUEST_PIN: wrong}}});
    cms.patch(
        GUEST_CONFIGMAP,
        &PatchParams::default(),
        &Patch::Merge(&pin),
    )
    .await?;
    let message = wait::until("the pin to reject the running guest", CONVERGE, || async {
        let cm = cms.get(GUEST_CONFIGMAP).await?;
        let annotations = cm.annotations();
        let rejected =
            annotations.get(ANNOTATION_GUEST_STATE).map(String::as_str) == Some("Rejected");
        Ok(annotations
            .get(ANNOTATION_GUEST_MESSAGE)
            .filter(|_| rejected)
            .cloned())
    })
    .await?;
    assert_eq!(
        message,
        format!(
            "the stable guest {stable_digest} does not match the pin {wrong} (annotation \
             {ANNOTATION_GUEST_PIN})"
        )
    );
    assert_eq!(operator.guests.current().stable.digest(), stable_digest);

    // `guest push` refuses, before writing, a guest the ConfigMap's pin would reject.
    let err = push(ns.name(), hostile_guest(), None)
        .await
        .expect_err("a push against the pin");
    let message = format!("{err:#}");
    assert!(
        message.contains(&format!("pins the stable guest to {wrong}"))
            && message.contains("push with --pin to move the pin"),
        "{message}"
    );
    let cm = cms.get(GUEST_CONFIGMAP).await?;
    let held = cm
        .binary_data
        .as_ref()
        .and_then(|d| d.get("guest.wasm"))
        .map(|b| guest::digest(&b.0));
    assert_eq!(
        held,
        Some(stable_digest),
        "the refused push wrote the guest"
    );
    Ok(())
}

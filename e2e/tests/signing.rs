//! Signed guests against the local control plane: an operator that trusts one key (as
//! `--guest-trusted-key` does) rejects an unsigned guest and one signed by another key, and
//! accepts, then renders every AppService with, one signed by the trusted key.

use std::path::PathBuf;
use std::sync::Arc;

use app_operator::cli::sign;
use app_operator::consts::{
    ANNOTATION_GUEST_ACTIVE, ANNOTATION_GUEST_DIGEST, ANNOTATION_GUEST_MESSAGE,
    ANNOTATION_GUEST_STATE, GUEST_CONFIGMAP, GUEST_SIGNATURE_KEY,
};
use app_operator::guest::{default_guest, digest};
use app_operator::metrics::KindLabel;
use app_operator::swap::trust::TrustedKeys;
use app_operator::testing::tiered_guest;
use app_operator_e2e::appservice::{create, events, sample_named, wait_event};
use app_operator_e2e::swap::{Options, SwapOperator, push, push_args, push_with, wait_digest};
use app_operator_e2e::{TestNamespace, client};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, ResourceExt};

/// The test keys, made with openssl (see the README there).
fn key(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../host/tests/fixtures/keys")
        .join(name)
}

/// The guest ConfigMap's state and message annotations, and the digest it says is in force.
async fn status(cms: &Api<ConfigMap>) -> anyhow::Result<[Option<String>; 3]> {
    let cm = cms.get(GUEST_CONFIGMAP).await?;
    let annotation = |key| cm.annotations().get(key).cloned();
    Ok([
        annotation(ANNOTATION_GUEST_STATE),
        annotation(ANNOTATION_GUEST_MESSAGE),
        annotation(ANNOTATION_GUEST_ACTIVE),
    ])
}

#[tokio::test]
async fn only_guests_signed_by_a_trusted_key_are_accepted() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "signing").await?;
    let keys = TrustedKeys::load(&[key("trusted.pub.pem")])?;
    let operator = SwapOperator::start_with(
        &client,
        ns.name(),
        Options {
            trusted_keys: Some(Arc::new(keys)),
            ..Options::default()
        },
    )
    .await?;
    let default = digest(default_guest());
    let tiered = digest(tiered_guest());
    create(&client, ns.name(), &sample_named("web")).await?;
    let before = wait_digest(&client, ns.name(), "web", &default).await?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());

    // (a) An unsigned guest.
    let err = push(ns.name(), tiered_guest(), None)
        .await
        .expect_err("an unsigned guest is rejected");
    let unsigned = format!(
        "the stable guest {tiered} is not signed, and --guest-trusted-key requires a signature"
    );
    assert!(format!("{err:#}").contains(&unsigned), "{err:#}");
    let [state, message, active] = status(&cms).await?;
    assert_eq!(state.as_deref(), Some("Rejected"));
    assert_eq!(message.as_deref(), Some(unsigned.as_str()));
    assert_eq!(active.as_deref(), Some(default.as_str()));
    let event = wait_event(&client, ns.name(), GUEST_CONFIGMAP, "GuestRejected").await?;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.note.as_deref(), Some(unsigned.as_str()));

    // (b) A guest signed by a key the operator does not trust.
    let mut args = push_args(ns.name(), tiered_guest(), None)?;
    args.sign_key = Some(key("untrusted.key.pem"));
    let err = push_with(args)
        .await
        .expect_err("an untrusted signature is rejected");
    let untrusted = format!(
        "the stable guest {tiered} fails the signature check: the signature does not verify with any trusted key"
    );
    assert!(format!("{err:#}").contains(&untrusted), "{err:#}");
    let [state, message, active] = status(&cms).await?;
    assert_eq!(state.as_deref(), Some("Rejected"));
    assert_eq!(message.as_deref(), Some(untrusted.as_str()));
    assert_eq!(active.as_deref(), Some(default.as_str()));
    // Each note is an Event of its own (swap::note_recorder), so this one reads back.
    let rejected = events(&client, ns.name(), GUEST_CONFIGMAP, "GuestRejected").await?;
    assert!(
        rejected
            .iter()
            .any(|e| e.note.as_deref() == Some(untrusted.as_str())),
        "{rejected:?}"
    );

    // Neither was loaded: the default guest is in force and the Deployment untouched.
    assert_eq!(operator.guests.current().stable.digest(), default);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.name());
    let d = deployments.get("web").await?;
    assert_eq!(d.metadata.generation, before.metadata.generation);
    assert_eq!(d.annotations().get(ANNOTATION_GUEST_DIGEST), Some(&default));

    // (c) Signed with the trusted key by `guest sign`, pushed with `--signature`.
    let mut args = push_args(ns.name(), tiered_guest(), None)?;
    let signature = args.file.with_extension("wasm.sig");
    sign::exec(sign::Args {
        file: args.file.clone(),
        key: key("trusted.key.pem"),
        output: None,
    })
    .await?;
    args.signature = Some(signature.clone());
    push_with(args).await?;
    let d = wait_digest(&client, ns.name(), "web", &tiered).await?;
    let tier = d
        .spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.as_ref())
        .and_then(|l| l.get("app.kudevops.io/tier"));
    assert_eq!(tier.map(String::as_str), Some("web"));
    let [state, message, active] = status(&cms).await?;
    assert_eq!(state.as_deref(), Some("Active"));
    assert_eq!(message, None);
    assert_eq!(active.as_deref(), Some(tiered.as_str()));
    let cm = cms.get(GUEST_CONFIGMAP).await?;
    let stored = cm
        .binary_data
        .as_ref()
        .and_then(|d| d.get(GUEST_SIGNATURE_KEY));
    assert_eq!(stored.map(|b| &b.0), Some(&std::fs::read(&signature)?));

    // (d) With a signed stable guest, an unsigned canary is rejected all the same.
    let err = push(ns.name(), default_guest(), Some("track=canary"))
        .await
        .expect_err("an unsigned canary is rejected");
    let canary = format!("the canary guest {default} is not signed");
    assert!(format!("{err:#}").contains(&canary), "{err:#}");
    let set = operator.guests.current();
    assert_eq!(set.stable.digest(), tiered);
    assert!(set.canary.is_none());

    assert_eq!(operator.metrics.guest_swaps.get(), 1);
    let rejections = operator
        .metrics
        .guest_rejections
        .get_or_create(&KindLabel { kind: "signature" })
        .get();
    assert_eq!(rejections, 3);
    Ok(())
}

//! Guests by reference on the local control plane, with a real registry (TLS, basic auth): a
//! guest pushed with `guest push --to` converges the fleet; restarted with the registry down,
//! the operator keeps it from the on-disk cache; a tampered artifact, an unauthorised pull and
//! an artifact that is not a component are each rejected with a clear Event, the last good
//! guest kept. Restarted with the registry down and no cache (a new Pod), the operator waits for
//! the guest in force, not ready, rather than rendering the fleet with its base guest; and it
//! takes rotated registry credentials without a restart.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use app_operator::cli::registry::RegistryArgs;
use app_operator::consts::{
    ANNOTATION_GUEST_ACTIVE, ANNOTATION_GUEST_MESSAGE, ANNOTATION_GUEST_STATE, GUEST_CONFIGMAP,
    GUEST_KEY, GUEST_REF_KEY,
};
use app_operator::crd::AppService;
use app_operator::guest;
use app_operator::oci::cache::Cache;
use app_operator::oci::reference::Tagged;
use app_operator::oci::{self, Credentials, Fetcher, Limits};
use app_operator::readiness::Verdict;
use app_operator::swap::record;
use app_operator::swap::trust::TrustedKeys;
use app_operator::testing::tiered_guest;
use app_operator_e2e::appservice::{CONVERGE, create, events, sample_named};
use app_operator_e2e::registry::Registry;
use app_operator_e2e::swap::{self, Options, SwapOperator, push_args, push_with, wait_digest};
use app_operator_e2e::{TestNamespace, client, wait};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

const APPS: [&str; 2] = ["alpha", "beta"];

/// The operator's fetcher: `credentials`, the registry's CA, the cache in `cache`.
fn fetcher(registry: &Registry, credentials: Credentials, cache: &Path) -> anyhow::Result<Fetcher> {
    let client = oci::Registry::new(oci::client::Options {
        credentials,
        ca_file: Some(registry.ca.clone()),
        limits: Limits::default(),
    })?;
    Ok(Fetcher::new(client, Some(Cache::new(cache))))
}

async fn start(client: &kube::Client, ns: &str, fetcher: Fetcher) -> anyhow::Result<SwapOperator> {
    let options = Options {
        fetcher: Some(fetcher),
        ..Options::default()
    };
    SwapOperator::start_with(client, ns, options).await
}

/// `guest push FILE --to REGISTRY/REPO:v1` with the registry's credentials and CA.
fn push_to(
    ns: &str,
    registry: &Registry,
    wasm: &[u8],
    repo: &str,
) -> anyhow::Result<app_operator::cli::push::Args> {
    let mut args = push_args(ns, wasm, None)?;
    args.to = Some(format!("{}/{repo}:v1", registry.addr));
    args.registry = RegistryArgs {
        registry_config: Some(registry.dockerconfig.clone()),
        registry_ca: Some(registry.ca.clone()),
        ..RegistryArgs::default()
    };
    Ok(args)
}

/// Waits until the guest ConfigMap says Rejected with a message containing `expected` and an
/// Event GuestRejected says the same (each note is an Event of its own); checks the last good
/// guest, `good`, stays in force.
async fn assert_rejected(
    client: &kube::Client,
    ns: &str,
    operator: &SwapOperator,
    good: &str,
    expected: &str,
) -> anyhow::Result<()> {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let what = format!("the guest ConfigMap to say Rejected: {expected}");
    let message = wait::until(&what, CONVERGE, || async {
        let cm = cms.get(GUEST_CONFIGMAP).await?;
        let a = cm.annotations();
        let rejected = a.get(ANNOTATION_GUEST_STATE).map(String::as_str) == Some("Rejected");
        Ok(rejected
            .then(|| a.get(ANNOTATION_GUEST_MESSAGE).cloned())
            .flatten()
            .filter(|m| m.contains(expected)))
    })
    .await?;
    let cm = cms.get(GUEST_CONFIGMAP).await?;
    assert_eq!(
        cm.annotations()
            .get(ANNOTATION_GUEST_ACTIVE)
            .map(String::as_str),
        Some(good),
        "{message}"
    );
    assert_eq!(operator.guests.current().stable.digest(), good, "{message}");
    let what = format!("an Event GuestRejected saying {expected}");
    wait::until(&what, CONVERGE, || async {
        let found = events(client, ns, GUEST_CONFIGMAP, "GuestRejected").await?;
        Ok(found
            .into_iter()
            .find(|e| e.note.as_deref().is_some_and(|n| n.contains(expected)))
            .map(|_| ()))
    })
    .await?;
    for name in APPS {
        wait_digest(client, ns, name, good).await?;
    }
    Ok(())
}

#[tokio::test]
async fn guests_by_reference_converge_survive_the_registry_and_reject_bad_artifacts()
-> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "oci-swap").await?;
    let dir: PathBuf =
        std::env::temp_dir().join(format!("app-operator-oci-swap-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cache = dir.join("cache");
    let registry = Registry::start(&dir.join("registry"))?;

    // A guest pushed by `guest push --to` converges the fleet; the ConfigMap and the record
    // hold its digest reference, not its bytes.
    let operator = start(
        &client,
        ns.name(),
        fetcher(&registry, registry.credentials()?, &cache)?,
    )
    .await?;
    let default = guest::digest(guest::default_guest());
    for name in APPS {
        create(&client, ns.name(), &sample_named(name)).await?;
        wait_digest(&client, ns.name(), name, &default).await?;
    }
    push_with(push_to(
        ns.name(),
        &registry,
        tiered_guest(),
        "guests/tiered",
    )?)
    .await?;
    let tiered = guest::digest(tiered_guest());
    for name in APPS {
        wait_digest(&client, ns.name(), name, &tiered).await?;
    }
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    let cm = cms.get(GUEST_CONFIGMAP).await?;
    let reference = cm
        .data
        .as_ref()
        .and_then(|d| d.get(GUEST_REF_KEY))
        .cloned()
        .expect("guest.ref");
    assert!(
        reference.starts_with(&format!("{}/guests/tiered@sha256:", registry.addr)),
        "{reference}"
    );
    assert!(!cm.binary_data.unwrap_or_default().contains_key(GUEST_KEY));
    let recorded = cms.get(&record::name(GUEST_CONFIGMAP)).await?;
    assert_eq!(
        recorded.data.as_ref().and_then(|d| d.get(GUEST_REF_KEY)),
        Some(&reference)
    );
    assert_eq!(
        operator
            .metrics
            .guest_fetches
            .get_or_create(&origin("registry"))
            .get(),
        1
    );
    operator.stop().await;

    // Restarted with the registry down: the guest stays in force, from the on-disk cache.
    registry.stop()?;
    let operator = start(
        &client,
        ns.name(),
        fetcher(&registry, registry.credentials()?, &cache)?,
    )
    .await?;
    assert_eq!(operator.guests.current().stable.digest(), tiered);
    assert_eq!(
        operator
            .metrics
            .guest_fetches
            .get_or_create(&origin("cache"))
            .get(),
        1
    );
    let restored = events(&client, ns.name(), GUEST_CONFIGMAP, "GuestRestored").await?;
    assert!(
        restored.iter().any(|e| e
            .note
            .as_deref()
            .is_some_and(|n| n.contains("read from the on-disk cache"))),
        "{restored:?}"
    );
    for name in APPS {
        wait_digest(&client, ns.name(), name, &tiered).await?;
    }
    operator.stop().await;

    // The registry back (on another port): bad artifacts, one at a time.
    let registry = Registry::start(&dir.join("registry"))?;
    let operator = start(
        &client,
        ns.name(),
        fetcher(&registry, registry.credentials()?, &cache)?,
    )
    .await?;
    let pusher = registry.client(Limits::default())?;

    // Tampered: the registry serves other bytes than the manifest's digest.
    let candidate = swap::with_custom_section(tiered_guest(), "tampered");
    let target = Tagged::parse(&format!("{}/guests/tampered:v1", registry.addr))?;
    let pinned = pusher.push(&target, &candidate).await?;
    let mut other = candidate.clone();
    let at = other.len() - 1;
    other[at] ^= 0xff;
    std::fs::write(registry.blob_file(&guest::digest(&candidate)), &other)?;
    let patch = json!({ "data": { GUEST_REF_KEY: pinned.to_string() } });
    cms.patch(
        GUEST_CONFIGMAP,
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    assert_rejected(&client, ns.name(), &operator, &tiered, "hashes to").await?;

    // Not a component: bytes in an `application/wasm` layer that do not load.
    let err = push_with(push_to(
        ns.name(),
        &registry,
        b"not a component",
        "guests/garbage",
    )?)
    .await
    .expect_err("garbage");
    assert!(
        format!("{err:#}").contains("failed to load the stable guest"),
        "{err:#}"
    );
    assert_rejected(
        &client,
        ns.name(),
        &operator,
        &tiered,
        "failed to load the stable guest",
    )
    .await?;
    operator.stop().await;

    // Unauthorised: the operator's Secret holds a wrong password.
    let wrong = format!(
        r#"{{"auths": {{"{}": {{"username": "{}", "password": "wrong"}}}}}}"#,
        registry.addr, registry.user
    );
    let wrong = Credentials::parse(wrong.as_bytes(), "test")?;
    let operator = start(&client, ns.name(), fetcher(&registry, wrong, &cache)?).await?;
    assert_eq!(
        operator.guests.current().stable.digest(),
        tiered,
        "restored from the cache"
    );
    let candidate = swap::with_custom_section(tiered_guest(), "unauthorised");
    let err = push_with(push_to(ns.name(), &registry, &candidate, "guests/private")?)
        .await
        .expect_err("unauthorised");
    assert!(format!("{err:#}").contains("refused access"), "{err:#}");
    assert_rejected(&client, ns.name(), &operator, &tiered, "refused access").await?;
    operator.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// The Python example guest, pushed by `guest push --to`, converges the fleet. Restarted with
/// the registry down and an empty cache, the operator waits for it (not ready, saying why)
/// instead of rendering the fleet with the base guest, and takes it once the registry is back.
/// Restarted with a Secret holding a wrong password, it waits again, and takes the guest once
/// the Secret is fixed, without a restart.
#[tokio::test]
async fn a_restart_waits_for_the_guest_in_force_and_takes_rotated_credentials() -> anyhow::Result<()>
{
    let client = client().await?;
    let ns = TestNamespace::create(&client, "oci-wait").await?;
    let dir: PathBuf =
        std::env::temp_dir().join(format!("app-operator-oci-wait-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let registry = Registry::start(&dir.join("registry"))?;
    let python = app_operator::testing::example_guest("python").map_err(anyhow::Error::msg)?;
    let python_digest = guest::digest(&python);
    let options = |fetcher| Options {
        fetcher: Some(fetcher),
        // NB: precompiled once; the cache of pulled components is the fetcher's, apart.
        guest_cache_dir: Some(dir.join("precompiled")),
        ..Options::default()
    };

    let operator = SwapOperator::start_with(
        &client,
        ns.name(),
        options(fetcher(
            &registry,
            registry.credentials()?,
            &dir.join("cache-1"),
        )?),
    )
    .await?;
    for name in APPS {
        create(&client, ns.name(), &sample_named(name)).await?;
    }
    push_with(push_to(ns.name(), &registry, &python, "guests/python")?).await?;
    for name in APPS {
        wait_digest(&client, ns.name(), name, &python_digest).await?;
    }
    operator.stop().await;

    // A new Pod (no cache) while the registry is down: not ready, the fleet untouched.
    registry.stop()?;
    let operator = SwapOperator::spawn(
        &client,
        ns.name(),
        options(fetcher(
            &registry,
            registry.credentials()?,
            &dir.join("cache-2"),
        )?),
    )
    .await?;
    let why = wait_waiting(&operator, "failed to talk to the registry").await?;
    assert!(why.contains("waiting for the guests in force"), "{why}");
    let waiting = events(&client, ns.name(), GUEST_CONFIGMAP, "GuestRestoreWaiting").await?;
    assert!(!waiting.is_empty(), "no GuestRestoreWaiting Event");
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let apps: Api<AppService> = Api::namespaced(client.clone(), ns.name());
    for name in APPS {
        let status = apps.get(name).await?.status.unwrap_or_default();
        assert_eq!(
            status.guest_digest.as_deref(),
            Some(python_digest.as_str()),
            "{name}"
        );
    }
    let registry = registry.restart()?;
    operator.wait_ready().await?;
    assert_eq!(operator.guests.current().stable.digest(), python_digest);
    let notes = operator.readiness.notes().join("\n");
    assert!(
        notes.contains(&python_digest) && notes.contains("pulled from the registry"),
        "{notes}"
    );
    operator.stop().await;

    // The operator's Secret holds a wrong password: it waits; fixed, the guest is taken.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns.name());
    let secret = |password: &str| {
        let config = json!({ "auths": { registry.addr.as_str(): {
            "username": registry.user.as_str(), "password": password } } });
        Secret {
            metadata: kube::api::ObjectMeta {
                name: Some("registry".into()),
                ..Default::default()
            },
            type_: Some("kubernetes.io/dockerconfigjson".into()),
            data: Some(
                [(
                    ".dockerconfigjson".to_owned(),
                    ByteString(config.to_string().into_bytes()),
                )]
                .into(),
            ),
            ..Default::default()
        }
    };
    secrets
        .create(&PostParams::default(), &secret("wrong"))
        .await?;
    let from_secret = Fetcher::from_secret(
        &client,
        ns.name(),
        "registry",
        oci::client::Options {
            ca_file: Some(registry.ca.clone()),
            ..oci::client::Options::default()
        },
        Some(Cache::new(dir.join("cache-3"))),
    )
    .await?;
    let operator = SwapOperator::spawn(&client, ns.name(), options(from_secret)).await?;
    wait_waiting(&operator, "refused access").await?;
    secrets
        .replace(
            "registry",
            &PostParams::default(),
            &secret(&registry.password),
        )
        .await?;
    operator.wait_ready().await?;
    assert_eq!(operator.guests.current().stable.digest(), python_digest);
    for name in APPS {
        wait_digest(&client, ns.name(), name, &python_digest).await?;
    }
    operator.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// With `--guest-trusted-key`, a guest given by reference is checked like an inline one: its
/// signature sits beside the reference in the ConfigMap and must verify over the pulled bytes.
#[tokio::test]
async fn signed_guests_by_reference_are_checked_like_inline_ones() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "oci-signed").await?;
    let dir: PathBuf =
        std::env::temp_dir().join(format!("app-operator-oci-signed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let registry = Registry::start(&dir.join("registry"))?;
    let keys = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../host/tests/fixtures/keys");
    let trusted = TrustedKeys::load(&[keys.join("trusted.pub.pem")])?;
    let options = Options {
        trusted_keys: Some(Arc::new(trusted)),
        fetcher: Some(fetcher(
            &registry,
            registry.credentials()?,
            &dir.join("cache"),
        )?),
        ..Options::default()
    };
    let operator = SwapOperator::start_with(&client, ns.name(), options).await?;
    create(&client, ns.name(), &sample_named("web")).await?;
    let default = guest::digest(guest::default_guest());
    wait_digest(&client, ns.name(), "web", &default).await?;

    let mut args = push_to(ns.name(), &registry, tiered_guest(), "guests/signed")?;
    args.sign_key = Some(keys.join("untrusted.key.pem"));
    let err = push_with(args).await.expect_err("an untrusted signature");
    assert!(
        format!("{err:#}").contains("does not verify with any trusted key"),
        "{err:#}"
    );
    assert_eq!(operator.guests.current().stable.digest(), default);

    let mut args = push_to(ns.name(), &registry, tiered_guest(), "guests/signed")?;
    args.sign_key = Some(keys.join("trusted.key.pem"));
    push_with(args).await?;
    wait_digest(&client, ns.name(), "web", &guest::digest(tiered_guest())).await?;
    operator.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Waits until `operator` is not ready because it waits for the guests in force, with a reason
/// containing `expected`; returns the reason.
async fn wait_waiting(operator: &SwapOperator, expected: &str) -> anyhow::Result<String> {
    let what = format!("the operator to wait for the guests in force: {expected}");
    wait::until(&what, CONVERGE, || async {
        Ok(match operator.readiness.verdict() {
            Verdict::NotReady(why) if why.contains(expected) => Some(why),
            _ => None,
        })
    })
    .await
}

fn origin(origin: &'static str) -> app_operator::metrics::OriginLabel {
    app_operator::metrics::OriginLabel { origin }
}

/// Figures, not assertions: time from `guest push --to` to the guest in force (the push's own
/// wait, polling every 250 ms), cold (pulled, compiled) and warm (component and precompiled
/// form from the disk caches), for the tiered guest and for the Python example guest (18 MB;
/// `make guests`). The harness compiles in its own process, as `--guest-compile-in-process`
/// does. Run with `make bench-oci`.
#[tokio::test]
#[ignore = "bench: prints figures; run with `make bench-oci`"]
async fn bench_push_to_active() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "oci-bench").await?;
    let dir: PathBuf =
        std::env::temp_dir().join(format!("app-operator-oci-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let registry = Registry::start(&dir.join("registry"))?;
    let options = Options {
        fetcher: Some(fetcher(
            &registry,
            registry.credentials()?,
            &dir.join("cache").join("oci"),
        )?),
        guest_cache_dir: Some(dir.join("cache")),
        ..Options::default()
    };
    let operator = SwapOperator::start_with(&client, ns.name(), options).await?;
    for name in APPS {
        create(&client, ns.name(), &sample_named(name)).await?;
    }
    let python = app_operator::testing::example_guest("python").map_err(anyhow::Error::msg)?;
    for (what, wasm) in [("tiered", tiered_guest()), ("python", &python[..])] {
        let guest = swap::with_custom_section(wasm, "bench");
        let other = swap::with_custom_section(wasm, "bench-other");
        let timed = |wasm: &[u8]| {
            let args = push_to(ns.name(), &registry, wasm, "guests/bench");
            async move {
                let start = std::time::Instant::now();
                push_with(args?).await?;
                Ok::<_, anyhow::Error>(start.elapsed())
            }
        };
        let cold = timed(&guest).await?;
        let other = timed(&other).await?;
        let warm = timed(&guest).await?;
        println!(
            "guest push --to -> active, {what} ({} bytes): cold {:.0} ms (again, another \
             digest: {:.0} ms), warm {:.0} ms",
            guest.len(),
            cold.as_secs_f64() * 1e3,
            other.as_secs_f64() * 1e3,
            warm.as_secs_f64() * 1e3
        );
    }
    operator.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

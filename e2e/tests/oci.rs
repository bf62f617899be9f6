//! The registry client against a real registry (TLS with a CA of the test's own, basic auth):
//! a push and a verified pull, the cache, and each way a pull must fail: wrong or missing
//! credentials, an untrusted certificate, a tampered blob, a blob over the size limit and an
//! artifact that is not a wasm component. Needs no control plane.

use std::path::PathBuf;

use app_operator::guest;
use app_operator::oci::cache::Cache;
use app_operator::oci::fetch::Origin;
use app_operator::oci::reference::Tagged;
use app_operator::oci::{self, Credentials, Error, Fetcher, Limits, artifact};
use app_operator::testing::tiered_guest;
use app_operator_e2e::registry::Registry;
use serde_json::json;

fn state_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("app-operator-oci-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn target(registry: &Registry, repo: &str) -> anyhow::Result<Tagged> {
    Ok(Tagged::parse(&format!("{}/{repo}:v1", registry.addr))?)
}

#[tokio::test]
async fn a_pushed_guest_pulls_back_verified_and_cached() -> anyhow::Result<()> {
    let dir = state_dir("roundtrip");
    let registry = Registry::start(&dir.join("registry"))?;
    let client = registry.client(Limits::default())?;
    let pinned = client
        .push(&target(&registry, "guests/tiered")?, tiered_guest())
        .await?;
    let pulled = client.pull(&pinned).await?;
    assert_eq!(pulled.wasm, tiered_guest());
    assert_eq!(guest::digest(&pulled.manifest), pinned.digest());
    assert_eq!(
        client.resolve(&target(&registry, "guests/tiered")?).await?,
        pinned,
        "the tag names what was pushed"
    );

    let fetcher = Fetcher::new(client, Some(Cache::new(dir.join("cache"))));
    let first = fetcher.fetch(&pinned).await?;
    assert_eq!(
        (first.origin, &*first.wasm),
        (Origin::Registry, tiered_guest())
    );
    registry.stop()?;
    let second = fetcher.fetch(&pinned).await?;
    assert_eq!(
        (second.origin, &*second.wasm),
        (Origin::Cache, tiered_guest()),
        "the registry is down; the cache serves the guest"
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[tokio::test]
async fn wrong_credentials_and_an_untrusted_certificate_are_refused() -> anyhow::Result<()> {
    let dir = state_dir("auth");
    let registry = Registry::start(&dir.join("registry"))?;
    let pinned = registry
        .client(Limits::default())?
        .push(&target(&registry, "guests/auth")?, tiered_guest())
        .await?;
    let wrong = format!(
        r#"{{"auths": {{"{}": {{"username": "{}", "password": "wrong"}}}}}}"#,
        registry.addr, registry.user
    );
    for (what, credentials) in [
        (
            "a wrong password",
            Credentials::parse(wrong.as_bytes(), "test")?,
        ),
        ("no credentials", Credentials::default()),
    ] {
        let client = oci::Registry::new(oci::client::Options {
            credentials,
            ca_file: Some(registry.ca.clone()),
            limits: Limits::default(),
        })?;
        let err = client.pull(&pinned).await.expect_err(what);
        assert!(matches!(err, Error::Unauthorized { .. }), "{what}: {err:?}");
        assert!(!err.is_transient(), "{what}");
    }
    let untrusted = oci::Registry::new(oci::client::Options {
        credentials: registry.credentials()?,
        ..oci::client::Options::default()
    })?;
    let err = untrusted.pull(&pinned).await.expect_err("no CA");
    let chain = app_operator::error_chain(&err);
    assert!(
        chain.contains("certificate") || chain.contains("UnknownIssuer"),
        "{chain}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[tokio::test]
async fn a_tampered_blob_a_huge_blob_and_a_container_image_are_rejected() -> anyhow::Result<()> {
    let dir = state_dir("faults");
    let registry = Registry::start(&dir.join("registry"))?;
    let client = registry.client(Limits::default())?;

    // Tampered: the registry serves other bytes under the component's digest.
    let wasm = tiered_guest();
    let tampered = client
        .push(&target(&registry, "guests/tampered")?, wasm)
        .await?;
    let mut other = wasm.to_vec();
    other[wasm.len() / 2] ^= 0xff;
    std::fs::write(registry.blob_file(&guest::digest(wasm)), &other)?;
    let err = client.pull(&tampered).await.expect_err("tampered");
    assert!(matches!(err, Error::LayerDigest { .. }), "{err:?}");
    assert_eq!(err.kind(), "digest_mismatch");

    // Huge: over the limit, whether the manifest says so or not.
    let small = registry.client(Limits {
        max_guest_bytes: 1024,
    })?;
    let big = vec![7u8; 64 * 1024];
    let honest = small.push(&target(&registry, "guests/big")?, &big).await?;
    let err = small.pull(&honest).await.expect_err("declared too large");
    assert!(matches!(err, Error::TooLarge { .. }), "{err:?}");
    let big_digest = guest::digest(&big);
    let (config, _) = artifact::build(&big_digest, big.len());
    let lying = json!({
        "schemaVersion": 2,
        "mediaType": artifact::MANIFEST,
        "config": { "mediaType": artifact::WASM_CONFIG, "digest": guest::digest(&config), "size": config.len() },
        "layers": [{ "mediaType": artifact::WASM_LAYER, "digest": big_digest, "size": 10 }],
    });
    let lying = small
        .push_manifest(
            &target(&registry, "guests/lying")?,
            &serde_json::to_vec(&lying)?,
            &[&config, &big],
        )
        .await?;
    let err = small.pull(&lying).await.expect_err("sent too large");
    assert!(matches!(err, Error::TooLarge { .. }), "{err:?}");

    // A container image: not a wasm artifact.
    let image_config = br#"{"architecture":"amd64","os":"linux"}"#.to_vec();
    let layer = b"not a tarball".to_vec();
    let image = json!({
        "schemaVersion": 2,
        "mediaType": artifact::MANIFEST,
        "config": { "mediaType": "application/vnd.oci.image.config.v1+json", "digest": guest::digest(&image_config), "size": image_config.len() },
        "layers": [{ "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": guest::digest(&layer), "size": layer.len() }],
    });
    let image = client
        .push_manifest(
            &target(&registry, "guests/image")?,
            &serde_json::to_vec(&image)?,
            &[&image_config, &layer],
        )
        .await?;
    let err = client.pull(&image).await.expect_err("an image");
    assert!(matches!(err, Error::NotWasm { .. }), "{err:?}");

    // A digest the registry does not hold.
    let missing = oci::Pinned::parse(&format!(
        "{}/guests/tiered@{}",
        registry.addr,
        guest::digest(b"none")
    ))?;
    let err = client.pull(&missing).await.expect_err("missing");
    assert!(matches!(err, Error::NotFound { .. }), "{err:?}");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// What oras (the OCI artifact CLI) pushes, the operator pulls, with the empty config and with
/// the wasm config `wkg` writes; and what `guest push --to` pushes, oras reads back as the
/// same component.
#[tokio::test]
async fn guests_travel_both_ways_between_oras_and_the_operator() -> anyhow::Result<()> {
    let dir = state_dir("oras");
    let registry = Registry::start(&dir.join("registry"))?;
    let work = dir.join("work");
    std::fs::create_dir_all(&work)?;
    std::fs::write(work.join("guest.wasm"), tiered_guest())?;
    std::fs::write(work.join("config.json"), b"{}")?;
    let client = registry.client(Limits::default())?;
    let wasm_config = format!("config.json:{}", artifact::WASM_CONFIG);
    for (repo, config) in [("plain", None), ("wasm-config", Some(wasm_config.as_str()))] {
        let target = format!("{}/oras/{repo}:v1", registry.addr);
        let mut args = vec!["push", "--format", "go-template={{.digest}}", &target];
        args.extend(config.iter().flat_map(|c| ["--config", c]));
        args.push("guest.wasm:application/wasm");
        let digest = registry.oras(&work, &args)?;
        let pinned =
            oci::Pinned::parse(&format!("{}/oras/{repo}@{}", registry.addr, digest.trim()))?;
        let pulled = client.pull(&pinned).await?;
        assert_eq!(pulled.wasm, tiered_guest(), "pushed by oras ({repo})");
    }

    let pinned = client
        .push(&target(&registry, "guests/ours")?, tiered_guest())
        .await?;
    let manifest = registry.oras(&work, &["manifest", "fetch", &pinned.to_string()])?;
    let layer = artifact::wasm_layer(manifest.as_bytes()).map_err(anyhow::Error::msg)?;
    let blob = format!("{}/guests/ours@{}", registry.addr, layer.digest);
    registry.oras(&work, &["blob", "fetch", "--output", "fetched.wasm", &blob])?;
    assert_eq!(std::fs::read(work.join("fetched.wasm"))?, tiered_guest());
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

//! `make deploy IMG=...` and `make undeploy` (hack/deploy.sh): the image in `IMG` is the one the
//! Deployment runs, as kubebuilder's `kustomize edit set image` does, and nothing else of
//! `config/default` changes.
//!
//! NB: a real deploy would apply the shared CRD and cluster-wide RBAC, and `undeploy` would
//! delete the CRD under the other tests; so the cluster side is a server-side dry run into a
//! namespace of the test's own (`NAMESPACE=`), which the API server validates in full.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, bail};
use app_operator_e2e::cluster::kubeconfig_path;
use app_operator_e2e::{TestNamespace, client, kubectl};
use serde_json::Value;

/// The image of the example.
const IMG: &str = "registry.example/app-operator:v9";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs `make -s <args>` at the repository root against the tests' cluster; returns stdout.
fn make(args: &[&str]) -> anyhow::Result<String> {
    let output = Command::new("make")
        .arg("-s")
        .args(args)
        .current_dir(root())
        .env("KUBECONFIG", kubeconfig_path())
        .output()
        .context("failed to run make")?;
    if !output.status.success() {
        bail!(
            "make {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The documents of a multi-document YAML stream.
fn parse(yaml: &str) -> anyhow::Result<Vec<Value>> {
    serde_yaml_ng::Deserializer::from_str(yaml)
        .map(|doc| serde::Deserialize::deserialize(doc).context("invalid YAML"))
        .collect()
}

/// What `hack/deploy.sh build` renders for an `IMG`.
fn build(img: &str) -> anyhow::Result<Vec<Value>> {
    let output = Command::new(root().join("hack/deploy.sh"))
        .arg("build")
        .env("IMG", img)
        .env("KUBECONFIG", kubeconfig_path())
        .output()
        .context("failed to run hack/deploy.sh")?;
    if !output.status.success() {
        bail!(
            "hack/deploy.sh build failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    parse(&String::from_utf8_lossy(&output.stdout))
}

/// The manager container's image pointer in a Deployment.
const IMAGE: &str = "/spec/template/spec/containers/0/image";

fn deployment(docs: &[Value]) -> anyhow::Result<&Value> {
    docs.iter()
        .find(|d| d["kind"] == "Deployment")
        .context("no Deployment")
}

#[test]
fn img_replaces_the_image_and_nothing_else() -> anyhow::Result<()> {
    let config = root().join("config/default");
    let plain = parse(&kubectl(&["kustomize", &config.to_string_lossy()])?)?;
    // The default IMG is config/manager's own image: the same manifests, byte for byte.
    assert_eq!(build("app-operator:0.1.0")?, plain);

    for (img, expected) in [
        (IMG, IMG),
        (
            "localhost:5000/app-operator",
            "localhost:5000/app-operator:latest",
        ),
        (
            "registry.example/app-operator@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "registry.example/app-operator@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ),
    ] {
        let mut docs = build(img)?;
        let image = deployment(&docs)?.pointer(IMAGE).cloned();
        assert_eq!(image, Some(Value::from(expected)), "IMG={img}");
        // Put the original image back: everything else must equal config/default.
        let original = deployment(&plain)?.pointer(IMAGE).cloned();
        let slot = docs
            .iter_mut()
            .find(|d| d["kind"] == "Deployment")
            .and_then(|d| d.pointer_mut(IMAGE))
            .context("no image")?;
        *slot = original.context("no image in config/default")?;
        assert_eq!(docs, plain, "IMG={img} changed more than the image");
    }
    Ok(())
}

#[tokio::test]
async fn make_deploy_img_passes_a_server_side_dry_run_with_that_image() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "deploy-img").await?;
    let namespace = format!("NAMESPACE={}", ns.name());
    let img = format!("IMG={IMG}");

    let out = make(&["deploy", &img, &namespace, "DRY_RUN=server"])?;
    let list: Value = serde_json::from_str(&out).context("deploy printed no JSON")?;
    let items = list["items"].as_array().context("no items")?;
    let deployment = deployment(items)?;
    // As the API server would store it: defaulted and admitted, in the namespace given.
    assert_eq!(deployment["metadata"]["namespace"], ns.name());
    assert_eq!(deployment.pointer(IMAGE), Some(&Value::from(IMG)));
    assert!(deployment["metadata"]["uid"].is_string(), "{deployment}");
    for kind in [
        "CustomResourceDefinition",
        "ClusterRole",
        "ConfigMap",
        "Service",
    ] {
        assert!(
            items.iter().any(|i| i["kind"] == kind),
            "no {kind} in {out}"
        );
    }
    // A dry run wrote nothing.
    let live = kubectl(&["get", "deployments", "-n", ns.name(), "-o", "name"])?;
    assert!(live.trim().is_empty(), "{live}");

    // undeploy removes the same objects: the namespace is the one deploy used.
    let out = make(&["undeploy", &img, &namespace, "DRY_RUN=server"])?;
    let gone = format!("namespace \"{}\" deleted (server dry run)", ns.name());
    assert!(out.contains(&gone), "{out}");
    Ok(())
}

//! The deployable manifests in `config/` against the local control plane: `config/default`
//! passes a server-side dry run (schema, admission and Pod Security included), the samples too,
//! and the ServiceMonitor in `config/prometheus` selects the metrics Service; the manager mounts
//! the Secret of trusted guest keys, and the documented overlay turns the check on.

use std::path::PathBuf;

use anyhow::Context;
use app_operator_e2e::operator::install_crd;
use app_operator_e2e::{TestNamespace, client, kubectl, kubectl_with_stderr};
use serde_json::Value;

/// Namespace `config/default` deploys into.
const OPERATOR_NAMESPACE: &str = "app-operator-system";

fn config_dir(name: &str) -> String {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../config")
        .join(name);
    dir.to_string_lossy().into_owned()
}

/// The documents `kubectl kustomize <dir>` renders.
fn build(dir: &str) -> anyhow::Result<Vec<Value>> {
    let yaml = kubectl(&["kustomize", dir])?;
    serde_yaml_ng::Deserializer::from_str(&yaml)
        .map(|doc| serde::Deserialize::deserialize(doc).context("kustomize printed invalid YAML"))
        .collect()
}

fn find<'a>(docs: &'a [Value], kind: &str) -> anyhow::Result<&'a Value> {
    docs.iter()
        .find(|d| d["kind"] == kind)
        .with_context(|| format!("no {kind} in the build"))
}

#[tokio::test]
async fn default_passes_a_server_side_dry_run() -> anyhow::Result<()> {
    // NB: fails with a hint when no control plane answers.
    let _client = client().await?;
    let dir = config_dir("default");
    let docs = build(&dir)?;

    // NB: a dry run creates nothing, so the namespaced objects would not find their namespace;
    // create it for real first (with its Pod Security labels), and remove it after if it was new.
    let namespace = find(&docs, "Namespace")?;
    assert_eq!(namespace["metadata"]["name"], OPERATOR_NAMESPACE);
    // NB: a namespace still terminating (e.g. from the previous run) accepts no new content.
    let gone = format!("namespace/{OPERATOR_NAMESPACE}");
    kubectl(&["wait", "--for=delete", &gone, "--timeout=120s"])?;
    let existed = kubectl(&["get", "namespace", OPERATOR_NAMESPACE, "--ignore-not-found"])?;
    let file = std::env::temp_dir().join(format!("app-operator-ns-{}.json", std::process::id()));
    std::fs::write(&file, serde_json::to_vec(namespace)?)?;
    kubectl(&["apply", "-f", &file.to_string_lossy()])?;
    let _ = std::fs::remove_file(&file);

    let result = kubectl_with_stderr(&["apply", "--dry-run=server", "-k", &dir]);
    if existed.trim().is_empty() {
        kubectl(&["delete", "namespace", OPERATOR_NAMESPACE, "--timeout=120s"])?;
    }
    let (stdout, stderr) = result?;
    for kind in [
        "customresourcedefinition.apiextensions.k8s.io/appservices.apps.kudevops.io",
        "serviceaccount/app-operator-controller-manager",
        "clusterrole.rbac.authorization.k8s.io/app-operator-manager-role",
        "clusterrolebinding.rbac.authorization.k8s.io/app-operator-manager-rolebinding",
        "role.rbac.authorization.k8s.io/app-operator-leader-election-role",
        "role.rbac.authorization.k8s.io/app-operator-guest-configmap-role",
        "service/app-operator-controller-manager-metrics-service",
        "deployment.apps/app-operator-controller-manager",
    ] {
        assert!(stdout.contains(kind), "{kind} missing from:\n{stdout}");
    }
    // The namespace enforces and warns on the `restricted` Pod Security Standard; a Deployment
    // whose Pods would violate it draws a warning.
    assert!(
        !stderr.contains("PodSecurity"),
        "the manager Deployment violates Pod Security `restricted`:\n{stderr}"
    );
    Ok(())
}

#[tokio::test]
async fn manager_runs_hardened_with_leader_election() -> anyhow::Result<()> {
    let docs = build(&config_dir("default"))?;
    let deployment = find(&docs, "Deployment")?;
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    assert_eq!(pod["serviceAccountName"], "app-operator-controller-manager");
    let container = &pod["containers"][0];
    let security = &container["securityContext"];
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["capabilities"]["drop"], serde_json::json!(["ALL"]));
    assert!(container["resources"]["requests"].is_object());
    assert!(container["resources"]["limits"].is_object());
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    let args = container["args"].as_array().context("no args")?;
    assert!(args.iter().any(|a| a == "--leader-elect"), "{args:?}");
    Ok(())
}

/// Where the Deployment mounts the Secret of trusted guest keys.
const TRUSTED_KEYS: &str = "/etc/app-operator/trusted-keys";

#[test]
fn manager_mounts_the_trusted_keys_secret_read_only() -> anyhow::Result<()> {
    let docs = build(&config_dir("default"))?;
    let pod = &find(&docs, "Deployment")?["spec"]["template"]["spec"];
    let volume = &pod["volumes"][0];
    assert_eq!(volume["name"], "guest-trusted-keys");
    assert_eq!(
        volume["secret"]["secretName"],
        "app-operator-guest-trusted-keys"
    );
    assert_eq!(volume["secret"]["optional"], true);
    let mount = &pod["containers"][0]["volumeMounts"][0];
    assert_eq!(mount["name"], "guest-trusted-keys");
    assert_eq!(mount["mountPath"], TRUSTED_KEYS);
    assert_eq!(mount["readOnly"], true);
    // Off by default: the flag is the admins' choice (see the overlay below).
    let args = pod["containers"][0]["args"].to_string();
    assert!(!args.contains("--guest-trusted-key"), "{args}");
    Ok(())
}

/// The overlay of docs/operations.md ("Signed guests") that turns signature checking on.
#[test]
fn the_signed_guests_overlay_points_the_flag_at_the_secret() -> anyhow::Result<()> {
    let overlay = std::env::temp_dir().join(format!("app-operator-signed-{}", std::process::id()));
    std::fs::create_dir_all(&overlay)?;
    // NB: kustomize takes only a relative path to a base.
    let up = "../".repeat(overlay.components().count() - 1);
    let base = std::fs::canonicalize(config_dir("default"))?;
    let base = format!("{up}{}", base.to_string_lossy().trim_start_matches('/'));
    let kustomization = format!(
        "resources:\n- {base}\npatches:\n- target:\n    kind: Deployment\n    \
         name: app-operator-controller-manager\n  patch: |-\n    - op: add\n      \
         path: /spec/template/spec/containers/0/args/-\n      \
         value: --guest-trusted-key={TRUSTED_KEYS}\n"
    );
    std::fs::write(overlay.join("kustomization.yaml"), kustomization)?;
    let docs = build(&overlay.to_string_lossy());
    let _ = std::fs::remove_dir_all(&overlay);
    let docs = docs?;
    let args = &find(&docs, "Deployment")?["spec"]["template"]["spec"]["containers"][0]["args"];
    let flag = format!("--guest-trusted-key={TRUSTED_KEYS}");
    assert!(
        args.as_array()
            .is_some_and(|a| a.iter().any(|v| *v == flag.as_str())),
        "{args}"
    );
    Ok(())
}

#[tokio::test]
async fn samples_pass_a_server_side_dry_run() -> anyhow::Result<()> {
    let client = client().await?;
    install_crd(&client).await?;
    let ns = TestNamespace::create(&client, "manifests-samples").await?;
    let out = kubectl(&[
        "apply",
        "--dry-run=server",
        "-k",
        &config_dir("samples"),
        "-n",
        ns.name(),
    ])?;
    assert!(out.contains("appservice.apps.kudevops.io/nginx"), "{out}");
    Ok(())
}

/// NB: the ServiceMonitor CRD (prometheus-operator) is not installed on the local control
/// plane, so this checks the rendered ServiceMonitor against the metrics Service, not against
/// the API server.
#[tokio::test]
async fn service_monitor_selects_the_metrics_service() -> anyhow::Result<()> {
    let monitor = build(&config_dir("prometheus"))?;
    let monitor = find(&monitor, "ServiceMonitor")?;
    let default = build(&config_dir("default"))?;
    let service = default
        .iter()
        .find(|d| {
            d["kind"] == "Service"
                && d["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.ends_with("metrics-service"))
        })
        .context("no metrics Service in config/default")?;

    let selector = monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .context("the ServiceMonitor has no matchLabels")?;
    assert!(!selector.is_empty());
    for (key, value) in selector {
        assert_eq!(&service["metadata"]["labels"][key], value, "label {key}");
    }
    let port = &monitor["spec"]["endpoints"][0]["port"];
    let ports = service["spec"]["ports"].as_array().context("no ports")?;
    assert!(ports.iter().any(|p| &p["name"] == port), "port {port}");
    assert_eq!(monitor["spec"]["endpoints"][0]["path"], "/metrics");
    Ok(())
}

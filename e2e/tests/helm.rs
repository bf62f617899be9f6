//! The Helm chart `charts/app-operator`: it lints, it renders the objects of `config/default`
//! (same kinds, names, RBAC rules, pod spec and CRD, so the two cannot drift apart), its
//! namespace-scoped mode grants only that namespace, its output passes a server-side dry run
//! under Pod Security `restricted`, and `helm install` / `helm uninstall` work on the local
//! control plane, leaving the shared CRD in place.
//!
//! Helm is the one `hack/controlplane/build-helm.sh` builds (`$HELM`, exported by
//! `hack/controlplane/env.sh`), else `helm` from `PATH`.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, bail};
use app_operator_e2e::cluster::kubeconfig_path;
use app_operator_e2e::{TestNamespace, client, kubectl, kubectl_with_stderr};
use serde_json::{Value, json};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn chart() -> String {
    root()
        .join("charts/app-operator")
        .to_string_lossy()
        .into_owned()
}

/// Runs `helm <args>` against the tests' cluster and returns its stdout.
fn helm(args: &[&str]) -> anyhow::Result<String> {
    let program = std::env::var_os("HELM")
        .map(PathBuf::from)
        .filter(|p| p.exists())
        .unwrap_or_else(|| "helm".into());
    let output = Command::new(&program)
        .args(args)
        .env("KUBECONFIG", kubeconfig_path())
        .output()
        .with_context(|| {
            format!(
                "failed to run {} (hack/setup.sh builds helm; source hack/controlplane/env.sh)",
                program.display()
            )
        })?;
    if !output.status.success() {
        bail!(
            "helm {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The non-empty documents of a multi-document YAML stream.
fn parse(yaml: &str) -> anyhow::Result<Vec<Value>> {
    let docs: Vec<Value> = serde_yaml_ng::Deserializer::from_str(yaml)
        .map(|doc| serde::Deserialize::deserialize(doc).context("invalid YAML"))
        .collect::<anyhow::Result<_>>()?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// `helm template` of the chart as release `app-operator` in `namespace`, with `--set`s.
fn template(namespace: &str, sets: &[&str]) -> anyhow::Result<Vec<Value>> {
    let chart = chart();
    let mut args = vec![
        "template",
        "app-operator",
        &chart,
        "-n",
        namespace,
        "--include-crds",
    ];
    for set in sets {
        args.extend(["--set", set]);
    }
    parse(&helm(&args)?)
}

/// What `make deploy` applies.
fn config_default() -> anyhow::Result<Vec<Value>> {
    let dir = root().join("config/default");
    parse(&kubectl(&["kustomize", &dir.to_string_lossy()])?)
}

fn config_file(path: &str) -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(root().join("config").join(path))?;
    Ok(serde_yaml_ng::from_str(&text)?)
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> anyhow::Result<&'a Value> {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .with_context(|| format!("no {kind} {name}"))
}

/// Kind, name and namespace of each object.
fn identities(docs: &[Value]) -> BTreeSet<(String, String, String)> {
    docs.iter()
        .map(|d| {
            let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            (
                s(&d["kind"]),
                s(&d["metadata"]["name"]),
                s(&d["metadata"]["namespace"]),
            )
        })
        .collect()
}

const RBAC_KINDS: [&str; 4] = ["ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding"];

#[test]
fn chart_lints_in_both_modes() -> anyhow::Result<()> {
    let chart = chart();
    helm(&["lint", "--strict", &chart])?;
    helm(&[
        "lint",
        "--strict",
        &chart,
        "--set",
        "watchNamespace=apps,guestPolicy.podSecurity=restricted",
        "--set",
        "guestPolicy.trustedKeys.enabled=true,metrics.serviceMonitor.enabled=true",
    ])?;
    Ok(())
}

/// The chart's defaults render `config/default`: the same objects (but the Namespace, which
/// Helm leaves to `--create-namespace` or the admin), the same RBAC rules and bindings, the same
/// pod spec and the same CRD.
#[test]
fn chart_and_config_default_stay_equivalent() -> anyhow::Result<()> {
    let config = config_default()?;
    let chart = template("app-operator-system", &["image.tag=0.1.0"])?;

    let mut expected = identities(&config);
    expected.retain(|(kind, _, _)| kind != "Namespace");
    assert_eq!(identities(&chart), expected);

    for doc in config
        .iter()
        .filter(|d| RBAC_KINDS.contains(&d["kind"].as_str().unwrap_or_default()))
    {
        let name = doc["metadata"]["name"].as_str().unwrap_or_default();
        let theirs = find(&chart, doc["kind"].as_str().unwrap_or_default(), name)?;
        for field in ["rules", "roleRef", "subjects"] {
            assert_eq!(theirs[field], doc[field], "{field} of {name}");
        }
        // The aggregation labels of the user roles.
        for (key, value) in doc["metadata"]["labels"].as_object().into_iter().flatten() {
            if key.starts_with("rbac.authorization.k8s.io/") {
                assert_eq!(&theirs["metadata"]["labels"][key], value, "{key} of {name}");
            }
        }
    }

    let deployment = "app-operator-controller-manager";
    let ours = find(&config, "Deployment", deployment)?;
    let theirs = find(&chart, "Deployment", deployment)?;
    assert_eq!(theirs["spec"]["replicas"], ours["spec"]["replicas"]);
    let mut pod = theirs["spec"]["template"]["spec"].clone();
    // NB: Helm's default imagePullPolicy is explicit; config/ leaves it to the API server.
    pod["containers"][0]
        .as_object_mut()
        .context("no container")?
        .remove("imagePullPolicy");
    assert_eq!(pod, ours["spec"]["template"]["spec"]);

    let service = "app-operator-controller-manager-metrics-service";
    let ours = find(&config, "Service", service)?;
    let theirs = find(&chart, "Service", service)?;
    assert_eq!(theirs["spec"]["ports"], ours["spec"]["ports"]);

    let crd = "appservices.apps.kudevops.io";
    let ours = config_file("crd/apps.kudevops.io_appservices.yaml")?;
    assert_eq!(find(&chart, "CustomResourceDefinition", crd)?, &ours);
    Ok(())
}

/// Toggles: the ServiceMonitor (`config/prometheus`'s endpoints, selecting the metrics
/// Service), the guest policy flags, the guest ConfigMap's name in the args and the RBAC, and
/// leader election with its Role.
#[test]
fn values_turn_on_what_they_name() -> anyhow::Result<()> {
    let docs = template(
        "ops",
        &[
            "metrics.serviceMonitor.enabled=true",
            "guestPolicy.podSecurity=restricted",
            "guestPolicy.trustedKeys.enabled=true",
            "guestPolicy.trustedKeys.secretName=keys",
            "guest.configMap=policy",
            "leaderElection.enabled=false",
            "replicaCount=1",
            "image.repository=registry.example/app-operator,image.tag=v9",
            "guest.memoryMiB=32,guest.memoryBudgetMiB=128,guest.memoryReserveMiB=96",
        ],
    )?;
    let monitor = find(
        &docs,
        "ServiceMonitor",
        "app-operator-controller-manager-metrics-monitor",
    )?;
    let prometheus = config_file("prometheus/monitor.yaml")?;
    assert_eq!(
        monitor["spec"]["endpoints"],
        prometheus["spec"]["endpoints"]
    );
    let service = find(
        &docs,
        "Service",
        "app-operator-controller-manager-metrics-service",
    )?;
    for (key, value) in monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .context("no matchLabels")?
    {
        assert_eq!(&service["metadata"]["labels"][key], value, "label {key}");
    }

    let deployment = find(&docs, "Deployment", "app-operator-controller-manager")?;
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(
        pod["containers"][0]["image"],
        "registry.example/app-operator:v9"
    );
    assert_eq!(deployment["spec"]["replicas"], 1);
    assert_eq!(
        pod["containers"][0]["args"],
        json!([
            "run",
            "--log-format=json",
            "--guest-memory-mib=32",
            "--guest-memory-budget-mib=128",
            "--memory-reserve-mib=96",
            "--guest-configmap=policy",
            "--pod-security=restricted",
            "--guest-trusted-key=/etc/app-operator/trusted-keys"
        ])
    );
    assert_eq!(pod["volumes"][0]["secret"]["secretName"], "keys");
    let guest = find(&docs, "Role", "app-operator-guest-configmap-role")?;
    assert_eq!(guest["rules"][0]["resourceNames"], json!(["policy"]));
    assert_eq!(
        guest["rules"][1]["resourceNames"],
        json!(["policy-accepted"])
    );
    find(&docs, "ConfigMap", "policy-accepted")?;
    assert!(find(&docs, "Role", "app-operator-leader-election-role").is_err());
    Ok(())
}

/// `watchNamespace`: the controller's rules in a Role of that namespace only, and the one
/// Namespace object readable cluster-wide; no cluster-wide grant of the controller's rules.
#[test]
fn namespace_scoped_mode_grants_only_that_namespace() -> anyhow::Result<()> {
    let docs = template("ops", &["watchNamespace=apps"])?;
    let role = config_file("rbac/role.yaml")?;
    let (namespaces, rules): (Vec<Value>, Vec<Value>) = role["rules"]
        .as_array()
        .context("no rules")?
        .iter()
        .cloned()
        .partition(|r| r["resources"] == json!(["namespaces"]));
    assert_eq!(namespaces.len(), 1);

    let manager = find(&docs, "Role", "app-operator-manager-role")?;
    assert_eq!(manager["metadata"]["namespace"], "apps");
    assert_eq!(manager["rules"], Value::from(rules));
    let binding = find(&docs, "RoleBinding", "app-operator-manager-rolebinding")?;
    assert_eq!(binding["metadata"]["namespace"], "apps");
    assert_eq!(binding["subjects"][0]["namespace"], "ops");

    let reader = find(&docs, "ClusterRole", "app-operator-namespace-reader-role")?;
    let mut only_apps = namespaces[0].clone();
    only_apps["resourceNames"] = json!(["apps"]);
    assert_eq!(reader["rules"], json!([only_apps]));

    // No ClusterRole grants the controller's rules (only the users' aggregated roles remain).
    let cluster_roles: BTreeSet<_> = docs
        .iter()
        .filter(|d| d["kind"] == "ClusterRole")
        .filter_map(|d| d["metadata"]["name"].as_str())
        .collect();
    assert_eq!(
        cluster_roles,
        BTreeSet::from([
            "app-operator-appservice-editor-role",
            "app-operator-appservice-viewer-role",
            "app-operator-namespace-reader-role"
        ])
    );
    let args = &find(&docs, "Deployment", "app-operator-controller-manager")?["spec"]["template"]["spec"]
        ["containers"][0]["args"];
    assert!(
        args.as_array()
            .is_some_and(|a| a.iter().any(|v| v == "--namespace=apps")),
        "{args}"
    );
    Ok(())
}

/// Applies `docs` with `kubectl apply --dry-run=server`; returns stdout and stderr.
fn dry_run(docs: &[Value], what: &str) -> anyhow::Result<(String, String)> {
    let file = std::env::temp_dir().join(format!(
        "app-operator-helm-{what}-{}.json",
        std::process::id()
    ));
    let list = json!({"apiVersion": "v1", "kind": "List", "items": docs});
    std::fs::write(&file, serde_json::to_vec(&list)?)?;
    let result = kubectl_with_stderr(&[
        "apply",
        "--server-side",
        "--dry-run=server",
        "-f",
        &file.to_string_lossy(),
    ]);
    let _ = std::fs::remove_file(&file);
    result
}

#[tokio::test]
async fn template_passes_a_server_side_dry_run_in_both_modes() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "helm-template").await?;
    let apps = TestNamespace::create(&client, "helm-template-apps").await?;
    // The operator's namespace as config/manager labels it: a Deployment whose Pods would
    // violate `restricted` draws a warning.
    kubectl(&[
        "label",
        "namespace",
        ns.name(),
        "pod-security.kubernetes.io/enforce=restricted",
        "pod-security.kubernetes.io/warn=restricted",
    ])?;
    let watch = format!("watchNamespace={}", apps.name());
    for sets in [
        vec![],
        vec![watch.as_str(), "guestPolicy.podSecurity=restricted"],
    ] {
        let docs = template(ns.name(), &sets)?;
        let (stdout, stderr) = dry_run(&docs, ns.name())?;
        assert!(
            !stderr.contains("PodSecurity"),
            "the Deployment violates Pod Security `restricted`:\n{stderr}"
        );
        for doc in &docs {
            let name = doc["metadata"]["name"].as_str().unwrap_or_default();
            assert!(
                stdout.contains(&format!("/{name} ")),
                "{name} missing from:\n{stdout}"
            );
        }
    }
    Ok(())
}

/// Rules of a live RBAC object.
fn live_rules(kind: &str, name: &str, namespace: Option<&str>) -> anyhow::Result<Value> {
    let mut args = vec!["get", kind, name, "-o", "json"];
    if let Some(ns) = namespace {
        args.extend(["-n", ns]);
    }
    let object: Value = serde_json::from_str(&kubectl(&args)?)?;
    Ok(object["rules"].clone())
}

/// An installed release, uninstalled when dropped if the test did not (e.g. it panicked), so
/// that its cluster-scoped objects do not outlive the test's namespace.
struct Release {
    name: String,
    namespace: String,
}

impl Release {
    fn uninstall(mut self) -> anyhow::Result<()> {
        let name = std::mem::take(&mut self.name);
        helm(&["uninstall", &name, "-n", &self.namespace, "--wait"])?;
        Ok(())
    }
}

impl Drop for Release {
    fn drop(&mut self) {
        if !self.name.is_empty()
            && let Err(err) = helm(&["uninstall", &self.name, "-n", &self.namespace, "--wait"])
        {
            eprintln!("failed to uninstall release {}: {err:#}", self.name);
        }
    }
}

#[tokio::test]
async fn install_and_uninstall_keep_the_crd() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "helm-install").await?;
    // NB: a name of its own for the cluster-scoped objects (ClusterRoles and bindings), which
    // other tests or a real deploy may hold under the default `app-operator-` names.
    let fullname = ns.name().replace("helm-install", "helm");
    let set = format!("fullnameOverride={fullname},image.tag=v9");
    let release = fullname.as_str();
    helm(&["install", release, &chart(), "-n", ns.name(), "--set", &set])?;
    let installed = Release {
        name: release.to_owned(),
        namespace: ns.name().to_owned(),
    };

    let deployment: Value = serde_json::from_str(&kubectl(&[
        "get",
        "deployment",
        &format!("{fullname}-controller-manager"),
        "-n",
        ns.name(),
        "-o",
        "json",
    ])?)?;
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"],
        "app-operator:v9"
    );
    kubectl(&["get", "crd", "appservices.apps.kudevops.io"])?;
    kubectl(&[
        "get",
        "configmap",
        "app-operator-guest-accepted",
        "-n",
        ns.name(),
    ])?;
    kubectl(&[
        "get",
        "service",
        &format!("{fullname}-controller-manager-metrics-service"),
        "-n",
        ns.name(),
    ])?;

    // The live RBAC holds exactly config/rbac's rules.
    for (kind, name, file, namespace) in [
        ("clusterrole", "manager-role", "rbac/role.yaml", None),
        (
            "role",
            "leader-election-role",
            "rbac/leader_election_role.yaml",
            Some(ns.name()),
        ),
        (
            "role",
            "guest-configmap-role",
            "rbac/guest_role.yaml",
            Some(ns.name()),
        ),
        (
            "clusterrole",
            "appservice-editor-role",
            "rbac/appservice_editor_role.yaml",
            None,
        ),
        (
            "clusterrole",
            "appservice-viewer-role",
            "rbac/appservice_viewer_role.yaml",
            None,
        ),
    ] {
        let live = live_rules(kind, &format!("{fullname}-{name}"), namespace)?;
        assert_eq!(live, config_file(file)?["rules"], "{kind} {name}");
    }
    let binding: Value = serde_json::from_str(&kubectl(&[
        "get",
        "clusterrolebinding",
        &format!("{fullname}-manager-rolebinding"),
        "-o",
        "json",
    ])?)?;
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": format!("{fullname}-controller-manager"), "namespace": ns.name()}])
    );
    installed.uninstall()?;

    // The release's objects are gone, cluster-scoped ones included; the shared CRD stays.
    let role = format!("clusterrole/{fullname}-manager-role");
    let left = kubectl(&["get", &role, "--ignore-not-found", "-o", "name"])?;
    assert!(left.trim().is_empty(), "{left}");
    let left = kubectl(&["get", "deployments", "-n", ns.name(), "-o", "name"])?;
    assert!(left.trim().is_empty(), "{left}");
    kubectl(&["get", "crd", "appservices.apps.kudevops.io"])?;
    Ok(())
}

//! Least privilege, proved: `config/rbac` applied to the local control plane, the operator binary
//! run with a kubeconfig holding only its ServiceAccount's token, and the core scenario through
//! it; the same identity is refused Secrets and other namespaces' ConfigMaps.

use std::path::{Path, PathBuf};

use anyhow::Context;
use app_operator::consts::{LEADER_LEASE, RECORD_SUFFIX};
use app_operator::crd::AppService;
use app_operator_e2e::appservice::{create, sample_named, wait_deployment, wait_event, wait_ready};
use app_operator_e2e::operator::install_crd;
use app_operator_e2e::process::OperatorProcess;
use app_operator_e2e::swap::{push, wait_digest, with_custom_section};
use app_operator_e2e::{TestNamespace, client, kubectl};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};
use serde_json::json;

/// The guest ConfigMap's default name, which `config/rbac` grants access to.
const GUEST_CONFIGMAP: &str = "app-operator-guest";

/// `config/rbac`, applied into one namespace with a unique name suffix (its ClusterRole and
/// ClusterRoleBinding are cluster-wide), and deleted again on drop.
struct RbacOverlay {
    dir: PathBuf,
}

impl RbacOverlay {
    fn apply(namespace: &str) -> anyhow::Result<Self> {
        let dir = std::env::temp_dir().join(format!("app-operator-rbac-{namespace}"));
        std::fs::create_dir_all(&dir)?;
        let rbac = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/rbac");
        let rbac = rbac.canonicalize().context("config/rbac is missing")?;
        // NB: kustomize refuses absolute paths; climb from the overlay to / instead.
        let up = "../".repeat(dir.canonicalize()?.components().count() - 1);
        let relative = rbac.strip_prefix("/").unwrap_or(&rbac);
        let kustomization = format!(
            "namespace: {namespace}\nnameSuffix: -{namespace}\nresources:\n- {up}{}\n",
            relative.display()
        );
        std::fs::write(dir.join("kustomization.yaml"), kustomization)?;
        let overlay = Self { dir };
        kubectl(&["apply", "-k", &overlay.dir.to_string_lossy()])?;
        Ok(overlay)
    }
}

impl Drop for RbacOverlay {
    fn drop(&mut self) {
        let dir = self.dir.to_string_lossy().into_owned();
        if let Err(err) = kubectl(&["delete", "-k", &dir, "--ignore-not-found", "--wait=false"]) {
            eprintln!("failed to delete the RBAC overlay {dir}: {err:#}");
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A kubeconfig for the tests' API server that authenticates with `token` only, its default
/// namespace `namespace`.
fn token_kubeconfig(token: &str, namespace: &str, path: &Path) -> anyhow::Result<()> {
    let admin = Kubeconfig::read_from(app_operator_e2e::cluster::kubeconfig_path())?;
    let cluster = admin
        .clusters
        .first()
        .and_then(|c| c.cluster.clone())
        .context("the admin kubeconfig names no cluster")?;
    let mut entry = json!({"server": cluster.server});
    if let Some(ca) = &cluster.certificate_authority {
        entry["certificate-authority"] = json!(ca);
    }
    if let Some(ca) = &cluster.certificate_authority_data {
        entry["certificate-authority-data"] = json!(ca);
    }
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": entry}],
        "users": [{"name": "operator", "user": {"token": token}}],
        "contexts": [{"name": "operator", "context": {
            "cluster": "local", "user": "operator", "namespace": namespace,
        }}],
        "current-context": "operator",
    });
    std::fs::write(path, serde_yaml_ng::to_string(&config)?)?;
    Ok(())
}

async fn client_from(path: &Path) -> anyhow::Result<Client> {
    let kubeconfig = Kubeconfig::read_from(path)?;
    let config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    Ok(Client::try_from(config)?)
}

/// True when the API server refused the request with 403 Forbidden.
fn forbidden<T>(result: Result<T, kube::Error>) -> bool {
    matches!(result, Err(kube::Error::Api(status)) if status.code == 403)
}

#[tokio::test]
async fn operator_runs_with_only_config_rbac() -> anyhow::Result<()> {
    let admin = client().await?;
    install_crd(&admin).await?;
    let ops = TestNamespace::create(&admin, "rbac-op").await?;
    let apps_ns = TestNamespace::create(&admin, "rbac-apps").await?;
    let _overlay = RbacOverlay::apply(ops.name())?;

    let account = format!("controller-manager-{}", ops.name());
    let token = kubectl(&[
        "create",
        "token",
        &account,
        "-n",
        ops.name(),
        "--duration=1h",
    ])?;
    let work = std::env::temp_dir().join(format!("app-operator-rbac-work-{}", ops.name()));
    std::fs::create_dir_all(&work)?;
    let kubeconfig = work.join("kubeconfig");
    token_kubeconfig(token.trim(), ops.name(), &kubeconfig)?;
    let operator_client = client_from(&kubeconfig).await?;

    // What the identity may not do.
    let secrets: Api<Secret> = Api::namespaced(operator_client.clone(), apps_ns.name());
    assert!(
        forbidden(secrets.list(&ListParams::default()).await),
        "list Secrets in the apps namespace"
    );
    let own_secrets: Api<Secret> = Api::namespaced(operator_client.clone(), ops.name());
    assert!(
        forbidden(own_secrets.list(&ListParams::default()).await),
        "list Secrets in its own namespace"
    );
    let other_config: Api<ConfigMap> = Api::namespaced(operator_client.clone(), apps_ns.name());
    assert!(
        forbidden(other_config.list(&ListParams::default()).await),
        "list ConfigMaps elsewhere"
    );
    let stray = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some("stray".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    assert!(
        forbidden(other_config.create(&PostParams::default(), &stray).await),
        "create a ConfigMap elsewhere"
    );
    let own_config: Api<ConfigMap> = Api::namespaced(operator_client.clone(), ops.name());
    assert!(
        forbidden(own_config.create(&PostParams::default(), &stray).await),
        "create a ConfigMap in its own namespace"
    );
    let apps: Api<AppService> = Api::namespaced(operator_client.clone(), apps_ns.name());
    assert!(
        forbidden(apps.delete("any", &DeleteParams::default()).await),
        "delete an AppService"
    );
    assert!(
        forbidden(own_config.list(&ListParams::default()).await),
        "list every ConfigMap in its own namespace"
    );
    assert!(
        forbidden(own_config.get("kube-root-ca.crt").await),
        "read another ConfigMap in its own namespace"
    );
    // ... and, as a control that the token works at all, what it may.
    own_config
        .get_opt(GUEST_CONFIGMAP)
        .await
        .context("the operator's identity cannot read the guest ConfigMap")?;
    own_config
        .list(&ListParams::default().fields(&format!("metadata.name={GUEST_CONFIGMAP}")))
        .await
        .context("the operator's identity cannot list the guest ConfigMap by name")?;
    apps.list(&ListParams::default())
        .await
        .context("the operator's identity cannot list AppServices")?;

    // The core scenario through the operator running as that identity.
    let mut operator = OperatorProcess::start(
        "operator",
        &kubeconfig,
        &["--namespace", apps_ns.name(), "--leader-elect"],
        &work,
    )?;
    operator.wait_readyz("ready").await?;
    let admin_apps: Api<AppService> = Api::namespaced(admin.clone(), apps_ns.name());
    create(&admin, apps_ns.name(), &sample_named("web")).await?;
    let scenario = async {
        wait_ready(&admin_apps, "web", "3/3").await?;
        let deployments: Api<Deployment> = Api::namespaced(admin.clone(), apps_ns.name());
        let services: Api<Service> = Api::namespaced(admin.clone(), apps_ns.name());
        services
            .get("web")
            .await
            .context("the Service was not created")?;
        // A hand edit set back: the operator may publish Events.
        let hand = PatchParams::apply("hand-edit").force();
        let edit = json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 1}});
        deployments
            .patch("web", &hand, &Patch::Apply(&edit))
            .await?;
        wait_event(&admin, apps_ns.name(), "web", "Corrected").await?;

        let change = json!({"spec": {"image": "nginx:1.27", "replicas": 2}});
        admin_apps
            .patch("web", &PatchParams::default(), &Patch::Merge(&change))
            .await?;
        wait_deployment(&deployments, "web", 2, "nginx:1.27").await?;
        wait_ready(&admin_apps, "web", "2/2").await?;

        services.delete("web", &DeleteParams::default()).await?;
        app_operator_e2e::wait::until(
            "the deleted Service to come back",
            app_operator_e2e::appservice::CONVERGE,
            || async {
                Ok(services
                    .get_opt("web")
                    .await?
                    .filter(|s| s.metadata.deletion_timestamp.is_none()))
            },
        )
        .await?;

        // A guest pushed to the ConfigMap: evaluated, put in force, and recorded in the record
        // that config/manager creates empty, with no more than config/rbac grants.
        let record = ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some(format!("{GUEST_CONFIGMAP}{RECORD_SUFFIX}")),
                ..Default::default()
            },
            ..Default::default()
        };
        let admin_config: Api<ConfigMap> = Api::namespaced(admin.clone(), ops.name());
        admin_config.create(&PostParams::default(), &record).await?;
        let guest = with_custom_section(app_operator::guest::default_guest(), "rbac");
        push(ops.name(), &guest, None).await?;
        let digest = app_operator::guest::digest(&guest);
        wait_digest(&admin, apps_ns.name(), "web", &digest).await?;
        let recorded = admin_config
            .get(&format!("{GUEST_CONFIGMAP}{RECORD_SUFFIX}"))
            .await?
            .binary_data
            .and_then(|d| {
                d.get("guest.wasm")
                    .map(|b| app_operator::guest::digest(&b.0))
            });
        anyhow::ensure!(
            recorded.as_deref() == Some(digest.as_str()),
            "the record holds {recorded:?}, not {digest}"
        );
        anyhow::Ok(())
    };
    if let Err(err) = scenario.await {
        return Err(err.context(format!("operator log tail:\n{}", operator.log_tail(30))));
    }
    let leases: Api<Lease> = Api::namespaced(admin.clone(), ops.name());
    let lease = leases.get(LEADER_LEASE).await.context("no leader Lease")?;
    assert!(
        lease.spec.and_then(|s| s.holder_identity).is_some(),
        "the Lease has no holder"
    );

    let log = std::fs::read_to_string(&operator.log)?;
    assert!(
        !log.contains("Forbidden") && !log.contains("forbidden"),
        "the operator was refused something:\n{log}"
    );
    assert!(
        operator.terminate().await?,
        "the operator did not exit cleanly:\n{}",
        operator.log_tail(30)
    );
    let lease = leases.get(LEADER_LEASE).await?;
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity),
        None,
        "the Lease was not released"
    );
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}

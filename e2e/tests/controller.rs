//! The controller against the local control plane: each test runs its own operator in-process,
//! watching a namespace of its own.

use std::time::Duration;

use app_operator::consts::{ANNOTATION_GUEST_DIGEST, LABEL_INSTANCE, LABEL_MANAGED_BY, MANAGED_BY};
use app_operator::crd::AppService;
use app_operator_e2e::appservice::{
    CONVERGE, condition, create, events_about, node_port_free, sample, sample_named,
    wait_deployment, wait_event, wait_ready,
};
use app_operator_e2e::operator::Operator;
use app_operator_e2e::{TestNamespace, client, kubectl, wait};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

#[tokio::test]
async fn sample_becomes_ready_with_owned_children() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "ctl-sample").await?;
    node_port_free(&client, 30080).await?;
    let operator = Operator::start(&client, ns.name()).await?;
    let apps: Api<AppService> = Api::namespaced(client.clone(), ns.name());
    let created = create(&client, ns.name(), &sample()).await?;

    let app = wait_ready(&apps, "nginx", "3/3").await?;
    let status = app.status.clone().unwrap_or_default();
    assert_eq!(status.observed_generation, Some(1));
    assert_eq!(
        (
            status.replicas,
            status.ready_replicas,
            status.available_replicas
        ),
        (Some(3), Some(3), Some(3))
    );
    assert_eq!(status.guest_digest.as_deref(), Some(operator.digest()));
    assert_eq!(status.selector.as_deref(), Some("app=nginx"));
    assert_eq!(
        condition(&app, "GuestError").map(|c| c.status.as_str()),
        Some("False")
    );
    assert_eq!(
        condition(&app, "Degraded").map(|c| c.status.as_str()),
        Some("False")
    );

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.name());
    let deployment = wait_deployment(&deployments, "nginx", 3, "nginx:alpine").await?;
    let services: Api<Service> = Api::namespaced(client.clone(), ns.name());
    let service = services.get("nginx").await?;
    let spec = service.spec.clone().unwrap_or_default();
    assert_eq!(spec.type_.as_deref(), Some("NodePort"));
    let port = &spec.ports.unwrap_or_default()[0];
    assert_eq!(
        (port.port, port.node_port, port.target_port.clone()),
        (80, Some(30080), Some(IntOrString::Int(80)))
    );
    assert_eq!(
        spec.selector
            .unwrap_or_default()
            .get("app")
            .map(String::as_str),
        Some("nginx")
    );

    for meta in [&deployment.metadata, &service.metadata] {
        let owners = meta.owner_references.clone().unwrap_or_default();
        assert_eq!(owners.len(), 1, "one owner on {:?}", meta.name);
        assert_eq!(owners[0].uid, created.uid().unwrap_or_default());
        assert_eq!(
            (owners[0].controller, owners[0].block_owner_deletion),
            (Some(true), Some(true))
        );
        let labels = meta.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get(LABEL_MANAGED_BY).map(String::as_str),
            Some(MANAGED_BY)
        );
        assert_eq!(
            labels.get(LABEL_INSTANCE).map(String::as_str),
            Some("nginx")
        );
        let annotations = meta.annotations.clone().unwrap_or_default();
        assert_eq!(
            annotations.get(ANNOTATION_GUEST_DIGEST).map(String::as_str),
            Some(operator.digest())
        );
    }
    // Creating the children of a new AppService is routine: the status says it, no Event does.
    let routine = events_about(&client, ns.name(), "nginx").await?;
    assert!(routine.is_empty(), "routine Events: {routine:?}");
    operator.stop().await
}

#[tokio::test]
async fn spec_changes_and_kubectl_scale_are_applied() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "ctl-update").await?;
    let operator = Operator::start(&client, ns.name()).await?;
    let apps: Api<AppService> = Api::namespaced(client.clone(), ns.name());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.name());
    create(&client, ns.name(), &sample_named("web")).await?;
    wait_ready(&apps, "web", "3/3").await?;

    let change = json!({"spec": {"image": "nginx:1.27", "replicas": 2}});
    apps.patch("web", &PatchParams::default(), &Patch::Merge(&change))
        .await?;
    wait_deployment(&deployments, "web", 2, "nginx:1.27").await?;
    let app = wait_ready(&apps, "web", "2/2").await?;
    assert_eq!(app.status.unwrap_or_default().observed_generation, Some(2));

    kubectl(&[
        "scale",
        "appservice",
        "web",
        "--replicas=5",
        "-n",
        ns.name(),
    ])?;
    wait_deployment(&deployments, "web", 5, "nginx:1.27").await?;
    wait_ready(&apps, "web", "5/5").await?;
    let scale = apps.get_scale("web").await?;
    assert_eq!(scale.spec.and_then(|s| s.replicas), Some(5));
    assert_eq!(scale.status.map(|s| s.replicas), Some(5));
    operator.stop().await
}

#[tokio::test]
async fn deleted_and_edited_children_are_restored() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "ctl-repair").await?;
    let operator = Operator::start(&client, ns.name()).await?;
    let apps: Api<AppService> = Api::namespaced(client.clone(), ns.name());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.name());
    let services: Api<Service> = Api::namespaced(client.clone(), ns.name());
    create(&client, ns.name(), &sample_named("web")).await?;
    wait_ready(&apps, "web", "3/3").await?;

    // Deleted children come back (new uid).
    let old = deployments.get("web").await?.uid();
    deployments.delete("web", &DeleteParams::default()).await?;
    wait::until("Deployment web re-created", CONVERGE, || async {
        Ok(deployments
            .get_opt("web")
            .await?
            .filter(|d| d.uid() != old)
            .map(|_| ()))
    })
    .await?;
    wait_deployment(&deployments, "web", 3, "nginx:alpine").await?;
    let old = services.get("web").await?.uid();
    services.delete("web", &DeleteParams::default()).await?;
    wait::until("Service web re-created", CONVERGE, || async {
        Ok(services
            .get_opt("web")
            .await?
            .filter(|s| s.uid() != old)
            .map(|_| ()))
    })
    .await?;

    // Hand edits of fields the operator owns are reverted.
    let hand = PatchParams::apply("hand-edit").force();
    let edit = json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 1}});
    deployments
        .patch("web", &hand, &Patch::Apply(&edit))
        .await?;
    wait_deployment(&deployments, "web", 3, "nginx:alpine").await?;
    let event = wait_event(&client, ns.name(), "web", "Corrected").await?;
    let note = event.note.unwrap_or_default();
    assert!(note.contains("Deployment/web"), "{note}");

    let edit = json!({"spec": {"ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}]}});
    services
        .patch("web", &PatchParams::default(), &Patch::Merge(&edit))
        .await?;
    wait::until("Service web targetPort back to 80", CONVERGE, || async {
        let service = services.get("web").await?;
        let ports = service.spec.and_then(|s| s.ports).unwrap_or_default();
        let restored = ports.len() == 1 && ports[0].target_port == Some(IntOrString::Int(80));
        Ok(restored.then_some(()))
    })
    .await?;
    operator.stop().await
}

#[tokio::test]
async fn children_no_longer_rendered_are_pruned() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "ctl-prune").await?;
    let operator = Operator::start(&client, ns.name()).await?;
    let apps: Api<AppService> = Api::namespaced(client.clone(), ns.name());
    let services: Api<Service> = Api::namespaced(client.clone(), ns.name());
    create(&client, ns.name(), &sample_named("web")).await?;
    wait_ready(&apps, "web", "3/3").await?;
    assert!(services.get_opt("web").await?.is_some());

    // Without ports the default guest renders no Service: the operator deletes its Service.
    let change = json!({"spec": {"ports": null}});
    apps.patch("web", &PatchParams::default(), &Patch::Merge(&change))
        .await?;
    wait::until("Service web pruned", CONVERGE, || async {
        Ok(services.get_opt("web").await?.is_none().then_some(()))
    })
    .await?;
    wait_event(&client, ns.name(), "web", "Pruned").await?;
    operator.stop().await
}

#[tokio::test]
async fn deleting_the_appservice_collects_its_children() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "ctl-gc").await?;
    let operator = Operator::start(&client, ns.name()).await?;
    let apps: Api<AppService> = Api::namespaced(client.clone(), ns.name());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.name());
    let services: Api<Service> = Api::namespaced(client.clone(), ns.name());
    create(&client, ns.name(), &sample_named("web")).await?;
    wait_ready(&apps, "web", "3/3").await?;

    apps.delete("web", &DeleteParams::background()).await?;
    wait::until(
        "Deployment and Service web garbage-collected",
        CONVERGE,
        || async {
            let gone = deployments.get_opt("web").await?.is_none()
                && services.get_opt("web").await?.is_none();
            Ok(gone.then_some(()))
        },
    )
    .await?;
    operator.stop().await
}

#[tokio::test]
async fn a_failing_guest_reports_and_leaves_children_untouched() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TestNamespace::create(&client, "ctl-guest-fail").await?;
    let apps: Api<AppService> = Api::namespaced(client.clone(), ns.name());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.name());
    let services: Api<Service> = Api::namespaced(client.clone(), ns.name());

    // The default guest renders the children of AppService "panic" ...
    let operator = Operator::start(&client, ns.name()).await?;
    create(&client, ns.name(), &sample_named("panic")).await?;
    wait_ready(&apps, "panic", "3/3").await?;
    operator.stop().await?;
    let deployment = deployments.get("panic").await?;
    let service = services.get("panic").await?;

    // ... then the hostile guest, which traps on that name, takes over and sees a new spec.
    let operator =
        Operator::start_with(&client, ns.name(), app_operator::testing::hostile_guest()).await?;
    let change = json!({"spec": {"image": "nginx:1.27", "replicas": 1}});
    apps.patch("panic", &PatchParams::default(), &Patch::Merge(&change))
        .await?;
    let app = wait::until(
        "AppService panic to report GuestError=True",
        CONVERGE,
        || async {
            let app = apps.get("panic").await?;
            let failed = condition(&app, "GuestError").is_some_and(|c| c.status == "True")
                && app.status.as_ref().and_then(|s| s.observed_generation) == Some(2);
            Ok(failed.then_some(app))
        },
    )
    .await?;
    let guest_error = condition(&app, "GuestError")
        .cloned()
        .expect("GuestError is set");
    assert_eq!(guest_error.reason, "Trap");
    assert!(
        guest_error
            .message
            .contains("hostile guest panics on purpose"),
        "{}",
        guest_error.message
    );
    assert_eq!(
        condition(&app, "Ready").map(|c| c.reason.as_str()),
        Some("GuestError")
    );
    let event = wait_event(&client, ns.name(), "panic", "GuestFailed").await?;
    assert_eq!(event.type_.as_deref(), Some("Warning"));

    // Retries happen (with backoff) and still touch nothing.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = deployments.get("panic").await?;
    assert_eq!(after.uid(), deployment.uid());
    assert_eq!(after.metadata.generation, deployment.metadata.generation);
    assert_eq!(after.spec, deployment.spec);
    let after = services.get("panic").await?;
    assert_eq!((after.uid(), after.spec), (service.uid(), service.spec));
    operator.stop().await
}

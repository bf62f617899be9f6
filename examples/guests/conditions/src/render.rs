//! The mapping and the report, as plain functions over the contract's types.

use serde_json::{Value, json};

use crate::bindings::kudevops::appservice::types::{
    AppService, Condition, ConditionStatus, DesiredObject, Event, EventType, IntOrString,
    PolicyError, Rendering,
};

/// The condition this policy reports.
pub(crate) const PINNED: &str = "ImagePinned";

/// Renders a Deployment, a Service when the AppService has ports, and the `ImagePinned`
/// condition; an image not pinned by digest also gets a Warning Event.
pub(crate) fn render(app: &AppService) -> Result<Rendering, PolicyError> {
    let name = app.metadata.name.as_str();
    let image = app.spec.image.as_str();
    if image.trim().is_empty() {
        return Err(PolicyError::InvalidSpec("spec.image is required".into()));
    }
    let labels = json!({ "app": name });
    let mut objects = vec![object(
        "apps/v1",
        "Deployment",
        name,
        &deployment(app, &labels),
    )];
    if !app.spec.ports.is_empty() {
        objects.push(object("v1", "Service", name, &service(app, &labels)));
    }
    let pinned = image.contains("@sha256:");
    let (status, reason, message) = match pinned {
        true => (
            ConditionStatus::True,
            "PinnedByDigest",
            format!("{image} is pinned by digest"),
        ),
        false => (
            ConditionStatus::False,
            "NotPinned",
            format!("{image} is not pinned by digest"),
        ),
    };
    let mut events = Vec::new();
    if !pinned {
        events.push(Event {
            type_: EventType::Warning,
            reason: "ImageNotPinned".into(),
            note: format!("image {image} is not pinned by digest"),
        });
    }
    Ok(Rendering {
        objects,
        conditions: vec![Condition {
            type_: PINNED.into(),
            status,
            reason: reason.into(),
            message,
        }],
        events,
    })
}

fn deployment(app: &AppService, labels: &Value) -> Value {
    let name = app.metadata.name.as_str();
    let ports: Vec<Value> = app
        .spec
        .ports
        .iter()
        .map(|p| {
            let mut port = json!({ "containerPort": container_port(p.port, &p.target_port) });
            if let Some(n) = &p.name {
                port["name"] = json!(n);
            }
            port
        })
        .collect();
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": name, "labels": labels },
        "spec": {
            "replicas": app.spec.replicas.unwrap_or(1),
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": labels },
                "spec": { "containers": [{
                    "name": name,
                    "image": app.spec.image,
                    "ports": ports,
                }]},
            },
        },
    })
}

fn service(app: &AppService, labels: &Value) -> Value {
    let node_port = app.spec.ports.iter().any(|p| p.node_port.is_some());
    let ports: Vec<Value> = app
        .spec
        .ports
        .iter()
        .map(|p| {
            let mut port = json!({
                "port": p.port,
                "targetPort": container_port(p.port, &p.target_port),
                "protocol": p.protocol.as_deref().unwrap_or("TCP"),
            });
            if let Some(n) = &p.name {
                port["name"] = json!(n);
            }
            if let Some(np) = p.node_port {
                port["nodePort"] = json!(np);
            }
            port
        })
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": { "name": app.metadata.name, "labels": labels },
        "spec": {
            "type": if node_port { "NodePort" } else { "ClusterIP" },
            "selector": { "app": app.metadata.name },
            "ports": ports,
        },
    })
}

/// The container port a Service port targets: a numeric targetPort, else the port itself.
fn container_port(port: i32, target: &Option<IntOrString>) -> i32 {
    match target {
        Some(IntOrString::Int(t)) => *t,
        _ => port,
    }
}

fn object(api_version: &str, kind: &str, name: &str, body: &Value) -> DesiredObject {
    DesiredObject {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        body: body.to_string(),
    }
}

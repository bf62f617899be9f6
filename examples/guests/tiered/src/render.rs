//! The mapping, as plain functions over the contract's types.

use serde_json::{Value, json};

use crate::bindings::kudevops::appservice::types::{
    AppService, DesiredObject, IntOrString, PolicyError,
};

/// Label every pod of this policy carries.
pub(crate) const TIER_LABEL: &str = "app.kudevops.io/tier";

/// Renders a Deployment and, when the AppService has ports, a Service.
pub(crate) fn render(app: &AppService) -> Result<Vec<DesiredObject>, PolicyError> {
    let name = app.metadata.name.as_str();
    if app.spec.image.trim().is_empty() {
        return Err(PolicyError::InvalidSpec("spec.image is required".into()));
    }
    let tier = if app.spec.ports.is_empty() {
        "worker"
    } else {
        "web"
    };
    let labels = json!({ "app": name, TIER_LABEL: tier });
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
    let deployment = json!({
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
                    "resources": { "requests": { "cpu": "50m", "memory": "64Mi" } },
                }]},
            },
        },
    });
    let mut objects = vec![object("apps/v1", "Deployment", name, &deployment)];
    if !app.spec.ports.is_empty() {
        objects.push(object("v1", "Service", name, &service(app, &labels)));
    }
    Ok(objects)
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

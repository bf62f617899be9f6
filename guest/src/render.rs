//! The mapping from an AppService to its Deployment and Service, and the spec checks it needs.
//!
//! Choices where the original design is silent:
//! - `spec.replicas` omitted: 1 pod, as the CRD documents.
//! - no ports: a Deployment without container ports and no Service (Kubernetes rejects a Service
//!   without ports).
//! - `targetPort` omitted: the same number as `port`, written out explicitly.
//! - a named `targetPort` (e.g. `web`): the container gets a port named `web` whose number is the
//!   Service `port`, and the Service targets it by name.
//! - `nodePort` omitted: left out, so the cluster allocates one and keeps it.
//! - several ports: each needs a name (Kubernetes requires it), checked here for a clear message.
//! - pods get the hardening no common image objects to: the runtime's default seccomp profile and
//!   no privilege escalation. That meets the `baseline` Pod Security Standard. `restricted` also
//!   needs a non-root user and every capability dropped, which stops images built to start as
//!   root (the tutorial's `nginx` among them): an AppService asks for it with the annotation
//!   [`POD_SECURITY_ANNOTATION`]`: restricted`.

#![deny(unsafe_code)]

use serde::Serialize;

use crate::bindings::kudevops::appservice::types::{
    AppService, DesiredObject, IntOrString, PolicyError, ServicePort as SpecPort,
};
use crate::objects::{
    AppLabel, Capabilities, Container, ContainerPort, Deployment, DeploymentSpec, IntOrStr, Meta,
    PodMeta, PodSecurityContext, PodSpec, PodTemplate, SeccompProfile, SecurityContext, Selector,
    Service, ServicePort, ServiceSpec,
};

/// Pods when `spec.replicas` is omitted, as the CRD documents.
pub const DEFAULT_REPLICAS: i32 = 1;

/// AppService annotation asking for pods that meet the `restricted` Pod Security Standard
/// (value `restricted`; `baseline`, the default, is also accepted).
pub const POD_SECURITY_ANNOTATION: &str = "apps.kudevops.io/pod-security";

/// Renders the Deployment, and the NodePort Service when the AppService has ports.
pub fn render(app: &AppService) -> Result<Vec<DesiredObject>, PolicyError> {
    check(app)?;
    let name = app.metadata.name.as_str();
    let mut objects = vec![object("apps/v1", "Deployment", name, &deployment(app))];
    if !app.spec.ports.is_empty() {
        objects.push(object("v1", "Service", name, &service(app)));
    }
    Ok(objects)
}

/// Rejects specs that would render objects Kubernetes refuses, with the offending field.
fn check(app: &AppService) -> Result<(), PolicyError> {
    let invalid = |msg: String| Err(PolicyError::InvalidSpec(msg));
    if app.metadata.name.is_empty() {
        return invalid("metadata.name is required".into());
    }
    if app.spec.image.trim().is_empty() {
        return invalid("spec.image is required".into());
    }
    if let Some(v) = pod_security(app).filter(|v| !["baseline", "restricted"].contains(v)) {
        return invalid(format!(
            "metadata.annotations[{POD_SECURITY_ANNOTATION}] must be baseline or restricted, got {v:?}"
        ));
    }
    if let Some(r) = app.spec.replicas.filter(|r| *r < 0) {
        return invalid(format!("spec.replicas must not be negative, got {r}"));
    }
    let several = app.spec.ports.len() > 1;
    for (i, p) in app.spec.ports.iter().enumerate() {
        if !(1..=65535).contains(&p.port) {
            return invalid(format!(
                "spec.ports[{i}].port must be 1 to 65535, got {}",
                p.port
            ));
        }
        if several && p.name.as_deref().is_none_or(str::is_empty) {
            return invalid(format!(
                "spec.ports[{i}].name is required when there is more than one port"
            ));
        }
        match &p.target_port {
            Some(IntOrString::Int(t)) if !(1..=65535).contains(t) => {
                return invalid(format!(
                    "spec.ports[{i}].targetPort must be 1 to 65535, got {t}"
                ));
            }
            Some(IntOrString::Str(s)) if !is_port_name(s) => {
                return invalid(format!(
                    "spec.ports[{i}].targetPort {s:?} is not a valid port name \
                     (at most 15 lowercase letters, digits or '-', with a letter)"
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// An IANA service name, as Kubernetes requires for container port names.
fn is_port_name(s: &str) -> bool {
    let b = s.as_bytes();
    (1..=15).contains(&b.len())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b.iter().any(u8::is_ascii_lowercase)
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
        && !s.contains("--")
}

/// The value of the AppService's [`POD_SECURITY_ANNOTATION`], if set.
fn pod_security(app: &AppService) -> Option<&str> {
    app.metadata
        .annotations
        .iter()
        .find(|(k, _)| k == POD_SECURITY_ANNOTATION)
        .map(|(_, v)| v.as_str())
}

fn deployment(app: &AppService) -> Deployment<'_> {
    let name = app.metadata.name.as_str();
    let restricted = pod_security(app) == Some("restricted");
    Deployment {
        api_version: "apps/v1",
        kind: "Deployment",
        metadata: Meta { name },
        spec: DeploymentSpec {
            replicas: app.spec.replicas.unwrap_or(DEFAULT_REPLICAS),
            selector: Selector {
                match_labels: AppLabel { app: name },
            },
            template: PodTemplate {
                metadata: PodMeta {
                    labels: AppLabel { app: name },
                },
                spec: PodSpec {
                    security_context: PodSecurityContext {
                        run_as_non_root: restricted.then_some(true),
                        seccomp_profile: SeccompProfile {
                            type_: "RuntimeDefault",
                        },
                    },
                    containers: [Container {
                        name,
                        image: &app.spec.image,
                        image_pull_policy: "IfNotPresent",
                        ports: container_ports(&app.spec.ports),
                        security_context: SecurityContext {
                            allow_privilege_escalation: false,
                            capabilities: restricted.then_some(Capabilities { drop: ["ALL"] }),
                        },
                    }],
                },
            },
        },
    }
}

/// One container port per distinct target, in the order of the AppService's ports.
fn container_ports(ports: &[SpecPort]) -> Vec<ContainerPort<'_>> {
    let mut out: Vec<ContainerPort<'_>> = Vec::with_capacity(ports.len());
    for p in ports {
        let (name, container_port) = match target(p) {
            IntOrStr::Int(n) => (None, n),
            IntOrStr::Str(s) => (Some(s), p.port),
        };
        let cp = ContainerPort {
            name,
            container_port,
            protocol: p.protocol.as_deref(),
        };
        if !out.contains(&cp) {
            out.push(cp);
        }
    }
    out
}

fn service(app: &AppService) -> Service<'_> {
    let name = app.metadata.name.as_str();
    Service {
        api_version: "v1",
        kind: "Service",
        metadata: Meta { name },
        spec: ServiceSpec {
            type_: "NodePort",
            selector: AppLabel { app: name },
            ports: app
                .spec
                .ports
                .iter()
                .map(|p| ServicePort {
                    name: p.name.as_deref(),
                    protocol: p.protocol.as_deref(),
                    port: p.port,
                    target_port: target(p),
                    node_port: p.node_port,
                    app_protocol: p.app_protocol.as_deref(),
                })
                .collect(),
        },
    }
}

/// The pod-side target of a port: `targetPort`, or `port` when it is omitted.
fn target(p: &SpecPort) -> IntOrStr<'_> {
    match &p.target_port {
        Some(IntOrString::Int(n)) => IntOrStr::Int(*n),
        Some(IntOrString::Str(s)) => IntOrStr::Str(s),
        None => IntOrStr::Int(p.port),
    }
}

fn object<T: Serialize>(api_version: &str, kind: &str, name: &str, value: &T) -> DesiredObject {
    DesiredObject {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        // NB: these structs have only string keys and finite numbers, so serializing cannot fail.
        body: serde_json::to_string(value).expect("k8s object structs always serialize"),
    }
}

#[cfg(test)]
mod tests;

//! The subset of the Kubernetes object schema the default policy emits, as serializable structs.

#![deny(unsafe_code)]

use serde::Serialize;

/// `metadata` of an emitted object: the host stamps namespace, labels and owner.
#[derive(Serialize)]
pub(crate) struct Meta<'a> {
    pub name: &'a str,
}

/// The `app: <name>` label used for pod labels and selectors.
#[derive(Serialize)]
pub(crate) struct AppLabel<'a> {
    pub app: &'a str,
}

/// An `apps/v1` Deployment.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Deployment<'a> {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub metadata: Meta<'a>,
    pub spec: DeploymentSpec<'a>,
}

/// `Deployment.spec`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DeploymentSpec<'a> {
    pub replicas: i32,
    pub selector: Selector<'a>,
    pub template: PodTemplate<'a>,
}

/// A label selector on `app: <name>`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Selector<'a> {
    pub match_labels: AppLabel<'a>,
}

/// `Deployment.spec.template`.
#[derive(Serialize)]
pub(crate) struct PodTemplate<'a> {
    pub metadata: PodMeta<'a>,
    pub spec: PodSpec<'a>,
}

/// `Deployment.spec.template.metadata`.
#[derive(Serialize)]
pub(crate) struct PodMeta<'a> {
    pub labels: AppLabel<'a>,
}

/// `Deployment.spec.template.spec`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PodSpec<'a> {
    pub security_context: PodSecurityContext,
    pub containers: [Container<'a>; 1],
}

/// The pod's `securityContext`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PodSecurityContext {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_as_non_root: Option<bool>,
    pub seccomp_profile: SeccompProfile,
}

/// A seccomp profile.
#[derive(Serialize)]
pub(crate) struct SeccompProfile {
    #[serde(rename = "type")]
    pub type_: &'static str,
}

/// A container's `securityContext`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SecurityContext {
    pub allow_privilege_escalation: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Capabilities>,
}

/// Capabilities a container drops.
#[derive(Serialize)]
pub(crate) struct Capabilities {
    pub drop: [&'static str; 1],
}

/// The one container of the pod.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Container<'a> {
    pub name: &'a str,
    pub image: &'a str,
    pub image_pull_policy: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<ContainerPort<'a>>,
    pub security_context: SecurityContext,
}

/// A container port.
#[derive(Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ContainerPort<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<&'a str>,
    pub container_port: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<&'a str>,
}

/// A `v1` Service.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Service<'a> {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub metadata: Meta<'a>,
    pub spec: ServiceSpec<'a>,
}

/// `Service.spec`.
#[derive(Serialize)]
pub(crate) struct ServiceSpec<'a> {
    #[serde(rename = "type")]
    pub type_: &'static str,
    pub selector: AppLabel<'a>,
    pub ports: Vec<ServicePort<'a>>,
}

/// A Service port.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ServicePort<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<&'a str>,
    pub port: i32,
    pub target_port: IntOrStr<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_port: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app_protocol: Option<&'a str>,
}

/// `targetPort`: a number or a container port name.
#[derive(Serialize, Clone, Copy)]
#[serde(untagged)]
pub(crate) enum IntOrStr<'a> {
    Int(i32),
    Str(&'a str),
}

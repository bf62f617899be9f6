//! The `AppService` custom resource (`apps.kudevops.io/v1alpha1`): spec, status and CRD generation.

use k8s_openapi::api::core::v1::ServicePort;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What the user asks for: a workload of `replicas` copies of `image`, exposed on `ports`.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "apps.kudevops.io",
    version = "v1alpha1",
    kind = "AppService",
    namespaced,
    shortname = "appsvc",
    status = "AppServiceStatus",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.ready"}"#,
    printcolumn = r#"{"name":"Image","type":"string","jsonPath":".spec.image"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Guest","type":"string","jsonPath":".status.guestDigest","priority":1}"#
)]
#[serde(rename_all = "camelCase")]
pub struct AppServiceSpec {
    /// Desired number of pods. Omitted means 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Container image to run.
    pub image: String,
    /// Ports to expose, as Kubernetes ServicePorts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<ServicePort>,
}

/// What the operator observed and did.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppServiceStatus {
    /// The generation of the spec that this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Pods the Deployment has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Pods that are Ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    /// Pods that are available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_replicas: Option<i32>,
    /// Ready pods over desired pods, e.g. `3/3`, for `kubectl get`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<String>,
    /// sha256 digest of the guest that rendered the children last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_digest: Option<String>,
    /// Standard conditions: `Ready`, `GuestError`, `Degraded`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

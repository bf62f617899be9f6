//! The `AppService` custom resource (`apps.kudevops.io/v1alpha1`): spec, status and CRD generation.
//!
//! The API server enforces the validation declared here (plain OpenAPI where it can, CEL rules
//! where it cannot), so the controller and the guest only ever see well-formed AppServices.

// NB: `#[derive(KubeSchema)]` (kube-derive 5.0) copies `AppServiceSpec`, `pub` included, into the
// body of its `json_schema` and drops lint attributes from the copy, so `unreachable_pub` flags
// the copy; every item written in this module is reachable.
#![allow(unreachable_pub)]

use k8s_openapi::api::core::v1::ServicePort;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, CustomResourceExt, KubeSchema};
use schemars::{Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Most ports one AppService may expose. Bounds the cost of the CEL uniqueness rules.
pub const MAX_PORTS: usize = 64;

/// A named targetPort: an IANA_SVC_NAME (as Kubernetes' `IsValidPortName`), in RE2 syntax.
pub const TARGET_PORT_NAME: &str = "^([a-z0-9]+-)*[0-9]*[a-z][a-z0-9]*(-[a-z0-9]+)*$";

/// What the user asks for: a workload of `replicas` copies of `image`, exposed on `ports`.
#[derive(CustomResource, KubeSchema, Deserialize, Serialize, Clone, Debug, PartialEq)]
#[kube(
    group = "apps.kudevops.io",
    version = "v1alpha1",
    kind = "AppService",
    namespaced,
    shortname = "appsvc",
    category = "all",
    status = "AppServiceStatus",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.ready"),
    printcolumn(name = "Image", type_ = "string", json_path = ".spec.image"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    printcolumn(name = "Guest", type_ = "string", json_path = ".status.guestDigest", priority = 1),
    validation = Rule::new("self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')")
        .message("metadata.name must be a DNS-1035 label (lower-case letters, digits and '-', starting with a letter): it names the Service"),
    validation = Rule::new("size(self.metadata.name) <= 63")
        .message("metadata.name must be at most 63 characters: it names the Deployment and the Service"),
)]
#[serde(rename_all = "camelCase")]
pub struct AppServiceSpec {
    /// Desired number of pods. The API server defaults it to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0), extend("default" = 1))]
    pub replicas: Option<i32>,
    /// Container image to run.
    #[schemars(length(min = 1, max = 1024))]
    #[x_kube(validation = Rule::new(r"self.matches(r'^\S+$')").message("image must not be empty or contain whitespace"))]
    pub image: String,
    /// Ports to expose, as Kubernetes ServicePorts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "ports_schema")]
    #[x_kube(
        validation = Rule::new("self.all(p, self.exists_one(q, q.port == p.port && (has(q.protocol) ? q.protocol : 'TCP') == (has(p.protocol) ? p.protocol : 'TCP')))")
            .message("each port number may appear only once per protocol"),
        validation = Rule::new("self.all(p, !has(p.name) || self.exists_one(q, has(q.name) && q.name == p.name))")
            .message("port names must be unique"),
        validation = Rule::new("size(self) <= 1 || self.all(p, has(p.name))")
            .message("every port must have a name when there is more than one port"),
    )]
    pub ports: Vec<ServicePort>,
}

/// What the operator observed and did.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
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
    /// The Deployment's pod selector as a label selector string, for the scale subresource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// sha256 digest of the guest that rendered the children last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_digest: Option<String>,
    /// Standard conditions: `Ready`, `GuestError`, `Degraded`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// The schema of `spec.ports`: the Kubernetes ServicePort schema with the ranges the API server
/// must enforce (the uniqueness rules are CEL, declared on the field).
fn ports_schema(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = generator.subschema_for::<Vec<ServicePort>>();
    schema.insert("maxItems".into(), json!(MAX_PORTS));
    let properties = schema
        .get_mut("items")
        .and_then(|items| items.get_mut("properties"))
        .and_then(|props| props.as_object_mut())
        .expect("the ServicePort schema is an object with properties");
    let mut restrict = |field: &str, extra: serde_json::Value| {
        let prop = properties
            .get_mut(field)
            .and_then(|p| p.as_object_mut())
            .expect("ServicePort has this field");
        prop.extend(extra.as_object().cloned().unwrap_or_default());
    };
    restrict("port", json!({"minimum": 1, "maximum": 65535}));
    restrict("nodePort", json!({"minimum": 30000, "maximum": 32767}));
    restrict("protocol", json!({"enum": ["TCP", "UDP", "SCTP"]}));
    restrict(
        "name",
        json!({"maxLength": 63, "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"}),
    );
    // NB: on an int-or-string, the number keywords apply to numbers and the string keywords to
    // strings. The pattern is IANA_SVC_NAME (lower-case letters, digits and single inner '-',
    // at least one letter); maxLength bounds its cost. It is a pattern rather than a CEL rule
    // with `type(self.targetPort) == string` because kube-cel, which checks the CEL rules
    // locally (src/validation/), cannot evaluate `type()`.
    restrict(
        "targetPort",
        json!({"minimum": 1, "maximum": 65535, "maxLength": 15, "pattern": TARGET_PORT_NAME}),
    );
    schema
}

/// The CustomResourceDefinition as YAML, exactly as committed under `config/crd/`.
pub fn crd_yaml() -> String {
    serde_yaml_ng::to_string(&AppService::crd()).expect("a CRD always serializes to YAML")
}

#[cfg(test)]
mod tests {
    use super::*;

    const CRD_FILE: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../config/crd/apps.kudevops.io_appservices.yaml"
    );

    #[test]
    fn committed_crd_matches_the_types() {
        let committed = std::fs::read_to_string(CRD_FILE).unwrap_or_default();
        assert!(
            committed == crd_yaml(),
            "config/crd/ is stale: run `make crd` and commit the result"
        );
    }

    #[test]
    fn the_target_port_pattern_is_an_iana_service_name() {
        let pattern = regex::Regex::new(TARGET_PORT_NAME).expect("the pattern compiles");
        for good in ["http", "h", "80-http", "h-80", "web2", "a-b-c"] {
            assert!(pattern.is_match(good), "{good}");
        }
        for bad in [
            "8080",
            "80-80",
            "-http",
            "http-",
            "a--b",
            "HTTP",
            "Not_A_Name",
            "",
        ] {
            assert!(!pattern.is_match(bad), "{bad}");
        }
    }

    #[test]
    fn sample_parses() {
        let sample = include_str!("../../config/samples/apps_v1alpha1_appservice.yaml");
        let app: AppService = serde_yaml_ng::from_str(sample).expect("sample is an AppService");
        assert_eq!(app.spec.replicas, Some(3));
        assert_eq!(app.spec.ports.len(), 1);
    }

    #[test]
    fn schema_carries_the_server_side_rules() {
        let crd = serde_json::to_value(AppService::crd()).unwrap();
        let version = &crd["spec"]["versions"][0];
        let spec = &version["schema"]["openAPIV3Schema"]["properties"]["spec"];
        assert_eq!(spec["properties"]["replicas"]["minimum"], 0.0);
        assert_eq!(spec["properties"]["replicas"]["default"], 1);
        assert_eq!(spec["properties"]["image"]["minLength"], 1);
        assert!(spec["properties"]["image"]["x-kubernetes-validations"].is_array());
        let ports = &spec["properties"]["ports"];
        assert_eq!(ports["maxItems"], MAX_PORTS);
        let item = &ports["items"]["properties"];
        assert_eq!(item["port"]["maximum"], 65535.0);
        assert_eq!(item["nodePort"]["minimum"], 30000.0);
        assert_eq!(
            ports["x-kubernetes-validations"].as_array().unwrap().len(),
            3
        );
        assert_eq!(item["targetPort"]["maxLength"], 15);
        assert_eq!(item["targetPort"]["pattern"], TARGET_PORT_NAME);
        assert_eq!(
            version["subresources"]["scale"]["specReplicasPath"],
            ".spec.replicas"
        );
        assert!(version["subresources"]["status"].is_object());
        assert_eq!(crd["spec"]["names"]["shortNames"][0], "appsvc");
    }
}

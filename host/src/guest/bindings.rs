//! The host side of the `kudevops:appservice` contract: the 0.1.0 bindings and input conversion
//! here, the 0.2.0 ones in [`v0_2`].

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::crd::AppService;

pub(super) mod v0_2;

wasmtime::component::bindgen!({ path: "../wit", world: "appservice-policy" });

pub(super) use exports::kudevops::appservice::policy::DesiredObject;
pub(super) use kudevops::appservice::{host, types};

/// The contract's export at any version, as `inspect` reports it:
/// `<package>/<interface>@<version>`.
pub(super) const EXPORT_PREFIX: &str = "kudevops:appservice/policy@";

/// The world a conforming guest implements, without its version.
pub(super) const WORLD: &str = "kudevops:appservice/appservice-policy";

/// Converts the AppService to the contract's input record. A missing name becomes empty, which
/// guests reject as an invalid spec.
pub(super) fn to_input(app: &AppService) -> types::AppService {
    let meta = &app.metadata;
    types::AppService {
        metadata: types::ObjectMeta {
            name: meta.name.clone().unwrap_or_default(),
            namespace: meta.namespace.clone(),
            uid: meta.uid.clone(),
            generation: meta.generation,
            labels: pairs(meta.labels.as_ref()),
            annotations: pairs(meta.annotations.as_ref()),
        },
        spec: types::AppServiceSpec {
            replicas: app.spec.replicas,
            image: app.spec.image.clone(),
            ports: app
                .spec
                .ports
                .iter()
                .map(|p| types::ServicePort {
                    name: p.name.clone(),
                    protocol: p.protocol.clone(),
                    port: p.port,
                    target_port: p.target_port.as_ref().map(|t| match t {
                        IntOrString::Int(n) => types::IntOrString::Int(*n),
                        IntOrString::String(s) => types::IntOrString::Str(s.clone()),
                    }),
                    node_port: p.node_port,
                    app_protocol: p.app_protocol.clone(),
                })
                .collect(),
        },
    }
}

fn pairs(map: Option<&BTreeMap<String, String>>) -> Vec<(String, String)> {
    map.into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

impl From<types::PolicyError> for super::PolicyError {
    fn from(e: types::PolicyError) -> Self {
        match e {
            types::PolicyError::InvalidSpec(m) => Self::InvalidSpec(m),
            types::PolicyError::Unsupported(m) => Self::Unsupported(m),
            types::PolicyError::Other(m) => Self::Other(m),
        }
    }
}

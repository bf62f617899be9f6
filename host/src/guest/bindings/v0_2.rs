//! The `kudevops:appservice@0.2.0` bindings and their conversion to the host's types: the
//! input from the 0.1.0 record, the output to the 0.1.0 objects plus the guest's report.

use super::types as v0_1;
use crate::guest::report::{Condition, ConditionStatus, Event, EventType};

wasmtime::component::bindgen!({ path: "../wit/0.2.0", world: "appservice-policy" });

pub(in crate::guest) use exports::kudevops::appservice::policy::Rendering;
pub(in crate::guest) use kudevops::appservice::{host, types};

/// The contract's export at 0.2.x, as `inspect` lists it.
pub(in crate::guest) const EXPORT_PREFIX: &str = "kudevops:appservice/policy@0.2.";

/// The 0.2.0 input record, field by field from the 0.1.0 one (the records are the same).
pub(in crate::guest) fn input(app: &v0_1::AppService) -> types::AppService {
    let meta = &app.metadata;
    types::AppService {
        metadata: types::ObjectMeta {
            name: meta.name.clone(),
            namespace: meta.namespace.clone(),
            uid: meta.uid.clone(),
            generation: meta.generation,
            labels: meta.labels.clone(),
            annotations: meta.annotations.clone(),
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
                        v0_1::IntOrString::Int(n) => types::IntOrString::Int(*n),
                        v0_1::IntOrString::Str(s) => types::IntOrString::Str(s.clone()),
                    }),
                    node_port: p.node_port,
                    app_protocol: p.app_protocol.clone(),
                })
                .collect(),
        },
    }
}

/// The objects as 0.1.0 records (validated as such), the conditions and Events unchecked.
pub(in crate::guest) fn output(
    rendering: Rendering,
) -> (Vec<v0_1::DesiredObject>, Vec<Condition>, Vec<Event>) {
    let objects = rendering
        .objects
        .into_iter()
        .map(|o| v0_1::DesiredObject {
            api_version: o.api_version,
            kind: o.kind,
            name: o.name,
            body: o.body,
        })
        .collect();
    let conditions = rendering
        .conditions
        .into_iter()
        .map(|c| Condition {
            type_: c.type_,
            status: match c.status {
                types::ConditionStatus::True => ConditionStatus::True,
                types::ConditionStatus::False => ConditionStatus::False,
                types::ConditionStatus::Unknown => ConditionStatus::Unknown,
            },
            reason: c.reason,
            message: c.message,
        })
        .collect();
    let events = rendering
        .events
        .into_iter()
        .map(|e| Event {
            type_: match e.type_ {
                types::EventType::Normal => EventType::Normal,
                types::EventType::Warning => EventType::Warning,
            },
            reason: e.reason,
            note: e.note,
        })
        .collect();
    (objects, conditions, events)
}

impl From<types::PolicyError> for v0_1::PolicyError {
    fn from(e: types::PolicyError) -> Self {
        match e {
            types::PolicyError::InvalidSpec(m) => Self::InvalidSpec(m),
            types::PolicyError::Unsupported(m) => Self::Unsupported(m),
            types::PolicyError::Other(m) => Self::Other(m),
        }
    }
}

impl From<types::LogLevel> for v0_1::LogLevel {
    fn from(level: types::LogLevel) -> Self {
        match level {
            types::LogLevel::Trace => Self::Trace,
            types::LogLevel::Debug => Self::Debug,
            types::LogLevel::Info => Self::Info,
            types::LogLevel::Warn => Self::Warn,
            types::LogLevel::Error => Self::Error,
        }
    }
}

//! Checks on a guest's output before anything could be applied: size, JSON, kind, names,
//! namespace and metadata.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::DesiredObject;
use super::bindings;
use super::names::{is_dns1035_label, is_dns1123_subdomain};
use crate::consts::foreign_annotation_owner;

/// What the host refuses in a guest's output. Each variant names the offending object.
#[derive(Debug, thiserror::Error)]
pub enum Violation {
    /// The output's total size is over `max_output_bytes`.
    #[error("output is {bytes} bytes, over the {limit} byte limit")]
    TooLarge {
        /// Total bytes of all bodies and identifiers.
        bytes: usize,
        /// The configured cap.
        limit: usize,
    },
    /// `(apiVersion, kind)` is not in the allowlist.
    #[error("{api_version} {kind} is not an allowed kind")]
    Kind {
        /// Declared apiVersion.
        api_version: String,
        /// Declared kind.
        kind: String,
    },
    /// The name is not a valid DNS-1123 subdomain (DNS-1035 label for Services).
    #[error("{kind} name {name:?} is not a valid Kubernetes name")]
    Name {
        /// Declared kind.
        kind: String,
        /// Declared name.
        name: String,
    },
    /// The body does not parse as JSON.
    #[error("{kind}/{name} body is not valid JSON")]
    Json {
        /// Declared kind.
        kind: String,
        /// Declared name.
        name: String,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
    /// The body is JSON but not an object, or its `metadata` is not an object.
    #[error("{kind}/{name} body is not a JSON object with an object `metadata`")]
    NotAnObject {
        /// Declared kind.
        kind: String,
        /// Declared name.
        name: String,
    },
    /// `apiVersion`, `kind` or `metadata.name` in the body differs from the declared value.
    #[error("{kind}/{name} body has {field} {found}, not the declared {declared:?}")]
    Mismatch {
        /// Declared kind.
        kind: String,
        /// Declared name.
        name: String,
        /// The body field, e.g. `metadata.name`.
        field: &'static str,
        /// The declared value.
        declared: String,
        /// The body's value, as JSON.
        found: Value,
    },
    /// `metadata.namespace` is not the AppService's namespace.
    #[error("{kind}/{name} targets namespace {found}, not the AppService's {expected:?}")]
    Namespace {
        /// Declared kind.
        kind: String,
        /// Declared name.
        name: String,
        /// The body's namespace, as JSON.
        found: Value,
        /// The AppService's namespace.
        expected: String,
    },
    /// `metadata` carries a field only the host or the API server may set.
    #[error("{kind}/{name} sets metadata.{field}, which guests may not set")]
    Metadata {
        /// Declared kind.
        kind: String,
        /// Declared name.
        name: String,
        /// The forbidden field, e.g. `ownerReferences`.
        field: String,
    },
    /// `metadata.annotations` has a key under a prefix another controller owns
    /// ([`crate::consts::FOREIGN_ANNOTATION_PREFIXES`]).
    #[error("{kind}/{name} sets annotation {key:?}, which the {owner} owns")]
    Annotation {
        /// Declared kind.
        kind: String,
        /// Declared name.
        name: String,
        /// The annotation key.
        key: String,
        /// Who owns the key, e.g. `Deployment controller`.
        owner: &'static str,
    },
    /// The same `(apiVersion, kind, name)` is emitted twice.
    #[error("{kind}/{name} is emitted more than once")]
    Duplicate {
        /// Declared kind.
        kind: String,
        /// Declared name.
        name: String,
    },
    /// A 0.2.0 guest's conditions or Events are out of bounds.
    #[error(transparent)]
    Report(#[from] super::report::Violation),
}

/// `metadata` fields a guest may set; the host stamps owner, labels and annotations on top.
const METADATA_FIELDS: [&str; 4] = ["name", "namespace", "labels", "annotations"];

/// API groups whose kinds are never allowed: RBAC, admission, API extension and other
/// cluster-level machinery.
const FORBIDDEN_GROUPS: [&str; 10] = [
    "rbac.authorization.k8s.io",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "apiregistration.k8s.io",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "certificates.k8s.io",
    "flowcontrol.apiserver.k8s.io",
    "node.k8s.io",
    "scheduling.k8s.io",
];

/// Cluster-scoped kinds of the core and storage groups.
const FORBIDDEN_KINDS: [&str; 9] = [
    "Namespace",
    "Node",
    "PersistentVolume",
    "ComponentStatus",
    "StorageClass",
    "CSIDriver",
    "CSINode",
    "VolumeAttachment",
    "IngressClass",
];

/// Whether a kind is cluster-scoped or RBAC-related, so no configuration may allow it.
/// NB: this knows built-in kinds only; allow custom kinds only if they are namespaced.
pub(super) fn is_forbidden(api_version: &str, kind: &str) -> bool {
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    FORBIDDEN_GROUPS.contains(&group) || FORBIDDEN_KINDS.contains(&kind)
}

/// The checks' inputs.
pub(super) struct Rules<'a> {
    pub allowed_kinds: &'a [(String, String)],
    pub namespace: &'a str,
    pub max_output_bytes: usize,
}

/// Checks a guest's raw output and parses the bodies, filling in `apiVersion`, `kind` and
/// `metadata.name` where the guest left them out.
pub(super) fn validate(
    raw: Vec<bindings::DesiredObject>,
    rules: &Rules<'_>,
) -> Result<Vec<DesiredObject>, Violation> {
    let bytes: usize = raw
        .iter()
        .map(|o| o.body.len() + o.api_version.len() + o.kind.len() + o.name.len())
        .sum();
    if bytes > rules.max_output_bytes {
        return Err(Violation::TooLarge {
            bytes,
            limit: rules.max_output_bytes,
        });
    }
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(raw.len());
    for o in raw {
        let object = check(o, rules)?;
        if !seen.insert((
            object.api_version.clone(),
            object.kind.clone(),
            object.name.clone(),
        )) {
            return Err(Violation::Duplicate {
                kind: object.kind,
                name: object.name,
            });
        }
        out.push(object);
    }
    Ok(out)
}

fn check(o: bindings::DesiredObject, rules: &Rules<'_>) -> Result<DesiredObject, Violation> {
    let bindings::DesiredObject {
        api_version,
        kind,
        name,
        body,
    } = o;
    let allowed = rules
        .allowed_kinds
        .iter()
        .any(|(a, k)| *a == api_version && *k == kind);
    if !allowed || is_forbidden(&api_version, &kind) {
        return Err(Violation::Kind { api_version, kind });
    }
    let name_ok = if kind == "Service" {
        is_dns1035_label(&name)
    } else {
        is_dns1123_subdomain(&name)
    };
    if !name_ok {
        return Err(Violation::Name { kind, name });
    }
    let mut body: Value = match serde_json::from_str(&body) {
        Ok(v) => v,
        Err(source) => return Err(Violation::Json { kind, name, source }),
    };
    let Some(root) = body.as_object_mut() else {
        return Err(Violation::NotAnObject { kind, name });
    };
    let mismatch = |field, declared: &str, found: Option<&Value>| match found {
        Some(v) if v.as_str() != Some(declared) => Some((field, v.clone())),
        _ => None,
    };
    let meta = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(meta) = meta.as_object_mut() else {
        return Err(Violation::NotAnObject { kind, name });
    };
    if let Some(field) = meta.keys().find(|k| !METADATA_FIELDS.contains(&k.as_str())) {
        return Err(Violation::Metadata {
            field: field.clone(),
            kind,
            name,
        });
    }
    let foreign = meta
        .get("annotations")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|annotations| annotations.keys())
        .find_map(|key| foreign_annotation_owner(key).map(|owner| (key.clone(), owner)));
    if let Some((key, owner)) = foreign {
        return Err(Violation::Annotation {
            kind,
            name,
            key,
            owner,
        });
    }
    if let Some(ns) = meta
        .get("namespace")
        .filter(|ns| ns.as_str() != Some(rules.namespace))
    {
        let found = ns.clone();
        return Err(Violation::Namespace {
            kind,
            name,
            found,
            expected: rules.namespace.into(),
        });
    }
    let found = mismatch("metadata.name", &name, meta.get("name"));
    meta.insert("name".into(), Value::String(name.clone()));
    let found = found
        .or_else(|| mismatch("apiVersion", &api_version, root.get("apiVersion")))
        .or_else(|| mismatch("kind", &kind, root.get("kind")));
    if let Some((field, found)) = found {
        let declared = match field {
            "apiVersion" => api_version,
            "kind" => kind.clone(),
            _ => name.clone(),
        };
        return Err(Violation::Mismatch {
            kind,
            name,
            field,
            declared,
            found,
        });
    }
    root.insert("apiVersion".into(), Value::String(api_version.clone()));
    root.insert("kind".into(), Value::String(kind.clone()));
    Ok(DesiredObject {
        api_version,
        kind,
        name,
        body,
    })
}

#[cfg(test)]
mod tests;

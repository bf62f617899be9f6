//! The checks the API server makes of every object's metadata, whatever its CRD: a name (or a
//! generateName) that is a DNS-1123 subdomain, a namespace that is a DNS-1123 label, with
//! apimachinery's regular expressions and messages (`IsDNS1123Subdomain`, `IsDNS1123Label`).
//!
//! NB: not kube-cel's `format.dns1123Subdomain()`: it also limits each dot-separated label to
//! 63 characters, which the API server does not (the `name-too-long` golden case showed it).

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::field::{ErrorType, FieldError};

const SUBDOMAIN: &str = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const LABEL: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";

/// A name format: its expression, its longest value and how apimachinery words a mismatch.
struct Format {
    regex: LazyLock<Regex>,
    max: usize,
    mismatch: &'static str,
}

static NAME: Format = Format {
    regex: LazyLock::new(|| anchored(SUBDOMAIN)),
    max: 253,
    mismatch: "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, \
               '-' or '.', and must start and end with an alphanumeric character (e.g. \
               'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
};

static NAMESPACE: Format = Format {
    regex: LazyLock::new(|| anchored(LABEL)),
    max: 63,
    mismatch: "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or \
               '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or \
               '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
};

fn anchored(expression: &str) -> Regex {
    Regex::new(&format!("^{expression}$")).expect("a constant expression compiles")
}

/// The failures of `object`'s `metadata`.
pub(super) fn check(object: &Value) -> Vec<FieldError> {
    let meta = object.get("metadata");
    let text = |key: &str| meta.and_then(|m| m.get(key)).and_then(Value::as_str);
    let mut errors = Vec::new();
    match (text("name"), text("generateName")) {
        (Some(name), _) if !name.is_empty() => errors.extend(NAME.check("metadata.name", name)),
        (_, Some(prefix)) if !prefix.is_empty() => {}
        _ => errors.push(FieldError::new(
            "metadata.name",
            ErrorType::Required,
            "name or generateName is required",
        )),
    }
    if let Some(ns) = text("namespace").filter(|ns| !ns.is_empty()) {
        errors.extend(NAMESPACE.check("metadata.namespace", ns));
    }
    errors
}

impl Format {
    fn check(&self, path: &str, value: &str) -> Vec<FieldError> {
        let invalid = |detail: String| {
            FieldError::new(path, ErrorType::Invalid, detail).with_value(Value::from(value))
        };
        let mut errors = Vec::new();
        if value.len() > self.max {
            errors.push(invalid(format!(
                "must be no more than {} characters",
                self.max
            )));
        }
        if !self.regex.is_match(value) {
            errors.push(invalid(self.mismatch.to_owned()));
        }
        errors
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn names_and_namespaces_have_the_kubernetes_formats() {
        let check = |m: Value| check(&json!({"metadata": m}));
        assert!(check(json!({"name": "app.v1", "namespace": "shop"})).is_empty());
        assert!(
            check(json!({"name": "a".repeat(69)})).is_empty(),
            "no 63 limit per label"
        );
        assert!(check(json!({"generateName": "web-"})).is_empty());
        let bad = check(json!({"name": "Web_1", "namespace": "a.b"}));
        let paths: Vec<_> = bad.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["metadata.name", "metadata.namespace"], "{bad:?}");
        assert!(bad[0].to_string().starts_with(
            "metadata.name: Invalid value: \"Web_1\": a lowercase RFC 1123 subdomain must"
        ));
        assert_eq!(check(json!({"name": "a".repeat(254)})).len(), 1);
        assert_eq!(check(json!({}))[0].kind, ErrorType::Required);
    }
}

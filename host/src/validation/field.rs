//! One validation failure, named by its field path and printed as the API server prints it.

use std::fmt;

use serde_json::Value;

/// What kind of failure, as the API server's `field.ErrorType` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorType {
    /// A field the schema does not declare (strict field validation).
    Unknown,
    /// A required field is missing.
    Required,
    /// A value outside a fixed set (`enum`).
    NotSupported,
    /// A string longer than `maxLength`.
    TooLong,
    /// A list or map with more than `maxItems` or `maxProperties` entries.
    TooMany,
    /// A value of the wrong JSON type.
    TypeInvalid,
    /// Two entries of a `set` or `map` list with the same key.
    Duplicate,
    /// Any other invalid value (ranges, patterns, CEL rules).
    Invalid,
}

impl ErrorType {
    /// Whether the API server skips the CEL rules after such an error: its CEL evaluation needs
    /// the object to have the schema's shape (`hasBlockingErr` in apiextensions-apiserver).
    pub fn blocks_cel(self) -> bool {
        matches!(
            self,
            ErrorType::NotSupported
                | ErrorType::Required
                | ErrorType::TooLong
                | ErrorType::TooMany
                | ErrorType::TypeInvalid
        )
    }

    fn label(self) -> &'static str {
        match self {
            ErrorType::Unknown => "unknown field",
            ErrorType::Required => "Required value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::TooLong => "Too long",
            ErrorType::TooMany => "Too many",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::TypeInvalid | ErrorType::Invalid => "Invalid value",
        }
    }
}

/// One failure: `spec.ports[1].name: Invalid value: "http": ...`.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldError {
    /// The field, as the API server writes it (`spec.ports[1].name`); empty for the object
    /// itself (the API server's `<nil>`).
    pub path: String,
    /// What kind of failure.
    pub kind: ErrorType,
    /// The offending value, when the API server shows one.
    pub value: Option<Value>,
    /// What is wrong with it.
    pub detail: String,
}

impl FieldError {
    /// A failure of `kind` at `path`.
    pub fn new(path: impl Into<String>, kind: ErrorType, detail: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            kind,
            value: None,
            detail: detail.into(),
        }
    }

    /// The same failure, showing `value`.
    #[must_use]
    pub fn with_value(mut self, value: Value) -> Self {
        self.value = Some(value);
        self
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.path.is_empty() {
            "<nil>"
        } else {
            &self.path
        };
        write!(f, "{path}: {}", self.kind.label())?;
        if let Some(value) = &self.value {
            write!(f, ": {}", short(value))?;
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

/// A value as the API server shows it: scalars as JSON, lists and maps by their type.
pub(super) fn short(value: &Value) -> String {
    match value {
        Value::Array(_) => "\"array\"".into(),
        Value::Object(_) => "\"object\"".into(),
        Value::Number(n) => number(n),
        other => other.to_string(),
    }
}

/// A number without a spurious `.0` (the CRD's bounds are floats: `maximum: 32767.0`).
pub(super) fn number(n: &serde_json::Number) -> String {
    match n.as_f64() {
        Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 1e15 => format!("{f:.0}"),
        _ => n.to_string(),
    }
}

/// `a.b` under `parent`, or `a` at the root.
pub(super) fn join(parent: &str, key: &str) -> String {
    match parent {
        "" => key.to_owned(),
        _ => format!("{parent}.{key}"),
    }
}

/// A JSON pointer (`/spec/ports/1/name`) as a field path (`spec.ports[1].name`): numeric
/// segments under a list are indexes.
pub(super) fn from_pointer(pointer: &str, root: &Value) -> String {
    let mut path = String::new();
    let mut at = Some(root);
    for raw in pointer.split('/').skip(1) {
        let segment = raw.replace("~1", "/").replace("~0", "~");
        match at {
            Some(Value::Array(items)) => {
                let index = segment.parse::<usize>().ok();
                path.push_str(&format!("[{segment}]"));
                at = index.and_then(|i| items.get(i));
            }
            other => {
                at = other.and_then(|v| v.get(&segment));
                path = join(&path, &segment);
            }
        }
    }
    path
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn prints_like_the_api_server() {
        let e = FieldError::new("spec.replicas", ErrorType::Invalid, "should be at least 0")
            .with_value(json!(-1));
        assert_eq!(
            e.to_string(),
            "spec.replicas: Invalid value: -1: should be at least 0"
        );
        let root = FieldError::new("", ErrorType::Invalid, "bad name");
        assert_eq!(root.to_string(), "<nil>: Invalid value: bad name");
        let required = FieldError::new("spec.image", ErrorType::Required, "");
        assert_eq!(required.to_string(), "spec.image: Required value");
        assert_eq!(short(&json!([1])), "\"array\"");
        assert_eq!(short(&json!("x")), "\"x\"");
        assert_eq!(
            number(&serde_json::Number::from_f64(32767.0).unwrap()),
            "32767"
        );
    }

    #[test]
    fn pointers_become_field_paths() {
        let root = json!({"spec": {"ports": [{"name": "a"}, {"name": "b"}]}});
        assert_eq!(
            from_pointer("/spec/ports/1/name", &root),
            "spec.ports[1].name"
        );
        assert_eq!(from_pointer("", &root), "");
        assert_eq!(from_pointer("/spec", &root), "spec");
    }
}

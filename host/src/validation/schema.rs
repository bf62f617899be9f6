//! The structural half of a CRD's OpenAPI v3 schema (types, ranges, lengths, patterns, enums,
//! required fields), checked by the `jsonschema` crate after the Kubernetes extensions are
//! translated into plain JSON Schema, with the API server's wording.

use jsonschema::error::{TypeKind, ValidationErrorKind};
use serde_json::{Value, json};

use super::field::{ErrorType, FieldError, from_pointer, join, number, short};

/// The compiled structural schema.
pub(super) struct Structural {
    validator: jsonschema::Validator,
}

impl Structural {
    /// Compiles `openapi` (a CRD version's `openAPIV3Schema`).
    pub(super) fn new(openapi: &Value) -> Result<Self, String> {
        let validator = jsonschema::draft4::options()
            // NB: the API server matches `pattern` with Go's RE2; the `regex` crate is the same
            // family (no look-around or back-references, linear time), fancy-regex is not.
            .with_pattern_options(jsonschema::PatternOptions::regex())
            // NB: `format` on integers (int32, int64) is a hint the API server does not enforce;
            // string formats are not checked here (see docs/guest-authors.md).
            .should_validate_formats(false)
            .build(&to_json_schema(openapi))
            .map_err(|e| e.to_string())?;
        Ok(Self { validator })
    }

    /// Every structural failure of `object`, in the API server's words.
    pub(super) fn check(&self, object: &Value) -> Vec<FieldError> {
        self.validator
            .iter_errors(object)
            .map(|error| {
                let path = from_pointer(error.instance_path().as_str(), object);
                describe(&path, error.instance(), error.kind())
            })
            .collect()
    }
}

/// The schema with the Kubernetes extensions as JSON Schema: `nullable` and
/// `x-kubernetes-int-or-string` become type lists.
pub(super) fn to_json_schema(schema: &Value) -> Value {
    let Some(map) = schema.as_object() else {
        return schema.clone();
    };
    let mut out = serde_json::Map::new();
    for (key, value) in map {
        let value = match key.as_str() {
            "properties" | "patternProperties" | "definitions" => Value::Object(
                value
                    .as_object()
                    .map(|props| {
                        props
                            .iter()
                            .map(|(k, v)| (k.clone(), to_json_schema(v)))
                            .collect()
                    })
                    .unwrap_or_default(),
            ),
            "items" | "additionalProperties" | "not" => to_json_schema(value),
            "allOf" | "anyOf" | "oneOf" => Value::Array(
                value
                    .as_array()
                    .map(|all| all.iter().map(to_json_schema).collect())
                    .unwrap_or_default(),
            ),
            // NB: the defaults are applied before the check, and descriptions are not rules.
            "default" | "description" | "example" => continue,
            _ => value.clone(),
        };
        out.insert(key.clone(), value);
    }
    let flag = |name: &str| map.get(name) == Some(&Value::Bool(true));
    let mut types: Vec<Value> = match map.get("type") {
        _ if flag("x-kubernetes-int-or-string") => vec![json!("integer"), json!("string")],
        Some(Value::String(t)) => vec![json!(t)],
        _ => Vec::new(),
    };
    if !types.is_empty() {
        if flag("nullable") {
            types.push(json!("null"));
        }
        out.insert("type".into(), Value::Array(types));
    }
    Value::Object(out)
}

/// One `jsonschema` failure at `path` as the API server words it.
fn describe(path: &str, value: &Value, kind: &ValidationErrorKind) -> FieldError {
    let shown = |p: &str| {
        if p.is_empty() {
            "body".into()
        } else {
            format!("{p} in body")
        }
    };
    let at = shown(path);
    let invalid = |detail: String| {
        FieldError::new(path, ErrorType::Invalid, detail).with_value(value.clone())
    };
    match kind {
        ValidationErrorKind::Required { property } => {
            let name = property.as_str().unwrap_or_default();
            FieldError::new(join(path, name), ErrorType::Required, "")
        }
        ValidationErrorKind::Type { kind } => {
            let expected = match kind {
                TypeKind::Single(t) => t.to_string(),
                TypeKind::Multiple(ts) => ts
                    .iter()
                    .map(|t| t.to_string())
                    .filter(|t| t != "null")
                    .collect::<Vec<_>>()
                    .join(" or "),
            };
            let actual = json_type(value);
            FieldError::new(
                path,
                ErrorType::TypeInvalid,
                format!("{at} must be of type {expected}: \"{actual}\""),
            )
            .with_value(json!(actual))
        }
        ValidationErrorKind::Enum { options } => {
            let supported = options
                .as_array()
                .map(|o| {
                    o.iter()
                        .map(Value::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default();
            FieldError::new(
                path,
                ErrorType::NotSupported,
                format!("supported values: {supported}"),
            )
            .with_value(value.clone())
        }
        ValidationErrorKind::Minimum { limit } => invalid(format!(
            "{at} should be greater than or equal to {}",
            limit_text(limit)
        )),
        ValidationErrorKind::Maximum { limit } => invalid(format!(
            "{at} should be less than or equal to {}",
            limit_text(limit)
        )),
        ValidationErrorKind::ExclusiveMinimum { limit } => {
            invalid(format!("{at} should be greater than {}", limit_text(limit)))
        }
        ValidationErrorKind::ExclusiveMaximum { limit } => {
            invalid(format!("{at} should be less than {}", limit_text(limit)))
        }
        ValidationErrorKind::MinLength { limit } => {
            invalid(format!("{at} should be at least {limit} chars long"))
        }
        ValidationErrorKind::MaxLength { limit } => FieldError::new(
            path,
            ErrorType::TooLong,
            format!("may not be more than {limit} bytes"),
        ),
        ValidationErrorKind::Pattern { pattern } => {
            invalid(format!("{at} should match '{pattern}'"))
        }
        ValidationErrorKind::MinItems { limit } => FieldError::new(
            path,
            ErrorType::Invalid,
            format!("{at} should have at least {limit} items"),
        )
        .with_value(json!(value.as_array().map_or(0, Vec::len))),
        ValidationErrorKind::MaxItems { limit } => FieldError::new(
            path,
            ErrorType::TooMany,
            format!("must have at most {limit} items"),
        )
        .with_value(json!(value.as_array().map_or(0, Vec::len))),
        ValidationErrorKind::MaxProperties { limit } => FieldError::new(
            path,
            ErrorType::TooMany,
            format!("must have at most {limit} items"),
        )
        .with_value(json!(value.as_object().map_or(0, serde_json::Map::len))),
        ValidationErrorKind::UniqueItems => FieldError::new(
            path,
            ErrorType::Duplicate,
            format!("{at} shouldn't contain duplicates"),
        )
        .with_value(value.clone()),
        other => invalid(format!("{at} {}", other_text(other, value))),
    }
}

fn limit_text(limit: &Value) -> String {
    match limit {
        Value::Number(n) => number(n),
        other => short(other),
    }
}

fn other_text(kind: &ValidationErrorKind, value: &Value) -> String {
    match kind {
        ValidationErrorKind::MultipleOf { .. } => {
            "should be a multiple of the schema's multipleOf".into()
        }
        ValidationErrorKind::MinProperties { limit } => {
            format!("should have at least {limit} properties")
        }
        _ => format!("does not match the schema ({})", short(value)),
    }
}

/// The JSON type name the API server prints for a value.
fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "required": ["image"], "properties": {
            "image": {"type": "string", "minLength": 1, "maxLength": 5},
            "replicas": {"type": "integer", "minimum": 0.0, "nullable": true},
            "protocol": {"type": "string", "enum": ["TCP", "UDP"]},
            "target": {"x-kubernetes-int-or-string": true, "minimum": 1.0, "pattern": "^[a-z]+$"},
        }}}})
    }

    fn errors(object: Value) -> Vec<String> {
        Structural::new(&schema())
            .expect("the schema compiles")
            .check(&object)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn failures_read_like_the_api_server() {
        assert_eq!(
            errors(json!({"spec": {"image": "", "replicas": -1}})),
            [
                "spec.image: Invalid value: \"\": spec.image in body should be at least 1 chars long",
                "spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0",
            ]
        );
        assert_eq!(errors(json!({"spec": {}})), ["spec.image: Required value"]);
        assert_eq!(
            errors(json!({"spec": {"image": "abcdef", "protocol": "HTTP"}})),
            [
                "spec.image: Too long: may not be more than 5 bytes",
                "spec.protocol: Unsupported value: \"HTTP\": supported values: \"TCP\", \"UDP\"",
            ]
        );
        assert_eq!(
            errors(json!({"spec": {"image": "a", "replicas": "three"}})),
            [
                "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\""
            ]
        );
    }

    #[test]
    fn extensions_become_json_schema() {
        assert!(errors(json!({"spec": {"image": "a", "replicas": null}})).is_empty());
        assert!(errors(json!({"spec": {"image": "a", "target": 8080}})).is_empty());
        assert!(errors(json!({"spec": {"image": "a", "target": "http"}})).is_empty());
        assert_eq!(
            errors(json!({"spec": {"image": "a", "target": "HTTP"}})),
            ["spec.target: Invalid value: \"HTTP\": spec.target in body should match '^[a-z]+$'"]
        );
        assert_eq!(
            errors(json!({"spec": {"image": "a", "target": true}})).len(),
            1
        );
    }
}

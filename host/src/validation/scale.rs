//! The scale subresource's check: the replicas at its `specReplicasPath` are a non-negative
//! 32-bit integer.

use serde_json::Value;

use super::field::{ErrorType, FieldError};

/// The failure of the replicas at `spec_replicas_path` (`.spec.replicas`) in `object`, if any;
/// nothing when the field is absent. The path is printed as the CRD writes it, like the API
/// server does.
pub(super) fn check(spec_replicas_path: &str, object: &Value) -> Option<FieldError> {
    let pointer = spec_replicas_path.trim_start_matches('.').replace('.', "/");
    let value = object.pointer(&format!("/{pointer}"))?;
    let invalid = |shown: Value, detail: String| {
        Some(FieldError::new(spec_replicas_path, ErrorType::Invalid, detail).with_value(shown))
    };
    match value.as_i64() {
        Some(n) if n < 0 => invalid(value.clone(), "should be a non-negative integer".into()),
        Some(n) if n > i64::from(i32::MAX) => invalid(
            value.clone(),
            format!("should be less than or equal to {}", i32::MAX),
        ),
        Some(_) => None,
        None => invalid(
            Value::from(0),
            format!("{spec_replicas_path} accessor error: {value} is not an int64"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn replicas_are_a_non_negative_int32() {
        let at =
            |replicas: Value| check(".spec.replicas", &json!({"spec": {"replicas": replicas}}));
        assert_eq!(at(json!(3)), None);
        assert_eq!(at(json!(-1)).unwrap().path, ".spec.replicas");
        assert!(at(json!(3_000_000_000_i64)).is_some());
        assert!(at(json!("three")).is_some());
        assert_eq!(check(".spec.replicas", &json!({"spec": {}})), None);
    }
}

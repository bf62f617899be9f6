//! What the API server does to an object before it validates it: strict field validation
//! (fields the structural schema does not declare), and nulls in non-nullable fields dropped.

use serde_json::Value;

use super::field::{ErrorType, FieldError, join};

/// Fields of the root every object has, whatever its schema: the API server handles them.
const ROOT_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// The fields of `object` that `schema` does not declare, as strict field validation (kubectl's
/// default) reports them instead of pruning them. Like the API server's pruning, it follows the
/// value's shape: the keys of a map where the schema has a list are all unknown.
pub(super) fn unknown_fields(schema: &Value, object: &Value) -> Vec<FieldError> {
    let mut found = Vec::new();
    if let Some(map) = object.as_object() {
        for (key, value) in map {
            if !ROOT_FIELDS.contains(&key.as_str()) {
                visit(schema, key, value, "", &mut found);
            }
        }
    }
    found
        .into_iter()
        .map(|path| FieldError::new(path, ErrorType::Unknown, ""))
        .collect()
}

/// Checks `value`, the field `key` of an object under `parent` whose schema is `schema`.
fn visit(schema: &Value, key: &str, value: &Value, parent: &str, found: &mut Vec<String>) {
    let path = join(parent, key);
    match child_schema(schema, key) {
        Child::Declared(child) => walk(child, value, &path, found),
        Child::Kept => {}
        Child::Unknown => found.push(path),
    }
}

fn walk(schema: &Value, value: &Value, path: &str, found: &mut Vec<String>) {
    if preserves_unknown(schema) {
        return;
    }
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                visit(schema, key, child, path, found);
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    walk(item_schema, item, &format!("{path}[{i}]"), found);
                }
            }
        }
        _ => {}
    }
}

enum Child<'a> {
    /// The schema declares the field (in `properties` or `additionalProperties`).
    Declared(&'a Value),
    /// Anything goes under it.
    Kept,
    /// Strict field validation refuses it.
    Unknown,
}

fn child_schema<'a>(schema: &'a Value, key: &str) -> Child<'a> {
    if let Some(child) = schema.get("properties").and_then(|p| p.get(key)) {
        return Child::Declared(child);
    }
    match schema.get("additionalProperties") {
        Some(Value::Bool(true)) => Child::Kept,
        Some(child @ Value::Object(_)) => Child::Declared(child),
        _ if preserves_unknown(schema) => Child::Kept,
        _ => Child::Unknown,
    }
}

fn preserves_unknown(schema: &Value) -> bool {
    schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
}

/// Drops the `null` fields whose schema is not `nullable`, as the API server does before
/// defaulting: `image: null` is then a missing `image`, and a defaulted field gets its default.
pub(super) fn drop_nulls(schema: &Value, value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|key, child| {
                !child.is_null()
                    || match child_schema(schema, key) {
                        Child::Declared(s) => s.get("nullable") == Some(&Value::Bool(true)),
                        _ => true,
                    }
            });
            for (key, child) in map.iter_mut() {
                if let Child::Declared(s) = child_schema(schema, key) {
                    drop_nulls(s, child);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    drop_nulls(item_schema, item);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "a": {"type": "string"},
                "b": {"type": "string", "nullable": true},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "list": {"type": "array", "items": {"type": "object", "properties": {"x": {"type": "integer"}}}},
            }},
        }})
    }

    fn paths(errors: Vec<FieldError>) -> Vec<String> {
        errors.into_iter().map(|e| e.path).collect()
    }

    #[test]
    fn undeclared_fields_are_found_where_the_schema_has_none() {
        let object = json!({
            "apiVersion": "v1", "kind": "K", "metadata": {"name": "n"},
            "extra": 1,
            "spec": {
                "a": "x", "typo": 1,
                "free": {"anything": {"goes": 1}},
                "labels": {"any": "key"},
                "list": [{"x": 1}, {"x": 2, "y": 3}],
            },
        });
        assert_eq!(
            paths(unknown_fields(&schema(), &object)),
            ["extra", "spec.list[1].y", "spec.typo"]
        );
    }

    #[test]
    fn a_map_where_a_list_is_declared_has_only_unknown_fields() {
        let object = json!({"spec": {"list": {"x": 1}}});
        assert_eq!(paths(unknown_fields(&schema(), &object)), ["spec.list.x"]);
    }

    #[test]
    fn nulls_are_dropped_unless_nullable() {
        let mut object = json!({"spec": {"a": null, "b": null}});
        drop_nulls(&schema(), &mut object);
        assert_eq!(object, json!({"spec": {"b": null}}));
    }
}

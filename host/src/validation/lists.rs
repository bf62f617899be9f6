//! The invariants of `x-kubernetes-list-type`: a `set` holds each value once, a `map` each
//! combination of its `x-kubernetes-list-map-keys` once.

use serde_json::Value;

use super::field::{ErrorType, FieldError, join};

/// Every duplicate entry of a `set` or `map` list in `value`, checked against `schema`.
pub(super) fn duplicates(schema: &Value, value: &Value) -> Vec<FieldError> {
    let mut found = Vec::new();
    walk(schema, value, "", &mut found);
    found
}

fn walk(schema: &Value, value: &Value, path: &str, found: &mut Vec<FieldError>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let declared = schema
                    .get("properties")
                    .and_then(|p| p.get(key))
                    .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()));
                if let Some(child_schema) = declared {
                    walk(child_schema, child, &join(path, key), found);
                }
            }
        }
        Value::Array(items) => {
            check_list(schema, items, path, found);
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    walk(item_schema, item, &format!("{path}[{i}]"), found);
                }
            }
        }
        _ => {}
    }
}

fn check_list(schema: &Value, items: &[Value], path: &str, found: &mut Vec<FieldError>) {
    let key_of = |item: &Value| -> Value {
        match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("map") => {
                let keys = schema
                    .get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let mut key = serde_json::Map::new();
                for k in keys.iter().filter_map(Value::as_str) {
                    // NB: a key field left out counts as its default, as the API server keys it.
                    let field = item.get(k).cloned().or_else(|| {
                        schema
                            .pointer(&format!("/items/properties/{k}/default"))
                            .cloned()
                    });
                    key.insert(k.to_owned(), field.unwrap_or(Value::Null));
                }
                Value::Object(key)
            }
            _ => item.clone(),
        }
    };
    let list_type = schema.get("x-kubernetes-list-type").and_then(Value::as_str);
    if !matches!(list_type, Some("set" | "map")) {
        return;
    }
    let mut seen = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let key = key_of(item);
        if seen.contains(&key) {
            found.push(
                FieldError::new(format!("{path}[{i}]"), ErrorType::Duplicate, "")
                    .with_value(key.clone()),
            );
        } else {
            seen.push(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn sets_and_maps_hold_each_key_once() {
        let schema = json!({"type": "object", "properties": {
            "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["port", "protocol"],
                "items": {"type": "object", "properties": {
                    "port": {"type": "integer"}, "protocol": {"type": "string", "default": "TCP"}}}},
            "plain": {"type": "array", "items": {"type": "string"}},
        }});
        let object = json!({
            "tags": ["a", "b", "a"],
            "ports": [{"port": 80}, {"port": 80, "protocol": "UDP"}, {"port": 80, "protocol": "TCP"}],
            "plain": ["a", "a"],
        });
        let paths: Vec<_> = duplicates(&schema, &object)
            .into_iter()
            .map(|e| e.path)
            .collect();
        assert_eq!(paths, ["ports[2]", "tags[2]"]);
    }
}

//! JSON merge patch (RFC 7386) and JSON patch (RFC 6902).

use serde_json::Value;

use crate::error::{ApiError, Result};

/// Applies a merge patch: objects merge key by key, `null` removes, anything else
/// replaces.
pub fn merge(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(changes) => {
            if !target.is_object() {
                *target = Value::Object(Default::default());
            }
            let Some(map) = target.as_object_mut() else {
                return;
            };
            for (key, change) in changes {
                if change.is_null() {
                    map.remove(key);
                } else {
                    merge(map.entry(key.clone()).or_insert(Value::Null), change);
                }
            }
        }
        other => *target = other.clone(),
    }
}

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

/// The parent of the location `pointer` names, and the last token.
fn parent<'a>(target: &'a mut Value, pointer: &str) -> Result<(&'a mut Value, String)> {
    let bad = || ApiError::bad_request(format!("invalid JSON patch path {pointer:?}"));
    let tokens: Vec<String> = pointer
        .strip_prefix('/')
        .ok_or_else(bad)?
        .split('/')
        .map(unescape)
        .collect();
    let (last, path) = tokens.split_last().ok_or_else(bad)?;
    let mut node = target;
    for token in path {
        node = match node {
            Value::Object(map) => map.get_mut(token).ok_or_else(bad)?,
            Value::Array(items) => {
                let index: usize = token.parse().map_err(|_| bad())?;
                items.get_mut(index).ok_or_else(bad)?
            }
            _ => return Err(bad()),
        };
    }
    Ok((node, last.clone()))
}

fn get<'a>(target: &'a Value, pointer: &str) -> Option<&'a Value> {
    target.pointer(pointer)
}

fn add(target: &mut Value, pointer: &str, value: Value) -> Result<()> {
    if pointer.is_empty() {
        *target = value;
        return Ok(());
    }
    let (node, last) = parent(target, pointer)?;
    match node {
        Value::Object(map) => {
            map.insert(last, value);
            Ok(())
        }
        Value::Array(items) => {
            let index = if last == "-" {
                items.len()
            } else {
                last.parse::<usize>()
                    .ok()
                    .filter(|i| *i <= items.len())
                    .ok_or_else(|| {
                        ApiError::bad_request(format!("invalid array index in {pointer:?}"))
                    })?
            };
            items.insert(index, value);
            Ok(())
        }
        _ => Err(ApiError::bad_request(format!("cannot add at {pointer:?}"))),
    }
}

fn remove(target: &mut Value, pointer: &str) -> Result<Value> {
    let missing = || ApiError::bad_request(format!("nothing to remove at {pointer:?}"));
    let (node, last) = parent(target, pointer)?;
    match node {
        Value::Object(map) => map.remove(&last).ok_or_else(missing),
        Value::Array(items) => {
            let index: usize = last.parse().map_err(|_| missing())?;
            if index < items.len() {
                Ok(items.remove(index))
            } else {
                Err(missing())
            }
        }
        _ => Err(missing()),
    }
}

/// Applies a JSON patch; all or nothing.
pub fn json_patch(target: &Value, patch: &Value) -> Result<Value> {
    let operations = patch
        .as_array()
        .ok_or_else(|| ApiError::bad_request("a JSON patch is an array of operations"))?;
    let mut doc = target.clone();
    for operation in operations {
        let op = operation
            .get("op")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let path = operation
            .get("path")
            .and_then(Value::as_str)
            .ok_or_else(|| ApiError::bad_request("a JSON patch operation needs a path"))?;
        let value = || {
            operation
                .get("value")
                .cloned()
                .ok_or_else(|| ApiError::bad_request(format!("{op} at {path:?} needs a value")))
        };
        let from = || {
            operation
                .get("from")
                .and_then(Value::as_str)
                .ok_or_else(|| ApiError::bad_request(format!("{op} at {path:?} needs from")))
        };
        match op {
            "add" => add(&mut doc, path, value()?)?,
            "remove" => {
                remove(&mut doc, path)?;
            }
            "replace" => {
                remove(&mut doc, path)?;
                add(&mut doc, path, value()?)?;
            }
            "move" => {
                let moved = remove(&mut doc, from()?)?;
                add(&mut doc, path, moved)?;
            }
            "copy" => {
                let copied = get(&doc, from()?)
                    .cloned()
                    .ok_or_else(|| ApiError::bad_request(format!("nothing to copy at {path:?}")))?;
                add(&mut doc, path, copied)?;
            }
            "test" => {
                if get(&doc, path) != Some(&value()?) {
                    return Err(ApiError {
                        code: 422,
                        reason: "Invalid",
                        message: format!("the test at {path:?} failed"),
                        details: None,
                    });
                }
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "unknown JSON patch op {other:?}"
                )))
            }
        }
    }
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn merge_patch_merges_replaces_and_removes() {
        let mut doc = json!({"a": {"b": 1, "c": 2}, "d": [1, 2]});
        merge(&mut doc, &json!({"a": {"b": null, "e": 3}, "d": [3]}));
        assert_eq!(doc, json!({"a": {"c": 2, "e": 3}, "d": [3]}));
    }

    #[test]
    fn json_patch_applies_in_order_and_fails_as_a_whole() {
        let doc = json!({"spec": {"replicas": 1, "list": ["a"]}});
        let patched = json_patch(
            &doc,
            &json!([
                {"op": "replace", "path": "/spec/replicas", "value": 3},
                {"op": "add", "path": "/spec/list/-", "value": "b"},
                {"op": "test", "path": "/spec/list/0", "value": "a"},
                {"op": "copy", "from": "/spec/replicas", "path": "/spec/copy"},
            ]),
        )
        .unwrap();
        assert_eq!(
            patched,
            json!({"spec": {"replicas": 3, "list": ["a", "b"], "copy": 3}})
        );
        assert!(json_patch(&doc, &json!([{"op": "remove", "path": "/spec/missing"}])).is_err());
        assert!(json_patch(
            &doc,
            &json!([{"op": "test", "path": "/spec/replicas", "value": 2}])
        )
        .is_err());
    }
}

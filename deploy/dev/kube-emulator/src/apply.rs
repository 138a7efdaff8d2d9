//! Field ownership: server-side apply (`application/apply-patch+yaml`) and the
//! `managedFields` every write keeps.
//!
//! Each manager owns a set of field paths, recorded in `metadata.managedFields` as
//! `fieldsV1` (`{"f:spec": {"f:replicas": {}}}`). Simplifications against a real API
//! server: lists are owned as a whole (atomic), and a path is a leaf where the applied
//! configuration has a scalar, a list or an empty object.
//!
//! Apply rules kept: a field another manager owns with a different value is a conflict
//! (409) unless `force`, which takes it over; a field the manager applied before and no
//! longer applies is removed unless another manager owns it too; an apply of an object
//! that does not exist creates it. Other writes (update, merge or JSON patch) take the
//! fields they change from everyone, without conflict.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{SecondsFormat, Utc};
use serde_json::{json, Map, Value};

use crate::error::ApiError;

type Path = Vec<String>;
type Fields = BTreeSet<Path>;

/// Top-level and metadata fields that are the server's or identity, never owned.
const UNOWNED_TOP: &[&str] = &["apiVersion", "kind", "status"];
const OWNED_METADATA: &[&str] = &["labels", "annotations", "finalizers", "ownerReferences"];

/// The owned leaf paths of `object` (`status` excluded; see [`status_leaves`]).
pub fn leaves(object: &Value) -> Fields {
    let mut out = Fields::new();
    if let Some(map) = object.as_object() {
        for (key, value) in map {
            if UNOWNED_TOP.contains(&key.as_str()) {
                continue;
            }
            if key == "metadata" {
                for field in OWNED_METADATA {
                    if let Some(value) = value.get(*field) {
                        collect(value, vec!["metadata".into(), (*field).into()], &mut out);
                    }
                }
                continue;
            }
            collect(value, vec![key.clone()], &mut out);
        }
    }
    out
}

/// The leaf paths under `status`.
pub fn status_leaves(object: &Value) -> Fields {
    let mut out = Fields::new();
    if let Some(status) = object.get("status") {
        collect(status, vec!["status".into()], &mut out);
    }
    out
}

fn collect(value: &Value, path: Path, out: &mut Fields) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, child) in map {
                let mut next = path.clone();
                next.push(key.clone());
                collect(child, next, out);
            }
        }
        _ => {
            out.insert(path);
        }
    }
}

fn get<'a>(object: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(object, |v, key| v.get(key))
}

fn set(object: &mut Value, path: &[String], value: Value) {
    let mut node = object;
    for key in &path[..path.len() - 1] {
        if !node.get(key).is_some_and(Value::is_object) {
            node[key.as_str()] = json!({});
        }
        node = &mut node[key.as_str()];
    }
    node[path[path.len() - 1].as_str()] = value;
}

/// Removes the field and any object left empty above it.
fn unset(object: &mut Value, path: &[String]) {
    if path.is_empty() {
        return;
    }
    let Some(parent) = path[..path.len() - 1]
        .iter()
        .try_fold(&mut *object, |v, key| v.get_mut(key))
    else {
        return;
    };
    if let Some(map) = parent.as_object_mut() {
        map.remove(&path[path.len() - 1]);
        if map.is_empty() && path.len() > 1 {
            unset(object, &path[..path.len() - 1]);
        }
    }
}

fn overlaps(a: &[String], b: &[String]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// One `managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    manager: String,
    apply: bool,
    subresource: String,
    fields: Fields,
}

fn to_fields_v1(fields: &Fields) -> Value {
    let mut root = Map::new();
    for path in fields {
        let mut node = &mut root;
        for key in path {
            let entry = node
                .entry(format!("f:{key}"))
                .or_insert_with(|| Value::Object(Map::new()));
            node = entry.as_object_mut().expect("fieldsV1 nodes are objects");
        }
    }
    Value::Object(root)
}

fn from_fields_v1(value: &Value, path: Path, out: &mut Fields) {
    let Some(map) = value.as_object() else {
        return;
    };
    let children: Vec<_> = map.iter().filter(|(k, _)| k.starts_with("f:")).collect();
    if children.is_empty() {
        if !path.is_empty() {
            out.insert(path);
        }
        return;
    }
    for (key, child) in children {
        let mut next = path.clone();
        next.push(key[2..].to_owned());
        from_fields_v1(child, next, out);
    }
}

fn read_entries(object: &Value) -> Vec<Entry> {
    let Some(list) = object
        .get("metadata")
        .and_then(|m| m.get("managedFields"))
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    list.iter()
        .map(|entry| {
            let mut fields = Fields::new();
            if let Some(v1) = entry.get("fieldsV1") {
                from_fields_v1(v1, Vec::new(), &mut fields);
            }
            Entry {
                manager: entry
                    .get("manager")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                apply: entry.get("operation").and_then(Value::as_str) == Some("Apply"),
                subresource: entry
                    .get("subresource")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                fields,
            }
        })
        .collect()
}

fn write_entries(object: &mut Value, entries: &[Entry], api_version: &str) {
    let time = Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true);
    let list: Vec<Value> = entries
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(|e| {
            let mut entry = json!({
                "manager": e.manager,
                "operation": if e.apply { "Apply" } else { "Update" },
                "apiVersion": api_version,
                "time": time,
                "fieldsType": "FieldsV1",
                "fieldsV1": to_fields_v1(&e.fields),
            });
            if !e.subresource.is_empty() {
                entry["subresource"] = json!(e.subresource);
            }
            entry
        })
        .collect();
    if !object.get("metadata").is_some_and(Value::is_object) {
        object["metadata"] = json!({});
    }
    if list.is_empty() {
        if let Some(m) = object["metadata"].as_object_mut() {
            m.remove("managedFields");
        }
    } else {
        object["metadata"]["managedFields"] = Value::Array(list);
    }
}

fn dotted(path: &[String]) -> String {
    format!(".{}", path.join("."))
}

/// The object after `manager` applies `config` to `current` (`None`: it does not
/// exist yet); `subresource` is `"status"` for an apply to `/status`.
///
/// # Errors
/// `Conflict` (409) naming each conflicting field and its manager, unless `force`.
pub fn apply(
    current: Option<&Value>,
    config: &Value,
    manager: &str,
    force: bool,
    subresource: &str,
    api_version: &str,
) -> Result<Value, ApiError> {
    let mut object = current.cloned().unwrap_or_else(|| json!({}));
    let applied = if subresource == "status" {
        status_leaves(config)
    } else {
        leaves(config)
    };
    let mut entries = read_entries(&object);

    let mut conflicts = BTreeMap::<String, Vec<String>>::new();
    for entry in entries
        .iter()
        .filter(|e| e.manager != manager && e.subresource == subresource)
    {
        for path in &applied {
            for owned in entry.fields.iter().filter(|owned| overlaps(owned, path)) {
                let wanted = get(config, owned);
                if wanted.is_some() && get(&object, owned) != wanted {
                    conflicts
                        .entry(entry.manager.clone())
                        .or_default()
                        .push(dotted(owned));
                }
            }
        }
    }
    if !conflicts.is_empty() && !force {
        let count: usize = conflicts.values().map(Vec::len).sum();
        let list: Vec<String> = conflicts
            .iter()
            .flat_map(|(m, paths)| {
                paths
                    .iter()
                    .map(move |p| format!("conflict with \"{m}\": {p}"))
            })
            .collect();
        return Err(ApiError::conflict(format!(
            "Apply failed with {count} conflict{}: {}",
            if count == 1 { "" } else { "s" },
            list.join(", ")
        )));
    }

    let before: Fields = entries
        .iter()
        .find(|e| e.manager == manager && e.apply && e.subresource == subresource)
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    // Others keep what they own unless this apply took it (force, or equal values
    // shared: a real server shares those; we hand them over, which changes nothing
    // visible but the entry).
    for entry in entries
        .iter_mut()
        .filter(|e| e.manager != manager && e.subresource == subresource)
    {
        entry.fields.retain(|owned| {
            let contested = applied.iter().any(|path| overlaps(owned, path));
            let wanted = get(config, owned);
            !(contested && force && wanted.is_some() && get(&object, owned) != wanted)
        });
    }
    for path in &applied {
        match get(config, path) {
            // An empty map applied is "this map exists", not "this map is empty".
            Some(Value::Object(map))
                if map.is_empty() && get(&object, path).is_some_and(Value::is_object) => {}
            Some(value) => set(&mut object, path, value.clone()),
            None => {}
        }
    }
    for dropped in before.difference(&applied) {
        let still_owned = entries
            .iter()
            .any(|e| e.manager != manager && e.fields.iter().any(|f| overlaps(f, dropped)));
        let reapplied = applied.iter().any(|p| p.starts_with(dropped));
        if !still_owned && !reapplied {
            unset(&mut object, dropped);
        }
    }
    entries.retain(|e| !(e.manager == manager && e.apply && e.subresource == subresource));
    entries.push(Entry {
        manager: manager.to_owned(),
        apply: true,
        subresource: subresource.to_owned(),
        fields: applied,
    });
    // Identity and type come from the configuration on create.
    for key in ["apiVersion", "kind"] {
        if let Some(value) = config.get(key) {
            object[key] = value.clone();
        }
    }
    if let Some(name) = config.get("metadata").and_then(|m| m.get("name")) {
        if !object.get("metadata").is_some_and(Value::is_object) {
            object["metadata"] = json!({});
        }
        object["metadata"]["name"] = name.clone();
    }
    write_entries(&mut object, &entries, api_version);
    Ok(object)
}

/// Records a non-apply write by `manager`: it owns the fields it changed, which leave
/// every other manager.
pub fn record_update(
    before: Option<&Value>,
    after: &mut Value,
    manager: &str,
    subresource: &str,
    api_version: &str,
) {
    let old = before.cloned().unwrap_or(Value::Null);
    let (was, now) = if subresource == "status" {
        (status_leaves(&old), status_leaves(after))
    } else {
        (leaves(&old), leaves(after))
    };
    let changed: Fields = now
        .iter()
        .filter(|p| get(&old, p) != get(after, p))
        .chain(was.iter().filter(|p| get(after, p).is_none()))
        .cloned()
        .collect();
    let mut entries = before.map(read_entries).unwrap_or_default();
    if changed.is_empty() {
        write_entries(after, &entries, api_version);
        return;
    }
    for entry in entries.iter_mut().filter(|e| e.manager != manager) {
        entry
            .fields
            .retain(|owned| !changed.iter().any(|c| overlaps(owned, c)));
    }
    let existing = entries
        .iter_mut()
        .find(|e| e.manager == manager && !e.apply && e.subresource == subresource);
    let live: Fields = changed
        .into_iter()
        .filter(|p| get(after, p).is_some())
        .collect();
    match existing {
        Some(entry) => entry.fields.extend(live),
        None => entries.push(Entry {
            manager: manager.to_owned(),
            apply: false,
            subresource: subresource.to_owned(),
            fields: live,
        }),
    }
    write_entries(after, &entries, api_version);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn managers(object: &Value) -> Vec<(String, String)> {
        object["metadata"]["managedFields"]
            .as_array()
            .map(|list| {
                list.iter()
                    .map(|e| {
                        (
                            e["manager"].as_str().unwrap().to_owned(),
                            e["operation"].as_str().unwrap().to_owned(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn apply_creates_owns_conflicts_forces_and_removes_dropped_fields() {
        let config = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"a": "1"}}, "data": {"x": "1", "y": "2"}});
        let created = apply(None, &config, "alice", false, "", "v1").unwrap();
        assert_eq!(created["data"], json!({"x": "1", "y": "2"}));
        assert_eq!(
            created["metadata"]["managedFields"][0]["fieldsV1"]["f:data"],
            json!({"f:x": {}, "f:y": {}})
        );

        // Bob sets x differently: a conflict naming alice and the field.
        let bob = json!({"metadata": {"name": "c"}, "data": {"x": "9"}});
        let conflict = apply(Some(&created), &bob, "bob", false, "", "v1").unwrap_err();
        assert_eq!(conflict.code, 409);
        assert!(
            conflict
                .message
                .contains("conflict with \"alice\": .data.x"),
            "{}",
            conflict.message
        );
        // Bob applying the same value is fine; forced, he takes x over.
        let forced = apply(Some(&created), &bob, "bob", true, "", "v1").unwrap();
        assert_eq!(forced["data"]["x"], "9");
        assert_eq!(
            managers(&forced),
            [
                ("alice".into(), "Apply".into()),
                ("bob".into(), "Apply".into())
            ]
        );

        // Alice stops applying y and the label: both go; x is bob's now and stays.
        let alice = json!({"metadata": {"name": "c"}, "data": {}});
        let after = apply(Some(&forced), &alice, "alice", false, "", "v1").unwrap();
        assert_eq!(after["data"], json!({"x": "9"}));
        assert!(after["metadata"].get("labels").is_none());
    }

    #[test]
    fn an_update_takes_the_fields_it_changes() {
        let applied = apply(
            None,
            &json!({"metadata": {"name": "c"}, "data": {"x": "1"}}),
            "alice",
            false,
            "",
            "v1",
        )
        .unwrap();
        let mut edited = applied.clone();
        edited["data"]["x"] = json!("2");
        record_update(Some(&applied), &mut edited, "kubectl-edit", "", "v1");
        assert_eq!(
            managers(&edited),
            [("kubectl-edit".into(), "Update".into())]
        );
        // Alice applying x=1 again does not conflict with a field nobody else owns... but
        // kubectl-edit owns it now, with another value: conflict.
        assert!(apply(
            Some(&edited),
            &json!({"metadata": {"name": "c"}, "data": {"x": "1"}}),
            "alice",
            false,
            "",
            "v1"
        )
        .is_err());
    }
}

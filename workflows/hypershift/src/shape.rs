//! The shape of a JSON input checked field by field before it is decoded, so that every
//! missing, mistyped or unknown field is reported at once (serde stops at the first).

use serde_json::Value;

/// What a field must hold.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    String,
    StringList,
    Integer,
    Bool,
    /// A JSON object of string values.
    StringMap,
    /// An object with its own fields.
    Object(&'static [Field]),
    /// A list of objects with these fields.
    ObjectList(&'static [Field]),
}

/// One field: its name, kind, and whether it must be present (and not null).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Field {
    pub(crate) name: &'static str,
    pub(crate) kind: Kind,
    pub(crate) required: bool,
}

pub(crate) const fn required(name: &'static str, kind: Kind) -> Field {
    Field {
        name,
        kind,
        required: true,
    }
}

pub(crate) const fn optional(name: &'static str, kind: Kind) -> Field {
    Field {
        name,
        kind,
        required: false,
    }
}

/// Every problem with `value` against `fields`, each naming its field path.
pub(crate) fn problems(value: &Value, fields: &[Field]) -> Vec<String> {
    let mut found = Vec::new();
    check_object(value, fields, "", &mut found);
    found
}

fn check_object(value: &Value, fields: &[Field], path: &str, found: &mut Vec<String>) {
    let Some(object) = value.as_object() else {
        found.push(format!(
            "{}: must be an object, not {}",
            if path.is_empty() { "input" } else { path },
            kind_of(value)
        ));
        return;
    };
    for field in fields {
        let at = join(path, field.name);
        match object.get(field.name) {
            None | Some(Value::Null) if field.required => found.push(format!("{at}: required")),
            None | Some(Value::Null) => {}
            Some(value) => check(value, field.kind, &at, found),
        }
    }
    for key in object.keys() {
        if !fields.iter().any(|f| f.name == key) {
            let known: Vec<&str> = fields.iter().map(|f| f.name).collect();
            found.push(format!(
                "{}: unknown field (known: {})",
                join(path, key),
                known.join(", ")
            ));
        }
    }
}

fn check(value: &Value, kind: Kind, at: &str, found: &mut Vec<String>) {
    match kind {
        Kind::Object(fields) => check_object(value, fields, at, found),
        Kind::ObjectList(fields) => match value.as_array() {
            Some(items) => {
                for (index, item) in items.iter().enumerate() {
                    check_object(item, fields, &format!("{at}[{index}]"), found);
                }
            }
            None => found.push(format!("{at}: must be a list, not {}", kind_of(value))),
        },
        _ if fits(value, kind) => {}
        _ => {
            let wanted = match kind {
                Kind::String => "a string",
                Kind::Integer => "an integer",
                Kind::Bool => "a boolean",
                Kind::StringList => "a list of strings",
                Kind::StringMap => "an object of strings",
                Kind::Object(_) | Kind::ObjectList(_) => "an object",
            };
            found.push(format!("{at}: must be {wanted}, not {}", kind_of(value)));
        }
    }
}

/// A copy of `value` that has the shape of `fields`: a placeholder (empty, zero, false)
/// for each missing or mistyped required field, mistyped optional and unknown fields
/// dropped. Decoding it lets the well-formed fields be checked too; the placeholders'
/// own problems are dropped by [`merge`].
pub(crate) fn repaired(value: &Value, fields: &[Field]) -> Value {
    let object = value.as_object().cloned().unwrap_or_default();
    let mut out = serde_json::Map::new();
    for field in fields {
        let present = object.get(field.name).filter(|v| !v.is_null());
        let fixed = match present {
            Some(value) if fits(value, field.kind) => Some(match field.kind {
                Kind::Object(inner) => repaired(value, inner),
                Kind::ObjectList(inner) => Value::Array(
                    value
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|item| repaired(item, inner))
                        .collect(),
                ),
                _ => value.clone(),
            }),
            _ if field.required => Some(placeholder(field.kind)),
            _ => None,
        };
        if let Some(fixed) = fixed {
            out.insert(field.name.to_owned(), fixed);
        }
    }
    Value::Object(out)
}

/// The shape problems, then every other problem except those about a field that already
/// has a shape problem (they would be about its placeholder).
pub(crate) fn merge(shape: Vec<String>, checks: Vec<String>) -> Vec<String> {
    let paths: Vec<String> = shape
        .iter()
        .filter_map(|p| p.split_once(": ").map(|(path, _)| path.to_owned()))
        .collect();
    let about_a_broken_field = |problem: &String| {
        paths.iter().any(|path| {
            problem.strip_prefix(path.as_str()).is_some_and(|rest| {
                rest.starts_with(':') || rest.starts_with('.') || rest.starts_with('[')
            })
        })
    };
    let mut all = shape.clone();
    all.extend(checks.into_iter().filter(|p| !about_a_broken_field(p)));
    all
}

fn fits(value: &Value, kind: Kind) -> bool {
    match kind {
        Kind::String => value.is_string(),
        Kind::Integer => value.is_i64() || value.is_u64(),
        Kind::Bool => value.is_boolean(),
        Kind::StringList => value
            .as_array()
            .is_some_and(|items| items.iter().all(Value::is_string)),
        Kind::StringMap => value
            .as_object()
            .is_some_and(|map| map.values().all(Value::is_string)),
        Kind::Object(_) => value.is_object(),
        Kind::ObjectList(_) => value.is_array(),
    }
}

fn placeholder(kind: Kind) -> Value {
    match kind {
        Kind::String => Value::String(String::new()),
        Kind::Integer => Value::from(0),
        Kind::Bool => Value::Bool(false),
        Kind::StringList | Kind::ObjectList(_) => Value::Array(Vec::new()),
        Kind::StringMap => Value::Object(serde_json::Map::new()),
        Kind::Object(inner) => repaired(&Value::Null, inner),
    }
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const POOL: &[Field] = &[
        required("name", Kind::String),
        optional("replicas", Kind::Integer),
    ];
    const INPUT: &[Field] = &[
        required("name", Kind::String),
        required("zones", Kind::StringList),
        optional("pools", Kind::ObjectList(POOL)),
        optional("keep", Kind::Bool),
    ];

    #[test]
    fn every_problem_is_named_at_once() {
        let found = problems(
            &json!({"zones": ["a", 1], "pools": [{"replicas": "2"}], "keep": true, "extra": 1}),
            INPUT,
        );
        assert_eq!(
            found,
            vec![
                "name: required",
                "zones: must be a list of strings, not a list",
                "pools[0].name: required",
                "pools[0].replicas: must be an integer, not a string",
                "extra: unknown field (known: name, zones, pools, keep)",
            ]
        );
        assert!(problems(&json!({"name": "a", "zones": []}), INPUT).is_empty());
        assert_eq!(
            problems(&json!([1]), INPUT),
            vec!["input: must be an object, not a list"]
        );
    }
}

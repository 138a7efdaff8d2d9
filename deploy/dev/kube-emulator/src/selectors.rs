//! Label selectors (`a=b`, `a!=b`, `a`, `!a`, `a in (x,y)`, `a notin (x,y)`) and field
//! selectors (`metadata.name`, `metadata.namespace` with `=`, `==`, `!=`).

use serde_json::Value;

use crate::error::{ApiError, Result};
use crate::store::{at, meta};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    NotExists(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

/// A list or watch's label and field selectors; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selectors {
    labels: Vec<Requirement>,
    fields: Vec<Requirement>,
}

/// Splits at commas outside parentheses.
fn terms(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(text[start..].trim());
    out.into_iter().filter(|t| !t.is_empty()).collect()
}

fn parse(text: &str, what: &str) -> Result<Vec<Requirement>> {
    let bad = |term: &str| {
        ApiError::bad_request(format!("unable to parse {what} selector term {term:?}"))
    };
    terms(text)
        .into_iter()
        .map(|term| {
            if let Some(key) = term.strip_prefix('!') {
                return Ok(Requirement::NotExists(key.trim().to_owned()));
            }
            if let Some((key, value)) = term.split_once("!=") {
                return Ok(Requirement::NotEquals(
                    key.trim().into(),
                    value.trim().into(),
                ));
            }
            if let Some((key, value)) = term.split_once("==").or_else(|| term.split_once('=')) {
                return Ok(Requirement::Equals(key.trim().into(), value.trim().into()));
            }
            for (word, negated) in [(" notin ", true), (" in ", false)] {
                if let Some((key, set)) = term.split_once(word) {
                    let set = set.trim();
                    let inner = set
                        .strip_prefix('(')
                        .and_then(|s| s.strip_suffix(')'))
                        .ok_or_else(|| bad(term))?;
                    let values = inner.split(',').map(|v| v.trim().to_owned()).collect();
                    let key = key.trim().to_owned();
                    return Ok(if negated {
                        Requirement::NotIn(key, values)
                    } else {
                        Requirement::In(key, values)
                    });
                }
            }
            if term
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
            {
                return Ok(Requirement::Exists(term.to_owned()));
            }
            Err(bad(term))
        })
        .collect()
}

impl Selectors {
    pub fn parse(labels: Option<&str>, fields: Option<&str>) -> Result<Self> {
        let fields = parse(fields.unwrap_or_default(), "field")?;
        for field in &fields {
            let key = match field {
                Requirement::Equals(k, _) | Requirement::NotEquals(k, _) => k,
                _ => {
                    return Err(ApiError::bad_request(
                        "field selectors support =, == and != only",
                    ))
                }
            };
            if !matches!(key.as_str(), "metadata.name" | "metadata.namespace") {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {key} (metadata.name and metadata.namespace are)"
                )));
            }
        }
        Ok(Self {
            labels: parse(labels.unwrap_or_default(), "label")?,
            fields,
        })
    }

    pub fn matches(&self, object: &Value) -> bool {
        let labels = meta(object).get("labels");
        let label = |key: &str| {
            labels
                .and_then(|l| l.get(key))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let field = |key: &str| at(object, key).and_then(Value::as_str).map(str::to_owned);
        self.labels.iter().all(|r| satisfied(r, label))
            && self.fields.iter().all(|r| satisfied(r, field))
    }
}

fn satisfied(requirement: &Requirement, value_of: impl Fn(&str) -> Option<String>) -> bool {
    match requirement {
        Requirement::Equals(k, v) => value_of(k).as_ref() == Some(v),
        Requirement::NotEquals(k, v) => value_of(k).as_ref() != Some(v),
        Requirement::Exists(k) => value_of(k).is_some(),
        Requirement::NotExists(k) => value_of(k).is_none(),
        Requirement::In(k, set) => value_of(k).is_some_and(|v| set.contains(&v)),
        Requirement::NotIn(k, set) => value_of(k).is_none_or(|v| !set.contains(&v)),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn label_and_field_selectors_match_as_kubernetes_does() {
        let object = json!({"metadata": {"name": "a", "namespace": "ns", "labels": {"app": "x", "tier": "web"}}});
        let matches = |labels: &str, fields: &str| {
            Selectors::parse(Some(labels), Some(fields))
                .unwrap()
                .matches(&object)
        };
        assert!(matches("", ""));
        assert!(matches("app=x,tier in (web, db)", "metadata.name=a"));
        assert!(matches("app==x,!missing,tier", "metadata.namespace!=other"));
        assert!(!matches("app!=x", ""));
        assert!(!matches("tier notin (web)", ""));
        assert!(!matches("", "metadata.name=b"));
        assert!(Selectors::parse(None, Some("spec.x=1")).is_err());
        assert!(Selectors::parse(Some("a in x"), None).is_err());
    }
}

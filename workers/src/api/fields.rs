//! Request fields: a request body read field by field, every missing, mistyped or
//! invalid field collected into one `invalid_request` error that names them all.

use hcpflow_engine::WorkflowId;
use hcpflow_protocol::{ApiError, StartRequest};
use serde_json::{Map, Value};

/// A list page's size when the request names none, and the most it may ask for.
const DEFAULT_PAGE: u32 = 100;
const MAX_PAGE: u32 = 1000;

/// Parses a start body, naming every missing or mistyped field.
pub fn parse_start(fields: &Fields) -> Result<StartRequest, ApiError> {
    let mut problems = Vec::new();
    let workflow_type = fields.required_string("workflow_type", &mut problems);
    let workflow_id = fields
        .optional_string("workflow_id", &mut problems)
        .and_then(|id| {
            WorkflowId::new(id)
                .map_err(|error| problems.push(format!("workflow_id: {error}")))
                .ok()
        });
    let input = fields.required("input", &mut problems);
    let parent = match fields.0.get("parent") {
        None | Some(Value::Null) => None,
        Some(value) => serde_json::from_value(value.clone())
            .map_err(|e| problems.push(format!("parent: {e}")))
            .ok(),
    };
    finish(problems)?;
    Ok(StartRequest {
        workflow_type: workflow_type.unwrap_or_default(),
        workflow_id,
        input: input.unwrap_or(Value::Null),
        parent,
    })
}

pub(crate) fn finish(problems: Vec<String>) -> Result<(), ApiError> {
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(problems.join("; ")))
    }
}

/// Only reached after `finish` confirmed the id parsed.
pub(crate) fn placeholder() -> WorkflowId {
    WorkflowId::new("invalid").unwrap_or_else(|_| unreachable!("a valid literal"))
}

/// A request object, read field by field with every problem collected.
#[derive(Debug)]
pub struct Fields(pub Map<String, Value>);

impl Fields {
    pub(crate) fn required(&self, name: &str, problems: &mut Vec<String>) -> Option<Value> {
        let value = self.0.get(name).cloned();
        if value.is_none() {
            problems.push(format!("{name}: required"));
        }
        value
    }

    pub(crate) fn required_string(&self, name: &str, problems: &mut Vec<String>) -> Option<String> {
        match self.0.get(name) {
            Some(Value::String(text)) if !text.is_empty() => Some(text.clone()),
            Some(Value::String(_)) => {
                problems.push(format!("{name}: must not be empty"));
                None
            }
            Some(other) => {
                problems.push(format!("{name}: must be a string, not {}", kind(other)));
                None
            }
            None => {
                problems.push(format!("{name}: required"));
                None
            }
        }
    }

    pub(crate) fn optional_string(&self, name: &str, problems: &mut Vec<String>) -> Option<String> {
        match self.0.get(name) {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) => Some(text.clone()),
            Some(other) => {
                problems.push(format!("{name}: must be a string, not {}", kind(other)));
                None
            }
        }
    }

    pub(crate) fn optional_bool(&self, name: &str, problems: &mut Vec<String>) -> Option<bool> {
        match self.0.get(name) {
            None | Some(Value::Null) => None,
            Some(Value::Bool(flag)) => Some(*flag),
            Some(other) => {
                problems.push(format!("{name}: must be a boolean, not {}", kind(other)));
                None
            }
        }
    }

    pub(crate) fn optional_u64(&self, name: &str, problems: &mut Vec<String>) -> Option<u64> {
        match self.0.get(name) {
            None | Some(Value::Null) => None,
            Some(value) => value.as_u64().or_else(|| {
                problems.push(format!(
                    "{name}: must be a non-negative integer, not {}",
                    kind(value)
                ));
                None
            }),
        }
    }

    pub(crate) fn workflow_id(&self, name: &str, problems: &mut Vec<String>) -> Option<WorkflowId> {
        let text = self.required_string(name, problems)?;
        WorkflowId::new(text)
            .map_err(|e| problems.push(format!("{name}: {e}")))
            .ok()
    }

    pub(crate) fn limit(&self, problems: &mut Vec<String>) -> u32 {
        match self.optional_u64("limit", problems) {
            None => DEFAULT_PAGE,
            Some(n) if (1..=u64::from(MAX_PAGE)).contains(&n) => n as u32,
            Some(n) => {
                problems.push(format!("limit: must be 1-{MAX_PAGE}, not {n}"));
                DEFAULT_PAGE
            }
        }
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

//! Request fields: a request body read field by field into the protocol's request type
//! for its verb, every missing, mistyped or invalid field collected into one
//! `invalid_request` error that names them all.

use hcpflow_engine::{Seq, WorkflowId, WorkflowStatus};
use hcpflow_protocol::{
    ApiError, CancelRequest, ClustersRequest, DescribeRequest, DestroyRequest, HistoryRequest,
    ListRequest, SignalRequest, StartRequest, VerifyRequest,
};
use serde_json::{Map, Value};

/// A list page's size when the request names none, and the most it may ask for.
pub const DEFAULT_PAGE: u32 = 100;
const MAX_PAGE: u32 = 1000;

/// A request type the server reads from a body, naming every missing, mistyped or
/// invalid field in one error (serde would stop at the first).
pub trait FromFields: Sized {
    fn from_fields(fields: &Fields) -> Result<Self, ApiError>;
}

impl FromFields for StartRequest {
    fn from_fields(fields: &Fields) -> Result<Self, ApiError> {
        let mut problems = Vec::new();
        let workflow_type = fields.required_string("workflow_type", &mut problems);
        let workflow_id = fields.optional_workflow_id("workflow_id", &mut problems);
        let input = fields.required("input", &mut problems);
        let parent = match fields.0.get("parent") {
            None | Some(Value::Null) => None,
            Some(value) => serde_json::from_value(value.clone())
                .map_err(|e| problems.push(format!("parent: {e}")))
                .ok(),
        };
        let request = workflow_type
            .zip(input)
            .map(|(workflow_type, input)| StartRequest {
                workflow_type,
                workflow_id,
                input,
                parent,
            });
        finish(problems, request)
    }
}

impl FromFields for DestroyRequest {
    fn from_fields(fields: &Fields) -> Result<Self, ApiError> {
        StartRequest::from_fields(fields).map(DestroyRequest)
    }
}

impl FromFields for DescribeRequest {
    fn from_fields(fields: &Fields) -> Result<Self, ApiError> {
        fields
            .only_workflow_id()
            .map(|workflow_id| Self { workflow_id })
    }
}

impl FromFields for VerifyRequest {
    fn from_fields(fields: &Fields) -> Result<Self, ApiError> {
        fields
            .only_workflow_id()
            .map(|workflow_id| Self { workflow_id })
    }
}

impl FromFields for ListRequest {
    fn from_fields(fields: &Fields) -> Result<Self, ApiError> {
        let mut problems = Vec::new();
        let status = fields
            .optional_string("status", &mut problems)
            .and_then(|text| {
                text.parse::<WorkflowStatus>()
                    .map_err(|_| problems.push(format!("status: {text:?} is not a status")))
                    .ok()
            });
        let request = ListRequest {
            status,
            workflow_type: fields.optional_string("workflow_type", &mut problems),
            concurrency_key: fields.optional_string("concurrency_key", &mut problems),
            limit: fields.limit(&mut problems),
            cursor: fields.optional_string("cursor", &mut problems),
        };
        finish(problems, Some(request))
    }
}

impl FromFields for HistoryRequest {
    fn from_fields(fields: &Fields) -> Result<Self, ApiError> {
        let mut problems = Vec::new();
        let workflow_id = fields.workflow_id("workflow_id", &mut problems);
        let from_seq = fields
            .optional_u64("from_seq", &mut problems)
            .and_then(|from| {
                Seq::new(from)
                    .map_err(|_| problems.push("from_seq: must be at least 1".into()))
                    .ok()
            });
        let limit = fields.limit(&mut problems);
        let cursor = fields.optional_string("cursor", &mut problems);
        if let Some(cursor) = &cursor {
            if cursor.parse::<Seq>().is_err() {
                problems.push(format!("cursor: {cursor:?} was not issued by history"));
            }
        }
        let raw = fields.optional_bool("raw", &mut problems).unwrap_or(false);
        let request = workflow_id.map(|workflow_id| HistoryRequest {
            workflow_id,
            from_seq,
            limit,
            cursor,
            raw,
        });
        finish(problems, request)
    }
}

impl FromFields for SignalRequest {
    fn from_fields(fields: &Fields) -> Result<Self, ApiError> {
        let mut problems = Vec::new();
        let workflow_id = fields.workflow_id("workflow_id", &mut problems);
        let signal = fields.required_string("signal", &mut problems);
        let payload = fields.required("payload", &mut problems);
        let request =
            workflow_id
                .zip(signal)
                .zip(payload)
                .map(|((workflow_id, signal), payload)| SignalRequest {
                    workflow_id,
                    signal,
                    payload,
                });
        finish(problems, request)
    }
}

impl FromFields for CancelRequest {
    fn from_fields(fields: &Fields) -> Result<Self, ApiError> {
        let mut problems = Vec::new();
        let workflow_id = fields.workflow_id("workflow_id", &mut problems);
        let reason = fields.optional_string("reason", &mut problems);
        finish(
            problems,
            workflow_id.map(|workflow_id| CancelRequest {
                workflow_id,
                reason,
            }),
        )
    }
}

impl FromFields for ClustersRequest {
    fn from_fields(fields: &Fields) -> Result<Self, ApiError> {
        let mut problems = Vec::new();
        let request = ClustersRequest {
            name: fields.optional_string("name", &mut problems),
            include_destroyed: fields
                .optional_bool("include_destroyed", &mut problems)
                .unwrap_or(false),
            limit: fields.limit(&mut problems),
        };
        finish(problems, Some(request))
    }
}

/// The request, or one `invalid_request` naming every problem. A part of the request
/// is missing only when a problem says why.
fn finish<T>(mut problems: Vec<String>, request: Option<T>) -> Result<T, ApiError> {
    match request {
        Some(request) if problems.is_empty() => Ok(request),
        _ => {
            if problems.is_empty() {
                problems.push("the request is incomplete".into());
            }
            Err(ApiError::invalid(problems.join("; ")))
        }
    }
}

/// A request object, read field by field with every problem collected.
#[derive(Debug)]
pub struct Fields(pub Map<String, Value>);

impl Fields {
    /// The request type `R`, or the error naming every problem.
    pub fn read<R: FromFields>(&self) -> Result<R, ApiError> {
        R::from_fields(self)
    }

    /// The `workflow_id` of a request that names nothing else.
    fn only_workflow_id(&self) -> Result<WorkflowId, ApiError> {
        let mut problems = Vec::new();
        let workflow_id = self.workflow_id("workflow_id", &mut problems);
        finish(problems, workflow_id)
    }

    fn required(&self, name: &str, problems: &mut Vec<String>) -> Option<Value> {
        let value = self.0.get(name).cloned();
        if value.is_none() {
            problems.push(format!("{name}: required"));
        }
        value
    }

    fn required_string(&self, name: &str, problems: &mut Vec<String>) -> Option<String> {
        match self.0.get(name) {
            Some(Value::String(text)) if text.contains('\0') => {
                problems.push(format!("{name}: must not contain a NUL character"));
                None
            }
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

    fn optional_string(&self, name: &str, problems: &mut Vec<String>) -> Option<String> {
        match self.0.get(name) {
            None | Some(Value::Null) => None,
            // Postgres text cannot hold it: refused here, not failed there.
            Some(Value::String(text)) if text.contains('\0') => {
                problems.push(format!("{name}: must not contain a NUL character"));
                None
            }
            Some(Value::String(text)) => Some(text.clone()),
            Some(other) => {
                problems.push(format!("{name}: must be a string, not {}", kind(other)));
                None
            }
        }
    }

    fn optional_bool(&self, name: &str, problems: &mut Vec<String>) -> Option<bool> {
        match self.0.get(name) {
            None | Some(Value::Null) => None,
            Some(Value::Bool(flag)) => Some(*flag),
            Some(other) => {
                problems.push(format!("{name}: must be a boolean, not {}", kind(other)));
                None
            }
        }
    }

    fn optional_u64(&self, name: &str, problems: &mut Vec<String>) -> Option<u64> {
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

    fn workflow_id(&self, name: &str, problems: &mut Vec<String>) -> Option<WorkflowId> {
        let text = self.required_string(name, problems)?;
        WorkflowId::new(text)
            .map_err(|e| problems.push(format!("{name}: {e}")))
            .ok()
    }

    fn optional_workflow_id(&self, name: &str, problems: &mut Vec<String>) -> Option<WorkflowId> {
        let text = self.optional_string(name, problems)?;
        WorkflowId::new(text)
            .map_err(|e| problems.push(format!("{name}: {e}")))
            .ok()
    }

    /// A page size, 1–[`MAX_PAGE`]; `None` when the request names none.
    fn limit(&self, problems: &mut Vec<String>) -> Option<u32> {
        match self.optional_u64("limit", problems)? {
            n if (1..=u64::from(MAX_PAGE)).contains(&n) => Some(n as u32),
            n => {
                problems.push(format!("limit: must be 1-{MAX_PAGE}, not {n}"));
                None
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

//! Message bodies on NATS: the public API replies and the internal task messages.

use hcpflow_eventstore::registry::ClusterRecord;
use hcpflow_eventstore::{StoredEvent, WorkflowSummary};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The error codes of DESIGN.md §4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    InvalidJson,
    InvalidRequest,
    UnknownWorkflowType,
    TooLarge,
    Conflict,
    NotFound,
    Unavailable,
    Internal,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidJson => "invalid_json",
            Self::InvalidRequest => "invalid_request",
            Self::UnknownWorkflowType => "unknown_workflow_type",
            Self::TooLarge => "too_large",
            Self::Conflict => "conflict",
            Self::NotFound => "not_found",
            Self::Unavailable => "unavailable",
            Self::Internal => "internal",
        }
    }
}

/// An API error: a code and a message naming what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", code.as_str())]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }

    /// `{"ok": false, "error": {"code", "message"}}`.
    pub fn to_reply(&self) -> Value {
        json!({"ok": false, "error": {"code": self.code.as_str(), "message": self.message}})
    }
}

impl From<hcpflow_eventstore::Error> for ApiError {
    fn from(error: hcpflow_eventstore::Error) -> Self {
        use hcpflow_eventstore::Error;
        match &error {
            Error::NotFound(id) => {
                ApiError::new(ErrorCode::NotFound, format!("workflow {id} not found"))
            }
            Error::InvalidInput(message) => ApiError::invalid(message.clone()),
            Error::Database(_) if error.is_retryable() => ApiError::new(
                ErrorCode::Unavailable,
                "the event store is unavailable; try again",
            ),
            _ => ApiError::internal(error.to_string()),
        }
    }
}

/// `{"ok": true, ...fields}`.
pub fn ok_reply(fields: Value) -> Value {
    let mut reply = serde_json::Map::new();
    reply.insert("ok".into(), Value::Bool(true));
    if let Value::Object(map) = fields {
        reply.extend(map);
    }
    Value::Object(reply)
}

/// A history entry, as the history API returns it.
pub fn history_entry(event: &StoredEvent) -> Value {
    hcpflow_eventstore::entry_json(event, false)
}

/// The `workflow` object of a describe reply, and the items of a list reply.
pub fn workflow_view(summary: &WorkflowSummary) -> Value {
    json!({
        "workflow_id": summary.workflow_id.as_str(),
        "workflow_type": summary.workflow_type,
        "status": summary.status.as_str(),
        "created_at": summary.created_at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        "updated_at": summary.updated_at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        "concurrency_key": summary.concurrency_key,
        "output": summary.output,
        "error": summary.error.clone().or_else(|| summary.blocked_reason.clone().map(|r| json!({"kind": "blocked", "message": r}))),
    })
}

/// An item of a clusters reply: one cluster registry row.
pub fn cluster_view(cluster: &ClusterRecord) -> Value {
    json!({
        "name": cluster.name,
        "infra_id": cluster.infra_id,
        "namespace": cluster.namespace,
        "state": cluster.state.as_str(),
        "create_workflow_id": cluster.create_workflow_id.as_str(),
        "created_at": cluster.created_at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        "updated_at": cluster.updated_at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
    })
}

/// A workflow task: run the executor for this workflow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkflowTask {
    pub workflow_id: String,
    /// Set when a child finished: record its outcome in this (the parent's) history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child: Option<ChildDone>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildDone {
    pub child_id: String,
    pub started_seq: u64,
}

/// An activity task: run attempt `attempt` of the activity scheduled at `scheduled_seq`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActivityTaskMessage {
    pub workflow_id: String,
    pub scheduled_seq: u64,
    pub attempt: u32,
    /// The request as scheduled, so the attempt runs without reading the history.
    pub activity_type: String,
    pub input: Value,
    pub options: hcpflow_engine::ActivityOptions,
}

/// The header that marks an internal child start on the submit subject.
pub const PARENT_HEADER: &str = "Hcpflow-Parent";

/// A request body: at most `max_bytes`, JSON, an object — or the error that says which.
pub fn parse_body(
    body: &[u8],
    max_bytes: usize,
) -> Result<serde_json::Map<String, Value>, ApiError> {
    if body.len() > max_bytes {
        return Err(ApiError::new(
            ErrorCode::TooLarge,
            format!("the body is {} bytes; the limit is {max_bytes}", body.len()),
        ));
    }
    let value: Value = serde_json::from_slice(body).map_err(|error| {
        ApiError::new(
            ErrorCode::InvalidJson,
            format!("the body is not JSON: {error}"),
        )
    })?;
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(ApiError::invalid("the body must be a JSON object")),
    }
}

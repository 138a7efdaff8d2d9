//! The API's views of what the event store holds: history entries, workflows, clusters,
//! and its errors as API errors.

use hcpflow_eventstore::registry::ClusterRecord;
use hcpflow_eventstore::{StoredEvent, WorkflowSummary};
use hcpflow_protocol::{ApiError, ErrorCode};
use serde_json::{json, Value};

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

/// An event store error as the API reports it: not found, invalid input, unavailable
/// (retryable database trouble) or internal.
pub fn store_error(error: hcpflow_eventstore::Error) -> ApiError {
    {
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

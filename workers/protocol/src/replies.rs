//! The API's replies (their fields, without `ok`) and the history entry the history
//! reply and the events stream carry. A client reads events through the engine's
//! [`Event`] decoder ([`HistoryEntry::event`]), never as untyped JSON.

use chrono::{DateTime, Utc};
use hcpflow_engine::{Event, EventError, Seq, WorkflowId, WorkflowStatus};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How a start was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StartStatus {
    /// Recorded now.
    Started,
    /// The same id with the same input was recorded before: nothing new.
    AlreadyStarted,
}

impl StartStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Started => "started",
            Self::AlreadyStarted => "already_started",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartReply {
    pub workflow_id: WorkflowId,
    pub status: StartStatus,
}

/// A workflow's summary, as `describe` and `list` return it. Times are RFC 3339 in
/// UTC with microseconds, as the server wrote them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkflowView {
    pub workflow_id: WorkflowId,
    pub workflow_type: String,
    pub status: WorkflowStatus,
    pub created_at: String,
    pub updated_at: String,
    /// The cluster it runs for; one workflow per key at a time.
    pub concurrency_key: Option<String>,
    pub output: Option<Value>,
    /// How it failed (the engine's workflow error), or `{"kind": "blocked", "message"}`.
    pub error: Option<Value>,
}

impl WorkflowView {
    /// The error's message, when it has one.
    pub fn error_message(&self) -> Option<&str> {
        self.error.as_ref()?.get("message")?.as_str()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DescribeReply {
    pub workflow: WorkflowView,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListReply {
    pub workflows: Vec<WorkflowView>,
    /// Set when there are more: the next request's `cursor`.
    pub cursor: Option<String>,
}

/// One row of the cluster registry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterView {
    pub name: String,
    pub infra_id: String,
    pub namespace: String,
    /// `creating`, `ready`, `failed`, `destroying`, `destroyed`.
    pub state: String,
    pub create_workflow_id: WorkflowId,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClustersReply {
    pub clusters: Vec<ClusterView>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelReply {
    /// `cancel_requested`.
    pub status: String,
}

/// A reply with no fields (`signal`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmptyReply {}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryPage {
    pub events: Vec<HistoryEntry>,
    /// Set when there are more: the next request's `cursor`.
    pub cursor: Option<String>,
}

/// One event at its place in a history, as the history reply and the events stream
/// (`<prefix>.events.<workflow_id>`, with `workflow_id`) carry it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    pub seq: Seq,
    /// The event's kind (`ActivityScheduled`, ...).
    #[serde(rename = "type")]
    pub kind: String,
    /// RFC 3339, UTC, microseconds: the text that was hashed.
    pub recorded_at: String,
    /// The event's data with its schema version `v`.
    pub data: Value,
    pub hash: String,
    pub prev_hash: String,
    /// On the events stream only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_id: Option<WorkflowId>,
    /// With `raw` only: the exact bytes that were hashed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}

impl HistoryEntry {
    /// The event, decoded as the engine decodes a stored one: an unknown kind or a newer
    /// schema is an error, never a silent skip.
    pub fn event(&self) -> Result<Event, EventError> {
        Event::from_record(&self.kind, self.data.clone())
    }

    /// When the store recorded it; `None` if the text is not RFC 3339.
    pub fn recorded_at(&self) -> Option<DateTime<Utc>> {
        self.recorded_at.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn stored_entry() -> Value {
        json!({"seq": 2, "type": "TimerStarted", "recorded_at": "2026-11-23T10:00:00.123456Z",
               "data": {"duration_ms": 5, "fire_at": 9, "v": 1}, "hash": "ab", "prev_hash": "cd"})
    }

    #[test]
    fn an_entry_decodes_through_the_engine() {
        let entry: HistoryEntry = serde_json::from_value(stored_entry()).unwrap();
        assert_eq!(entry.seq.get(), 2);
        assert_eq!(entry.event().unwrap().kind(), "TimerStarted");
        assert_eq!(
            entry.recorded_at().unwrap().timestamp_micros() % 1_000_000,
            123_456
        );
        // Written back, the entry is what the server sent.
        assert_eq!(serde_json::to_value(&entry).unwrap(), stored_entry());
    }

    #[test]
    fn a_wrong_seq_or_an_unknown_kind_is_an_error() {
        let mut zero = stored_entry();
        zero["seq"] = json!(0);
        assert!(serde_json::from_value::<HistoryEntry>(zero).is_err());
        let mut future = stored_entry();
        future["type"] = json!("TeleportRequested");
        let entry: HistoryEntry = serde_json::from_value(future).unwrap();
        assert!(matches!(entry.event(), Err(EventError::UnknownKind(_))));
    }
}

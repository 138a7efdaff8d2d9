//! Request bodies with a type of their own.

use hcpflow_engine::event::ParentRef;
use hcpflow_engine::WorkflowId;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A start request, as the API and the submit stream take it (DESIGN.md §4); a parent
/// workflow sends one to the submit stream to start a child.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StartRequest {
    pub workflow_type: String,
    /// Generated when absent.
    pub workflow_id: Option<WorkflowId>,
    pub input: Value,
    /// Set only on internal child starts; verified against the parent's history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<ParentRef>,
}

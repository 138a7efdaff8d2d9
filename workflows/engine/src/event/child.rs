//! Events of a child workflow, as the parent records them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::WorkflowError;
use crate::ids::{Seq, WorkflowId};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChildStarted {
    pub child_id: WorkflowId,
    pub workflow_type: String,
    pub input: Value,
    pub input_digest: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChildCompleted {
    pub started_seq: Seq,
    pub outcome: Result<Value, WorkflowError>,
}

//! Events of the workflow's own lifecycle.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::WorkflowError;
use crate::ids::{Seq, WorkflowId};

/// The first event of every history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkflowStarted {
    pub workflow_type: String,
    pub input: Value,
    pub concurrency_key: Option<String>,
    /// Set when a parent workflow started this one as a child.
    pub parent: Option<ParentRef>,
}

/// Where a child's outcome must be reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParentRef {
    pub workflow_id: WorkflowId,
    /// The seq of the parent's `ChildStarted`.
    pub seq: Seq,
}

/// Someone asked the workflow to stop; its compensations will run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelRequested {
    pub reason: Option<String>,
}

/// The workflow failed and the engine starts undoing what it did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RollbackStarted {
    pub cause: WorkflowError,
    /// How many compensations will run, newest first.
    pub compensations: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkflowCompleted {
    pub output: Value,
}

/// A compensation that could not be done, or was kept by `keep_on_failure`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeftBehind {
    /// The seq of its `CompensationRegistered`.
    pub registered_seq: Seq,
    pub activity_type: String,
    pub input: Value,
    /// Why it is left: the compensation's last failure, or "kept".
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkflowFailed {
    pub error: WorkflowError,
    /// Exactly what is left undone.
    pub left: Vec<LeftBehind>,
}

/// Cancelled, and every registered compensation succeeded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkflowCancelled {
    pub reason: Option<String>,
}

/// Failed, and every registered compensation succeeded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkflowCompensated {
    pub cause: WorkflowError,
}

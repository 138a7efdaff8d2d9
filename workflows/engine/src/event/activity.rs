//! Events of an activity: scheduled once, then one outcome per attempt.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ActivityFailure;
use crate::ids::Seq;
use crate::retry::ActivityOptions;
use crate::time::Timestamp;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActivityScheduled {
    pub activity_type: String,
    pub input: Value,
    /// SHA-256 (hex) of the canonical input: a changed input is nondeterminism.
    pub input_digest: String,
    pub options: ActivityOptions,
    /// Set when this activity is a compensation: the seq of its `CompensationRegistered`.
    pub compensation_of: Option<Seq>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActivityCompleted {
    pub scheduled_seq: Seq,
    pub attempt: u32,
    pub result: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActivityFailed {
    pub scheduled_seq: Seq,
    pub attempt: u32,
    pub failure: ActivityFailure,
    /// When the next attempt runs; `None` means this failure is final.
    pub retry_at: Option<Timestamp>,
}

/// The workflow stopped waiting for an activity (a lost `select!` branch, a cancel).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActivityCancelRequested {
    pub scheduled_seq: Seq,
}

//! A compensating activity registered by `ctx.on_rollback`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::retry::ActivityOptions;

/// Runs (newest first) if the workflow fails or is cancelled, or later from a destroy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompensationRegistered {
    pub activity_type: String,
    pub input: Value,
    pub input_digest: String,
    pub options: ActivityOptions,
}

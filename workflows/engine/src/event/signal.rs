//! A signal delivered to a running workflow.

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignalReceived {
    pub name: String,
    pub payload: Value,
}

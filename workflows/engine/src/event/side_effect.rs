//! A value the workflow could not compute deterministically, recorded once.

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SideEffectKind {
    Uuid,
    Random,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideEffectRecorded {
    pub kind: SideEffectKind,
    pub value: Value,
}

//! Events of a durable timer (`ctx.sleep`).

use serde::{Deserialize, Serialize};

use crate::ids::Seq;
use crate::time::Timestamp;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimerStarted {
    pub duration_ms: u64,
    pub fire_at: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimerFired {
    pub started_seq: Seq,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimerCancelled {
    pub started_seq: Seq,
}

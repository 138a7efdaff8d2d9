//! Time as workflow code sees it: a recorded instant, never the wall clock.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Milliseconds since the Unix epoch, UTC.
///
/// Inside a workflow, "now" is the time the events of the current activation were
/// recorded, so a replay sees exactly the instants the live run saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Timestamp(u64);

impl Timestamp {
    pub const EPOCH: Timestamp = Timestamp(0);

    pub fn from_millis(millis: u64) -> Self {
        Self(millis)
    }

    pub fn as_millis(self) -> u64 {
        self.0
    }

    /// The instant `duration` later (saturating).
    #[must_use]
    pub fn after(self, duration: Duration) -> Timestamp {
        let millis = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
        Timestamp(self.0.saturating_add(millis))
    }

    /// Time from `earlier` to `self`, zero if `earlier` is later.
    pub fn since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.0)
    }
}

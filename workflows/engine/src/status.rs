//! The workflow lifecycle (DESIGN.md §2).
//!
//! ```text
//! pending ──▶ running ──▶ completed
//!                │
//!                ├─(failure after retries, or cancel)─▶ compensating ─┬▶ compensated (failure, all undone)
//!                │                                                    ├▶ cancelled   (cancel, all undone)
//!                │                                                    └▶ failed      (something left)
//!                ├─(keep_on_failure, or nothing to undo)─▶ failed
//!                └─(nondeterminism, corrupt history)─▶ blocked
//! ```

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkflowStatus {
    Pending,
    Running,
    Completed,
    Compensating,
    Compensated,
    Cancelled,
    Failed,
    Blocked,
}

impl WorkflowStatus {
    pub const ALL: [WorkflowStatus; 8] = [
        Self::Pending,
        Self::Running,
        Self::Completed,
        Self::Compensating,
        Self::Compensated,
        Self::Cancelled,
        Self::Failed,
        Self::Blocked,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Compensating => "compensating",
            Self::Compensated => "compensated",
            Self::Cancelled => "cancelled",
            Self::Failed => "failed",
            Self::Blocked => "blocked",
        }
    }

    /// A terminal workflow never changes status again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Completed | Self::Compensated | Self::Cancelled | Self::Failed
        )
    }
}

impl fmt::Display for WorkflowStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The text was not one of the statuses above.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown workflow status {0:?}")]
pub struct UnknownStatus(pub String);

impl FromStr for WorkflowStatus {
    type Err = UnknownStatus;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|status| status.as_str() == s)
            .ok_or_else(|| UnknownStatus(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_round_trips() {
        for status in WorkflowStatus::ALL {
            assert_eq!(status.as_str().parse::<WorkflowStatus>(), Ok(status));
            assert_eq!(
                serde_json::to_string(&status).unwrap(),
                format!("\"{status}\"")
            );
        }
        assert!("done".parse::<WorkflowStatus>().is_err());
    }
}

//! Errors of workflow code and of the executor, classified in one place.
//!
//! - [`ActivityFailure`]: what one activity attempt reported; it says whether another
//!   attempt may help.
//! - [`WorkflowError`]: what workflow code returns; any of them fails the workflow (and
//!   rolls it back through its compensations).
//! - [`ExecError`]: the executor could not run the workflow at all; the workflow becomes
//!   `blocked` (nondeterminism, a panic, a corrupt history) or is rejected.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::ids::Seq;

/// How an error should be handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Trying again may succeed (throttling, a dependency not yet gone, a timeout).
    Retryable,
    /// Trying again will fail the same way.
    Permanent,
    /// The workflow code does not match its history: block, never guess.
    Nondeterminism,
}

/// The failure of one activity attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActivityFailure {
    /// A stable, machine-readable kind (`Throttling`, `DependencyViolation`,
    /// `InvalidInput`, `Timeout`, ...), matched by retry policies.
    pub kind: String,
    pub message: String,
    pub retryable: bool,
}

impl ActivityFailure {
    pub fn retryable(kind: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            kind: kind.into(),
            message: message.into(),
            retryable: true,
        }
    }

    pub fn permanent(kind: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            kind: kind.into(),
            message: message.into(),
            retryable: false,
        }
    }

    pub fn class(&self) -> ErrorClass {
        if self.retryable {
            ErrorClass::Retryable
        } else {
            ErrorClass::Permanent
        }
    }
}

impl ActivityFailure {
    /// Decodes an activity's JSON input as its request; a mismatch is a permanent
    /// `InvalidInput` naming the activity (with quoted values elided).
    pub fn decode_input<T: serde::de::DeserializeOwned>(
        activity_type: &str,
        input: serde_json::Value,
    ) -> Result<T, Self> {
        serde_json::from_value(input).map_err(|e| {
            Self::permanent(
                "InvalidInput",
                format!(
                    "input of {activity_type} does not match its request: {}",
                    scrub_quoted(&e.to_string())
                ),
            )
        })
    }

    /// Encodes an activity's result as JSON.
    pub fn encode_output<T: Serialize>(output: T) -> Result<serde_json::Value, Self> {
        serde_json::to_value(output).map_err(|e| Self::permanent("Encoding", e.to_string()))
    }
}

/// Serde messages quote the offending value (`invalid type: string "hunter2"`); error
/// messages travel to histories, logs and the dead-letter stream, so quoted values are
/// elided (`"…"`).
pub fn scrub_quoted(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut in_quotes = false;
    for ch in message.chars() {
        match (ch, in_quotes) {
            ('"', false) => {
                in_quotes = true;
                out.push_str("\"…");
            }
            ('"', true) => {
                in_quotes = false;
                out.push('"');
            }
            (_, true) => {}
            (c, false) => out.push(c),
        }
    }
    out
}

impl fmt::Display for ActivityFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

/// Why a workflow failed, as recorded in its history.
///
/// Internally tagged (`{"kind": "failed", "message": ...}`): every variant is a struct
/// or unit variant, because serde cannot write a tagged newtype variant holding a
/// string — such an error could never be recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WorkflowError {
    /// An activity failed after its retries.
    #[error("activity {activity_type} (seq {seq}) failed: {failure}")]
    Activity {
        activity_type: String,
        seq: Seq,
        failure: ActivityFailure,
    },
    /// A child workflow failed.
    #[error("child workflow {child_id} failed: {message}")]
    Child { child_id: String, message: String },
    /// The workflow was cancelled while waiting.
    #[error("cancelled")]
    Cancelled,
    /// The workflow's input was rejected.
    #[error("invalid input: {message}")]
    InvalidInput { message: String },
    /// The workflow code decided to fail.
    #[error("{message}")]
    Failed { message: String },
}

impl WorkflowError {
    pub fn failed(message: impl Into<String>) -> Self {
        Self::Failed {
            message: message.into(),
        }
    }

    pub fn invalid_input(message: impl Into<String>) -> Self {
        Self::InvalidInput {
            message: message.into(),
        }
    }
}

/// The executor could not run a workflow task.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecError {
    /// The code emitted something other than what the history recorded.
    #[error("nondeterminism at seq {seq}: history recorded {recorded}, the workflow code now does {new}")]
    Nondeterminism {
        seq: Seq,
        recorded: String,
        new: String,
    },
    /// Workflow code panicked.
    #[error("workflow code panicked: {message}")]
    Panic { message: String },
    /// The history cannot be a history of any workflow (missing start, bad references).
    #[error("corrupt history at seq {seq}: {reason}")]
    CorruptHistory { seq: Seq, reason: String },
    #[error("unknown workflow type {0:?}")]
    UnknownWorkflowType(String),
    /// The workflow keeps emitting commands without ever waiting.
    #[error("workflow made progress {0} times in one activation without waiting; it is looping")]
    Runaway(u32),
}

impl ExecError {
    pub fn class(&self) -> ErrorClass {
        match self {
            ExecError::UnknownWorkflowType(_) => ErrorClass::Permanent,
            ExecError::Nondeterminism { .. }
            | ExecError::Panic { .. }
            | ExecError::CorruptHistory { .. }
            | ExecError::Runaway(_) => ErrorClass::Nondeterminism,
        }
    }
}

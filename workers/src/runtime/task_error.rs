//! What a task handler does when its work fails: each error has one disposition —
//! acknowledge, retry later, or block the workflow — decided here, and carried out by
//! [`settle`], instead of matching store errors at each call site.

use std::time::Duration;

use async_nats::jetstream::{AckKind, Message};
use hcpflow_engine::WorkflowId;
use hcpflow_eventstore::Error as StoreError;

use crate::runtime::journal::Journal;

/// Why a task's work did not finish.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// The workflow is not in the store (a message of another prefix, or one that
    /// outlived its workflow): there is nothing to do.
    #[error("workflow {0} is not in the store")]
    UnknownWorkflow(WorkflowId),
    /// This code cannot read the history: the workflow waits, blocked, for a fix.
    #[error("the history of {id} does not decode: {reason}")]
    Undecodable { id: WorkflowId, reason: String },
    /// Another runner holds the attempt (this one's lease ran out): its outcome is that
    /// runner's to record, and this one's is dropped.
    #[error("another runner holds attempt {attempt} of seq {seq} of {id}; this run's outcome is dropped")]
    LostClaim {
        id: WorkflowId,
        seq: u64,
        attempt: u32,
    },
    /// The task's code panicked (an activity's, or the runtime's): retried a few times
    /// in case the cause passes, then the workflow is blocked with the panic's message.
    #[error("a task of {id} panicked: {message}")]
    Panicked { id: WorkflowId, message: String },
    /// Postgres or NATS trouble that passes.
    #[error(transparent)]
    Transient(#[from] anyhow::Error),
}

/// How many deliveries of a task may panic before its workflow is blocked.
pub const PANICS_BEFORE_BLOCK: i64 = 3;

impl TaskError {
    /// A caught panic of a task of workflow `id`, with its payload's message.
    pub fn panicked(id: &WorkflowId, payload: &(dyn std::any::Any + Send)) -> Self {
        let message = payload
            .downcast_ref::<&str>()
            .map(|text| (*text).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_owned());
        tracing::error!(workflow_id = %id, %message, "a task panicked");
        Self::Panicked {
            id: id.clone(),
            message,
        }
    }
}

/// What becomes of the task's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disposition {
    /// Acknowledge: the message must not come back.
    Ack,
    /// Leave it to NATS to deliver again after a pause.
    RetryLater,
    /// Record the workflow as blocked with this reason, then acknowledge.
    Block(String),
}

impl TaskError {
    /// A store error met while working for workflow `id`.
    pub fn from_store(id: &WorkflowId, error: StoreError) -> Self {
        match error {
            StoreError::NotFound(_) => Self::UnknownWorkflow(id.clone()),
            StoreError::ClaimLost { seq, attempt, .. } => Self::LostClaim {
                id: id.clone(),
                seq: seq.get(),
                attempt,
            },
            error @ (StoreError::Decode { .. } | StoreError::Corrupt { .. }) => Self::Undecodable {
                id: id.clone(),
                reason: error.to_string(),
            },
            error => Self::Transient(error.into()),
        }
    }

    pub fn disposition(&self) -> Disposition {
        match self {
            Self::UnknownWorkflow(_) | Self::LostClaim { .. } => Disposition::Ack,
            Self::Undecodable { reason, .. } => Disposition::Block(reason.clone()),
            Self::Transient(_) | Self::Panicked { .. } => Disposition::RetryLater,
        }
    }
}

/// Acknowledges `message` or hands it back to NATS after `pause`, as the outcome of
/// the work for workflow `id` says; blocks the workflow first when its history does
/// not decode (a failure to record that leaves the message to come back).
pub async fn settle(
    journal: &Journal,
    message: &Message,
    id: &WorkflowId,
    outcome: Result<(), TaskError>,
    pause: Duration,
) {
    let disposition = match &outcome {
        Ok(()) => Disposition::Ack,
        // A panic that comes back with every delivery is a bug: block the workflow,
        // visibly, until fixed code runs it, instead of retrying for ever.
        Err(TaskError::Panicked { message: text, .. }) => {
            let delivered = message.info().map(|info| info.delivered).unwrap_or(1);
            if delivered >= PANICS_BEFORE_BLOCK {
                Disposition::Block(format!(
                    "a task panicked {delivered} times; the last time: {text}"
                ))
            } else {
                Disposition::RetryLater
            }
        }
        Err(error) => error.disposition(),
    };
    let disposition = match disposition {
        Disposition::Block(reason) => {
            tracing::error!(workflow_id = %id, %reason, "workflow blocked");
            journal.metrics.blocked.inc();
            match journal.store.set_blocked(id, &reason).await {
                Ok(()) => Disposition::Ack,
                Err(error) => {
                    tracing::warn!(workflow_id = %id, %error, "recording the block failed; the task comes back");
                    Disposition::RetryLater
                }
            }
        }
        other => other,
    };
    if disposition == Disposition::RetryLater {
        if let Err(error) = &outcome {
            tracing::warn!(workflow_id = %id, %error, "task failed; NATS will deliver it again");
        }
        let _ = message.ack_with(AckKind::Nak(Some(pause))).await;
        return;
    }
    match &outcome {
        Err(TaskError::UnknownWorkflow(_)) => {
            tracing::warn!(workflow_id = %id, "task for an unknown workflow dropped")
        }
        Err(error @ TaskError::LostClaim { .. }) => tracing::warn!(workflow_id = %id, %error),
        _ => {}
    }
    let _ = message.ack().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_store_error_has_one_disposition() {
        let id = WorkflowId::new("wf").unwrap();
        let unknown = TaskError::from_store(&id, StoreError::NotFound(id.clone()));
        assert_eq!(unknown.disposition(), Disposition::Ack);
        let invalid = TaskError::from_store(&id, StoreError::InvalidInput("x".into()));
        assert_eq!(invalid.disposition(), Disposition::RetryLater);
        let transient = TaskError::Transient(anyhow::anyhow!("connection reset"));
        assert_eq!(transient.disposition(), Disposition::RetryLater);
    }
}

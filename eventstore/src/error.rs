//! The event store's errors, with the retry decision made here rather than at call sites.

use hcpflow_engine::{Seq, WorkflowId};

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Another appender moved the history first: reload it and retry.
    #[error("append conflict on workflow {workflow_id}: expected next seq {expected}{}", describe_actual(.actual))]
    Conflict {
        workflow_id: WorkflowId,
        expected: Seq,
        /// The next seq the store holds, when the conflict was seen before writing.
        actual: Option<u64>,
    },

    /// A workflow with this id exists already; `input_digest` is what it was started with.
    #[error("workflow {workflow_id} already exists")]
    AlreadyExists {
        workflow_id: WorkflowId,
        input_digest: Option<String>,
        /// The existing workflow's tenant.
        tenant: String,
    },

    #[error("workflow {0} not found")]
    NotFound(WorkflowId),

    /// The stored history does not verify: `seq` is the first event that is wrong.
    #[error("history of workflow {workflow_id} is corrupt at seq {seq}: {reason}")]
    Corrupt {
        workflow_id: String,
        seq: u64,
        reason: String,
    },

    /// A stored event this code cannot decode (unknown kind, newer schema).
    #[error("event {seq} of workflow {workflow_id} does not decode: {source}")]
    Decode {
        workflow_id: String,
        seq: u64,
        #[source]
        source: hcpflow_engine::EventError,
    },

    /// The runner recording an attempt's outcome no longer holds the attempt's claim
    /// (its lease ran out and another runner took it): nothing was written.
    #[error("the claim on attempt {attempt} of seq {seq} of workflow {workflow_id} is held by another runner")]
    ClaimLost {
        workflow_id: WorkflowId,
        seq: Seq,
        attempt: u32,
    },

    /// The caller asked for something the store cannot do (empty batch, bad cursor, ...).
    #[error("invalid request to the event store: {0}")]
    InvalidInput(String),

    #[error("event store database error: {0}")]
    Database(#[source] sqlx::Error),

    #[error("event store migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

impl Error {
    /// True when the same operation may succeed if tried again: a lost race, or a
    /// database that is briefly unreachable.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Conflict { .. } => true,
            Error::Database(source) => {
                matches!(
                    source,
                    sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed
                ) || is_serialization_failure(source)
            }
            Error::NotFound(_)
            | Error::AlreadyExists { .. }
            | Error::Corrupt { .. }
            | Error::Decode { .. }
            | Error::ClaimLost { .. }
            | Error::InvalidInput(_)
            | Error::Migrate(_) => false,
        }
    }
}

impl From<sqlx::Error> for Error {
    fn from(source: sqlx::Error) -> Self {
        Error::Database(source)
    }
}

fn describe_actual(actual: &Option<u64>) -> String {
    match actual {
        Some(next) => format!(", but the history's next seq is {next}"),
        None => ", but another append won the race".to_owned(),
    }
}

/// SQLSTATE 23505.
pub(crate) fn is_unique_violation(error: &sqlx::Error) -> bool {
    has_sqlstate(error, &["23505"])
}

/// SQLSTATE 22012: the guard of a single append whose index did not move.
pub(crate) fn is_division_by_zero(error: &sqlx::Error) -> bool {
    has_sqlstate(error, &["22012"])
}

/// SQLSTATE HF001: `hcpflow_attempt_claim_lost()`, an outcome whose runner lost its claim.
pub(crate) fn is_claim_lost(error: &sqlx::Error) -> bool {
    has_sqlstate(error, &["HF001"])
}

/// SQLSTATE 40001 (serialization failure) or 40P01 (deadlock detected).
fn is_serialization_failure(error: &sqlx::Error) -> bool {
    has_sqlstate(error, &["40001", "40P01"])
}

fn has_sqlstate(error: &sqlx::Error, codes: &[&str]) -> bool {
    error
        .as_database_error()
        .and_then(|db| db.code())
        .is_some_and(|code| codes.contains(&code.as_ref()))
}

//! Appending to a history: events, index, outbox, timers and ledger in one transaction.
//!
//! Guarantees: an append is all or nothing. Of two appenders that expect the same next
//! seq, exactly one commits; the other gets [`Error::Conflict`] and nothing of its batch
//! is written, so it can reload the history and try again. The unique key on
//! (workflow id, seq) is the final arbiter: a unique violation is a conflict.

use chrono::Utc;
use hcpflow_engine::{ChainHash, Seq, WorkflowId, WorkflowStatus};
use sqlx::{Postgres, Transaction};

use crate::error::{is_unique_violation, Error, Result};
use crate::ledger::{self, LedgerEntry};
use crate::outbox::{self, OutboxMessage};
use crate::record::{envelope_bytes, store_precision, NewEvent, StoredEvent};
use crate::store::EventStore;
use crate::timers::{self, to_i64, NewTimer};

/// The index row of a workflow that does not exist yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewWorkflow {
    pub workflow_type: String,
    pub status: WorkflowStatus,
    pub concurrency_key: Option<String>,
    pub parent_id: Option<WorkflowId>,
}

/// Everything one append writes.
#[derive(Debug, Clone, PartialEq)]
pub struct AppendBatch {
    pub workflow_id: WorkflowId,
    /// The seq the first new event gets; the append fails with a conflict otherwise.
    pub expected_next_seq: Seq,
    pub events: Vec<NewEvent>,
    /// The index's new status, if it changes.
    pub status: Option<WorkflowStatus>,
    pub outbox: Vec<OutboxMessage>,
    pub timers: Vec<NewTimer>,
    pub ledger: Vec<LedgerEntry>,
}

impl AppendBatch {
    pub fn new(workflow_id: WorkflowId, expected_next_seq: Seq, events: Vec<NewEvent>) -> Self {
        Self {
            workflow_id,
            expected_next_seq,
            events,
            status: None,
            outbox: Vec::new(),
            timers: Vec::new(),
            ledger: Vec::new(),
        }
    }

    #[must_use]
    pub fn with_status(mut self, status: WorkflowStatus) -> Self {
        self.status = Some(status);
        self
    }

    #[must_use]
    pub fn with_outbox(mut self, messages: Vec<OutboxMessage>) -> Self {
        self.outbox = messages;
        self
    }

    #[must_use]
    pub fn with_timers(mut self, timers: Vec<NewTimer>) -> Self {
        self.timers = timers;
        self
    }

    #[must_use]
    pub fn with_ledger(mut self, entries: Vec<LedgerEntry>) -> Self {
        self.ledger = entries;
        self
    }
}

/// What an append committed.
#[derive(Debug, Clone, PartialEq)]
pub struct Appended {
    pub events: Vec<StoredEvent>,
    /// The seq the next append must expect.
    pub next_seq: Seq,
    pub head_hash: ChainHash,
}

impl EventStore {
    /// Creates a workflow: its index row and the first events of its history.
    ///
    /// `batch.expected_next_seq` must be 1. A workflow with this id already existing is
    /// a [`Error::Conflict`].
    pub async fn create_workflow(
        &self,
        workflow: &NewWorkflow,
        batch: AppendBatch,
    ) -> Result<Appended> {
        if batch.expected_next_seq != Seq::FIRST {
            return Err(Error::InvalidInput(format!(
                "a new workflow starts at seq 1, not {}",
                batch.expected_next_seq
            )));
        }
        let chained = chain_events(&batch, ChainHash::GENESIS)?;
        let mut tx = self.pool.begin().await?;
        let inserted = sqlx::query(
            "INSERT INTO workflows
                    (workflow_id, workflow_type, status, concurrency_key, parent_id, next_seq, head_hash)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (workflow_id) DO NOTHING",
        )
        .bind(batch.workflow_id.as_str())
        .bind(&workflow.workflow_type)
        .bind(batch.status.unwrap_or(workflow.status).as_str())
        .bind(workflow.concurrency_key.as_deref())
        .bind(workflow.parent_id.as_ref().map(WorkflowId::as_str))
        .bind(to_i64(chained.next_seq))
        .bind(chained.head_hash.as_bytes().as_slice())
        .execute(&mut *tx)
        .await?;
        if inserted.rows_affected() == 0 {
            drop(tx);
            let actual = self.current_next_seq(&batch.workflow_id).await?;
            return Err(conflict(&batch, actual));
        }
        write_batch(&mut tx, &batch, &chained).await?;
        tx.commit().await?;
        Ok(chained)
    }

    /// Appends to an existing workflow's history at `batch.expected_next_seq`.
    pub async fn append(&self, batch: AppendBatch) -> Result<Appended> {
        let mut tx = self.pool.begin().await?;
        let head: Option<(i64, Vec<u8>)> =
            sqlx::query_as("SELECT next_seq, head_hash FROM workflows WHERE workflow_id = $1")
                .bind(batch.workflow_id.as_str())
                .fetch_optional(&mut *tx)
                .await?;
        let Some((next_seq, head_hash)) = head else {
            return Err(Error::NotFound(batch.workflow_id.clone()));
        };
        if next_seq != to_i64(batch.expected_next_seq) {
            return Err(conflict(&batch, u64::try_from(next_seq).ok()));
        }
        let prev = ChainHash::from_slice(&head_hash).map_err(|error| Error::Corrupt {
            workflow_id: batch.workflow_id.to_string(),
            seq: u64::try_from(next_seq - 1).unwrap_or(0),
            reason: format!("index head hash: {error}"),
        })?;
        let chained = chain_events(&batch, prev)?;
        write_batch(&mut tx, &batch, &chained).await?;
        let moved = sqlx::query(
            "UPDATE workflows
                SET next_seq = $3, head_hash = $4, status = COALESCE($5, status), updated_at = now()
              WHERE workflow_id = $1 AND next_seq = $2",
        )
        .bind(batch.workflow_id.as_str())
        .bind(next_seq)
        .bind(to_i64(chained.next_seq))
        .bind(chained.head_hash.as_bytes().as_slice())
        .bind(batch.status.map(WorkflowStatus::as_str))
        .execute(&mut *tx)
        .await?;
        if moved.rows_affected() != 1 {
            return Err(conflict(&batch, None));
        }
        tx.commit().await?;
        Ok(chained)
    }

    async fn current_next_seq(&self, workflow_id: &WorkflowId) -> Result<Option<u64>> {
        let next: Option<i64> =
            sqlx::query_scalar("SELECT next_seq FROM workflows WHERE workflow_id = $1")
                .bind(workflow_id.as_str())
                .fetch_optional(&self.pool)
                .await?;
        Ok(next.and_then(|n| u64::try_from(n).ok()))
    }
}

fn conflict(batch: &AppendBatch, actual: Option<u64>) -> Error {
    Error::Conflict {
        workflow_id: batch.workflow_id.clone(),
        expected: batch.expected_next_seq,
        actual,
    }
}

/// Gives every event of the batch its seq, timestamp, canonical bytes and chain links.
fn chain_events(batch: &AppendBatch, mut prev: ChainHash) -> Result<Appended> {
    if batch.events.is_empty() {
        return Err(Error::InvalidInput(format!(
            "an append to {} must carry at least one event",
            batch.workflow_id
        )));
    }
    let recorded_at = store_precision(Utc::now());
    let mut seq = batch.expected_next_seq;
    let mut events = Vec::with_capacity(batch.events.len());
    for event in &batch.events {
        let body = envelope_bytes(&batch.workflow_id, seq, recorded_at, event);
        let hash = prev.next(&body);
        events.push(StoredEvent {
            workflow_id: batch.workflow_id.clone(),
            seq,
            event_type: event.event_type.clone(),
            recorded_at,
            body,
            prev_hash: prev,
            hash,
        });
        prev = hash;
        seq = seq.next();
    }
    Ok(Appended {
        events,
        next_seq: seq,
        head_hash: prev,
    })
}

async fn write_batch(
    tx: &mut Transaction<'_, Postgres>,
    batch: &AppendBatch,
    chained: &Appended,
) -> Result<()> {
    let events = &chained.events;
    let seqs: Vec<i64> = events.iter().map(|e| to_i64(e.seq)).collect();
    let types: Vec<&str> = events.iter().map(|e| e.event_type.as_str()).collect();
    let times: Vec<_> = events.iter().map(|e| e.recorded_at).collect();
    let bodies: Vec<&[u8]> = events.iter().map(|e| e.body.as_slice()).collect();
    let prevs: Vec<&[u8]> = events
        .iter()
        .map(|e| e.prev_hash.as_bytes().as_slice())
        .collect();
    let hashes: Vec<&[u8]> = events
        .iter()
        .map(|e| e.hash.as_bytes().as_slice())
        .collect();
    let inserted = sqlx::query(
        "INSERT INTO events (workflow_id, seq, event_type, recorded_at, body, prev_hash, hash)
         SELECT $1, * FROM UNNEST($2::bigint[], $3::text[], $4::timestamptz[],
                                  $5::bytea[], $6::bytea[], $7::bytea[])",
    )
    .bind(batch.workflow_id.as_str())
    .bind(&seqs)
    .bind(&types)
    .bind(&times)
    .bind(&bodies)
    .bind(&prevs)
    .bind(&hashes)
    .execute(&mut **tx)
    .await;
    match inserted {
        Err(error) if is_unique_violation(&error) => return Err(conflict(batch, None)),
        other => other?,
    };
    outbox::insert(tx, &batch.workflow_id, &batch.outbox).await?;
    timers::insert(tx, &batch.workflow_id, &batch.timers).await?;
    ledger::insert(tx, &batch.workflow_id, &batch.ledger).await?;
    Ok(())
}

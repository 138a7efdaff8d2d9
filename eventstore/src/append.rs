//! Appending to a history: events, index, outbox, timers and ledger in one transaction.
//!
//! Guarantees: an append is all or nothing. Of two appenders that expect the same next
//! seq, exactly one commits; the other gets [`Error::Conflict`] and nothing of its batch
//! is written, so it can reload the history and try again. The unique key on
//! (workflow id, seq) is the final arbiter: a unique violation is a conflict.

pub(crate) mod statement;

use chrono::Utc;
use hcpflow_engine::{ChainHash, Seq, TenantId, WorkflowId, WorkflowStatus};
use serde_json::Value;
use sqlx::PgConnection;

use crate::attempt_claims::AttemptClaim;
use crate::error::{Error, Result};
use crate::group::statement::Verdict;
use crate::group::GroupIndex;
use crate::index::stored_workflow_id;
use crate::ledger::{self, LedgerEntry};
use crate::outbox::{OutboxMessage, OutboxRow};
use crate::published::PublishedRange;
use crate::record::{envelope_bytes, store_precision, NewEvent, StoredEvent};
use crate::store::EventStore;
use crate::timers::{to_i64, NewTimer};
use statement::{write_batch, write_start, IndexWrite};

/// The index row of a workflow that does not exist yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewWorkflow {
    pub workflow_type: String,
    pub status: WorkflowStatus,
    pub concurrency_key: Option<String>,
    pub parent_id: Option<WorkflowId>,
    /// SHA-256 of the start input, so a repeated start can tell "same" from "different".
    pub input_digest: Option<String>,
    /// Where every event of this workflow is published (the events stream); `None` for
    /// none.
    pub events_subject: Option<String>,
    pub tenant: TenantId,
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
    /// A finished workflow's output or error, for the index.
    pub output: Option<Value>,
    pub error: Option<Value>,
    /// Events of this workflow its process published since its previous append: the
    /// append moves the events-stream watermark over them (see [`crate::published`]).
    pub events_published: Option<PublishedRange>,
    /// The time to record the events with (default: now). A caller that runs workflow
    /// code over the new events before appending them fixes it, so the code and a
    /// later replay see the same instant.
    pub recorded_at: Option<chrono::DateTime<Utc>>,
    /// Outbox rows this process already published, marked in the same transaction so
    /// that marking costs no commit of its own.
    pub mark_published: Vec<i64>,
    /// Activity attempts the appending process runs itself, claimed in the same
    /// statement (see [`ClaimedAttempts`]).
    pub claimed_attempts: Option<ClaimedAttempts>,
    /// The claim of the runner whose attempt's outcome this batch records: the append
    /// deletes it, or fails with [`Error::ClaimLost`] when the runner no longer holds
    /// it (see [`crate::attempt_claims`]).
    pub attempt_claim: Option<AttemptClaim>,
}

/// Activity attempts the appending process runs itself, at once and without a trip
/// through NATS (eager dispatch): claimed for `runner` under `lease` as the batch is
/// written, so that no other runner runs them meanwhile. Their tasks get no outbox row.
/// The runner extends the lease while it works; one that dies stops, and once the lease
/// has run out the sweeper finds the attempt ([`EventStore::sweep_lapsed_claims`]) and
/// publishes its task from the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedAttempts {
    pub runner: String,
    pub lease: std::time::Duration,
    /// (scheduled seq, attempt) of each.
    pub attempts: Vec<(Seq, u32)>,
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
            output: None,
            error: None,
            events_published: None,
            recorded_at: None,
            mark_published: Vec::new(),
            claimed_attempts: None,
            attempt_claim: None,
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
    /// The outbox rows written.
    pub outbox: Vec<OutboxRow>,
    /// The index status after the append (`pending` for a start that waits its turn).
    pub status: Option<WorkflowStatus>,
    /// A workflow that was waiting for this one's concurrency key and now runs.
    pub promoted: Option<WorkflowId>,
    /// The batch's `events_published` range could not move the watermark (it does not
    /// start right after it: an earlier range is not marked yet). The caller keeps it
    /// for a later write, by when the earlier one may have arrived.
    pub events_range_refused: Option<PublishedRange>,
    /// The workflow's tenant: where its events are published.
    pub tenant: TenantId,
}

impl EventStore {
    /// Creates a workflow: its index row and the first events of its history.
    ///
    /// `batch.expected_next_seq` must be 1. With a concurrency key held by another live
    /// workflow, the new one is recorded `pending` (whatever `workflow.status` says) and
    /// runs when the key is released, in creation order.
    ///
    /// # Errors
    /// [`Error::AlreadyExists`] when a workflow with this id exists, with its input digest.
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
        let mut chained = chain_events(&batch, ChainHash::GENESIS, &workflow.tenant)?;
        let mut status = batch.status.unwrap_or(workflow.status);
        if workflow.concurrency_key.is_none() && batch.ledger.is_empty() {
            // Nothing to check or write beside the append itself: one statement, with
            // the next group when group commit is on.
            let id = batch.workflow_id.clone();
            let created = match &self.group {
                Some(group) => {
                    let create = GroupIndex::Create(workflow.clone(), status);
                    group.append(batch, create, chained).await
                }
                None => {
                    let mut conn = self.pool.acquire().await?;
                    write_start(&mut conn, &batch, workflow, status, chained).await
                }
            };
            return match created {
                Err(conflict @ Error::Conflict { .. }) => {
                    Err(self.existing(&id).await?.unwrap_or(conflict))
                }
                other => other,
            };
        }
        let mut tx = self.pool.begin().await?;
        if let Some(key) = &workflow.concurrency_key {
            lock_key(&mut tx, key).await?;
            let busy: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM workflows WHERE concurrency_key = $1
                                   AND status IN ('pending', 'running', 'compensating', 'blocked'))",
            )
            .bind(key)
            .fetch_one(&mut *tx)
            .await?;
            if busy && !status.is_terminal() {
                status = WorkflowStatus::Pending;
            }
        }
        let inserted = sqlx::query(
            "INSERT INTO workflows (workflow_id, workflow_type, status, concurrency_key, parent_id,
                                    next_seq, head_hash, input_digest, output, error,
                                    events_subject, tenant)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
             ON CONFLICT (workflow_id) DO NOTHING",
        )
        .bind(batch.workflow_id.as_str())
        .bind(&workflow.workflow_type)
        .bind(status.as_str())
        .bind(workflow.concurrency_key.as_deref())
        .bind(workflow.parent_id.as_ref().map(WorkflowId::as_str))
        .bind(to_i64(chained.next_seq))
        .bind(chained.head_hash.as_bytes().as_slice())
        .bind(workflow.input_digest.as_deref())
        .bind(batch.output.as_ref())
        .bind(batch.error.as_ref())
        .bind(workflow.events_subject.as_deref())
        .bind(workflow.tenant.as_str())
        .execute(&mut *tx)
        .await?;
        if inserted.rows_affected() == 0 {
            drop(tx);
            let existing = self.existing(&batch.workflow_id).await?;
            return Err(existing.unwrap_or_else(|| Error::AlreadyExists {
                workflow_id: batch.workflow_id.clone(),
                input_digest: None,
                tenant: String::new(),
            }));
        }
        chained.outbox = write_one(&mut tx, &batch, None, &chained).await?.0.outbox;
        ledger::insert(&mut tx, &batch.workflow_id, &batch.ledger).await?;
        tx.commit().await?;
        chained.status = Some(status);
        Ok(chained)
    }

    /// [`Error::AlreadyExists`] for the workflow `id`, with its input digest and tenant,
    /// if it exists.
    async fn existing(&self, id: &WorkflowId) -> Result<Option<Error>> {
        let existing: Option<(Option<String>, String)> =
            sqlx::query_as("SELECT input_digest, tenant FROM workflows WHERE workflow_id = $1")
                .bind(id.as_str())
                .fetch_optional(&self.pool)
                .await?;
        Ok(existing.map(|(input_digest, tenant)| Error::AlreadyExists {
            workflow_id: id.clone(),
            input_digest,
            tenant,
        }))
    }

    /// Appends to an existing workflow's history at `batch.expected_next_seq`.
    pub async fn append(&self, batch: AppendBatch) -> Result<Appended> {
        let mut tx = self.pool.begin().await?;
        let head: Option<(i64, Vec<u8>, String)> = sqlx::query_as(
            "SELECT next_seq, head_hash, tenant FROM workflows WHERE workflow_id = $1",
        )
        .bind(batch.workflow_id.as_str())
        .fetch_optional(&mut *tx)
        .await?;
        let Some((next_seq, head_hash, tenant)) = head else {
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
        let tenant = TenantId::new(tenant).map_err(|error| Error::Corrupt {
            workflow_id: batch.workflow_id.to_string(),
            seq: 0,
            reason: format!("index tenant: {error}"),
        })?;
        let index = IndexAt::seq(next_seq, tenant);
        let appended = finish_append(&mut tx, &batch, prev, index).await?;
        tx.commit().await?;
        Ok(appended)
    }
}

/// Where the index must stand for an append to move it: the next seq the batch was
/// decided on, and the status too when the decision depended on it.
#[derive(Debug, Clone)]
pub(crate) struct IndexAt {
    pub next_seq: i64,
    pub status: Option<WorkflowStatus>,
    /// The workflow's tenant (read with the index, never written by an append).
    pub tenant: TenantId,
}

impl IndexAt {
    pub(crate) fn seq(next_seq: i64, tenant: TenantId) -> Self {
        Self {
            next_seq,
            status: None,
            tenant,
        }
    }

    pub(crate) fn summary(summary: &crate::WorkflowSummary) -> Self {
        Self {
            next_seq: to_i64(summary.next_seq),
            status: Some(summary.status),
            tenant: summary.tenant.clone(),
        }
    }
}

/// Chains and writes `batch` after `prev` (the head before `index.next_seq`), moves the
/// index, writes its ledger rows and promotes a waiting workflow when this one ends.
/// The caller commits — or, when [`needs_transaction`] says no, runs it outside a
/// transaction: it is then one statement, all or nothing on its own.
pub(crate) async fn finish_append(
    conn: &mut PgConnection,
    batch: &AppendBatch,
    prev: ChainHash,
    index: IndexAt,
) -> Result<Appended> {
    let chained = chain_events(batch, prev, &index.tenant)?;
    let (appended, concurrency_key) = write_one(conn, batch, Some(&index), &chained).await?;
    ledger::insert(conn, &batch.workflow_id, &batch.ledger).await?;
    let mut promoted = None;
    if let (Some(key), Some(status)) = (&concurrency_key, batch.status) {
        if status.is_terminal() {
            promoted = promote_next(conn, key).await?;
        }
    }
    Ok(Appended {
        promoted,
        ..appended
    })
}

/// Whether [`finish_append`] of `batch` writes more than its one statement — ledger
/// rows, or the promotion of a start waiting for the ending workflow's concurrency key
/// — and so must run inside a transaction.
pub(crate) fn needs_transaction(batch: &AppendBatch, concurrency_key: Option<&str>) -> bool {
    let ends = batch.status.is_some_and(WorkflowStatus::is_terminal);
    !batch.ledger.is_empty() || (ends && concurrency_key.is_some())
}

pub(crate) fn conflict(batch: &AppendBatch, actual: Option<u64>) -> Error {
    Error::Conflict {
        workflow_id: batch.workflow_id.clone(),
        expected: batch.expected_next_seq,
        actual,
    }
}

/// Gives every event of the batch its seq, timestamp, canonical bytes and chain links.
pub(crate) fn chain_events(
    batch: &AppendBatch,
    mut prev: ChainHash,
    tenant: &TenantId,
) -> Result<Appended> {
    if batch.events.is_empty() {
        return Err(Error::InvalidInput(format!(
            "an append to {} must carry at least one event",
            batch.workflow_id
        )));
    }
    let recorded_at = store_precision(batch.recorded_at.unwrap_or_else(Utc::now));
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
        outbox: Vec::new(),
        status: None,
        promoted: None,
        events_range_refused: None,
        tenant: tenant.clone(),
    })
}

/// Serialises starts and releases of one concurrency key.
async fn lock_key(conn: &mut PgConnection, key: &str) -> Result<()> {
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext('hcpflow.concurrency-key:' || $1))")
        .bind(key)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Moves the oldest `pending` workflow of `key` to `running`, if no other holds the key.
async fn promote_next(conn: &mut PgConnection, key: &str) -> Result<Option<WorkflowId>> {
    lock_key(conn, key).await?;
    let promoted: Option<String> = sqlx::query_scalar(
        "UPDATE workflows SET status = 'running', updated_at = now()
          WHERE workflow_id = (
                SELECT workflow_id FROM workflows
                 WHERE concurrency_key = $1 AND status = 'pending'
                   AND NOT EXISTS (SELECT 1 FROM workflows WHERE concurrency_key = $1
                                      AND status IN ('running', 'compensating', 'blocked'))
                 ORDER BY created_at, workflow_id
                 LIMIT 1)
         RETURNING workflow_id",
    )
    .bind(key)
    .fetch_optional(&mut *conn)
    .await?;
    promoted.map(stored_workflow_id).transpose()
}

/// Writes one batch with the single append statement ([`write_batch`]): what it wrote
/// and the workflow's concurrency key, or why nothing was written.
pub(crate) async fn write_one(
    conn: &mut PgConnection,
    batch: &AppendBatch,
    index: Option<&IndexAt>,
    chained: &Appended,
) -> Result<(Appended, Option<String>)> {
    let index = index
        .cloned()
        .map_or(IndexWrite::Untouched, IndexWrite::Move);
    let written = write_batch(conn, batch, chained, index).await?;
    let events_range_refused = batch
        .events_published
        .filter(|range| written.events_mark.unwrap_or(0) < to_i64(range.last));
    let appended = Appended {
        outbox: written.rows,
        status: batch.status,
        promoted: None,
        events_range_refused,
        ..chained.clone()
    };
    Ok((appended, written.concurrency_key))
}

/// A member's verdict as the append's result.
pub(crate) fn verdict_result(batch: &AppendBatch, verdict: Verdict) -> Result<Appended> {
    match verdict {
        Verdict::Written(appended) => Ok(appended),
        Verdict::Conflict => Err(conflict(batch, None)),
    }
}

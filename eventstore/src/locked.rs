//! Read, decide and append: the hot path. A workflow task (or an activity outcome
//! followed by the workflow's next commands) costs one commit and two round trips; a
//! step that loses a race runs again in a transaction with the workflow's row locked,
//! so appenders of one workflow queue instead of racing again.

use hcpflow_engine::{ChainHash, WorkflowId};
use sqlx::postgres::PgRow;
use sqlx::{Acquire, PgConnection, Row};

use crate::append::{
    chain_events, finish_append, needs_transaction, AppendBatch, Appended, IndexAt,
};
use crate::error::{Error, Result};
use crate::group::GroupIndex;
use crate::history::{to_event, EventRow};
use crate::index::{to_summary, IndexRow, SELECT_INDEX};
use crate::record::StoredEvent;
use crate::store::EventStore;
use crate::WorkflowSummary;

impl EventStore {
    /// Reads the workflow's index row and whole history, asks `decide` what to append,
    /// and appends it in one transaction. `decide` returns the batch to append (its
    /// `expected_next_seq` must be the index's next seq) or `None`, and a value handed
    /// back to the caller.
    ///
    /// The first try reads without a lock (index and history in one statement, one
    /// snapshot); if another appender commits first, the write fails, the transaction
    /// rolls back, and the step runs again with the index row locked, where appenders of
    /// one workflow queue. `decide` may therefore be called twice.
    ///
    /// # Guarantees
    /// What is appended was decided on the latest history; nothing is written if
    /// `decide` fails or returns `None`.
    pub async fn append_locked<T>(
        &self,
        workflow_id: &WorkflowId,
        mut decide: impl FnMut(&WorkflowSummary, &[StoredEvent]) -> Result<(Option<AppendBatch>, T)>,
    ) -> Result<(Option<Appended>, T)> {
        match self.try_append(workflow_id, false, &mut decide).await {
            Err(Error::Conflict { .. }) => self.try_append(workflow_id, true, &mut decide).await,
            other => other,
        }
    }

    /// Appends `batch`, decided on a history the caller already holds, whose index is
    /// `summary` (what its own last append left) — without reading anything: one
    /// statement, one round trip.
    ///
    /// # Errors
    /// [`Error::Conflict`] when the workflow moved on since (another appender, or a
    /// status change): nothing is written, and the caller decides again on a fresh read
    /// ([`EventStore::append_locked`]).
    pub async fn append_known(
        &self,
        summary: &WorkflowSummary,
        batch: &AppendBatch,
    ) -> Result<Appended> {
        if batch.workflow_id != summary.workflow_id || batch.expected_next_seq != summary.next_seq {
            return Err(Error::InvalidInput(format!(
                "an append to {} decided on its index must start at seq {}",
                summary.workflow_id, summary.next_seq
            )));
        }
        self.write_decided(summary, batch, summary.head_hash).await
    }

    /// Writes a batch decided on `summary` without holding a lock: with the next group
    /// when group commit is on (see [`crate::group`]), else one statement that writes
    /// nothing when the index moved; a transaction when the batch needs more.
    async fn write_decided(
        &self,
        summary: &WorkflowSummary,
        batch: &AppendBatch,
        prev: ChainHash,
    ) -> Result<Appended> {
        let index = IndexAt::summary(summary);
        let transaction = needs_transaction(batch, summary.concurrency_key.as_deref());
        if let (Some(group), false) = (&self.group, transaction) {
            let chained = chain_events(batch, prev, &index.tenant)?;
            let index = GroupIndex::Move(index);
            let appended = group.append(batch.clone(), index, chained).await?;
            return Ok(appended);
        }
        let mut conn = self.pool.acquire().await?;
        if transaction {
            let mut tx = conn.begin().await?;
            let appended = finish_append(&mut tx, batch, prev, index).await?;
            tx.commit().await?;
            Ok(appended)
        } else {
            finish_append(&mut conn, batch, prev, index).await
        }
    }

    /// One try: read (locking the index row first when `lock`), decide, append.
    ///
    /// The lock-free try needs no transaction: the read is one statement (one snapshot)
    /// and the write is one statement that fails as a whole on a conflict, so the step
    /// costs two round trips. Writes of more than one statement, and the locked retry,
    /// run in a transaction.
    async fn try_append<T>(
        &self,
        workflow_id: &WorkflowId,
        lock: bool,
        decide: &mut impl FnMut(&WorkflowSummary, &[StoredEvent]) -> Result<(Option<AppendBatch>, T)>,
    ) -> Result<(Option<Appended>, T)> {
        let mut conn = self.pool.acquire().await?;
        if lock {
            let mut tx = conn.begin().await?;
            let (summary, events) = read_history_and_index(&mut tx, workflow_id, true).await?;
            let (batch, value) = decide(&summary, &events)?;
            let Some(batch) = batch else {
                tx.rollback().await?;
                return Ok((None, value));
            };
            let prev = check_start(workflow_id, &summary, &events, &batch)?;
            // On an error the transaction is dropped, which rolls it back.
            let appended = finish_append(&mut tx, &batch, prev, IndexAt::summary(&summary)).await?;
            tx.commit().await?;
            return Ok((Some(appended), value));
        }
        let (summary, events) = read_history_and_index(&mut conn, workflow_id, false).await?;
        drop(conn);
        let (batch, value) = decide(&summary, &events)?;
        let Some(batch) = batch else {
            return Ok((None, value));
        };
        let prev = check_start(workflow_id, &summary, &events, &batch)?;
        let appended = self.write_decided(&summary, &batch, prev).await?;
        Ok((Some(appended), value))
    }
}

/// The index row and the whole history, consistent with each other.
///
/// With `lock`, the index row is locked first, by a statement of its own: in READ
/// COMMITTED a statement that waits for a row lock returns the newest version of that
/// row but reads every other table as of its own start, so locking and reading in one
/// statement could pair a moved index with an older history. Without `lock`, one
/// statement reads both from one snapshot.
async fn read_history_and_index(
    conn: &mut PgConnection,
    workflow_id: &WorkflowId,
    lock: bool,
) -> Result<(WorkflowSummary, Vec<StoredEvent>)> {
    if lock {
        let locked: Option<i32> =
            sqlx::query_scalar("SELECT 1 FROM workflows WHERE workflow_id = $1 FOR UPDATE")
                .bind(workflow_id.as_str())
                .fetch_optional(&mut *conn)
                .await?;
        if locked.is_none() {
            return Err(Error::NotFound(workflow_id.clone()));
        }
    }
    let rows = sqlx::query(&format!(
        "WITH w AS ({SELECT_INDEX} WHERE workflow_id = $1)
         SELECT w.*, e.seq, e.event_type, e.recorded_at AS event_recorded_at,
                e.body, e.prev_hash, e.hash
           FROM w LEFT JOIN events e ON e.workflow_id = w.workflow_id
          ORDER BY e.seq"
    ))
    .bind(workflow_id.as_str())
    .fetch_all(&mut *conn)
    .await?;
    let Some(first) = rows.first() else {
        return Err(Error::NotFound(workflow_id.clone()));
    };
    let summary = to_summary(index_row(first)?)?;
    let mut events = Vec::with_capacity(rows.len());
    for row in &rows {
        let Some(seq) = row.try_get::<Option<i64>, _>("seq")? else {
            continue; // no events (cannot happen for a created workflow)
        };
        let event: EventRow = (
            seq,
            row.try_get("event_type")?,
            row.try_get("event_recorded_at")?,
            row.try_get("body")?,
            row.try_get("prev_hash")?,
            row.try_get("hash")?,
        );
        events.push(to_event(workflow_id, event)?);
    }
    Ok((summary, events))
}

/// The batch must start where the history ends, and the index must agree with the log.
fn check_start(
    workflow_id: &WorkflowId,
    summary: &WorkflowSummary,
    events: &[StoredEvent],
    batch: &AppendBatch,
) -> Result<ChainHash> {
    if batch.workflow_id != *workflow_id || batch.expected_next_seq != summary.next_seq {
        return Err(Error::InvalidInput(format!(
            "an append to {workflow_id} decided on its history must start at seq {}",
            summary.next_seq
        )));
    }
    if !summary.agrees_with_log(events) {
        return Err(Error::Corrupt {
            workflow_id: workflow_id.to_string(),
            seq: summary.next_seq.get().saturating_sub(1),
            reason: "the index head differs from the log's last event".into(),
        });
    }
    Ok(summary.head_hash)
}

/// The index columns of a joined row (the first 14, in `SELECT_INDEX` order).
fn index_row(row: &PgRow) -> Result<IndexRow> {
    Ok((
        row.try_get(0)?,
        row.try_get(1)?,
        row.try_get(2)?,
        row.try_get(3)?,
        row.try_get(4)?,
        row.try_get(5)?,
        row.try_get(6)?,
        row.try_get(7)?,
        row.try_get(8)?,
        row.try_get(9)?,
        row.try_get(10)?,
        row.try_get(11)?,
        row.try_get(12)?,
        row.try_get(13)?,
    ))
}

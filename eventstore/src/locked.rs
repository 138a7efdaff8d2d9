//! Read, decide and append in one transaction, with the workflow's row locked.
//!
//! This is the hot path: a workflow task (or an activity outcome followed by the
//! workflow's next commands) costs one commit, and appenders of one workflow queue on
//! the row lock instead of racing and retrying.

use hcpflow_engine::{ChainHash, WorkflowId};

use crate::append::{finish_append, AppendBatch, Appended};
use crate::error::{Error, Result};
use crate::history::{to_event, EventRow};
use crate::index::{to_summary, IndexRow, SELECT_INDEX};
use crate::record::StoredEvent;
use crate::store::EventStore;
use crate::timers::to_i64;
use crate::WorkflowSummary;

impl EventStore {
    /// Locks the workflow's index row, reads its whole history, and asks `decide` what
    /// to append. `decide` returns the batch to append (its `expected_next_seq` must be
    /// the index's next seq) or `None`, and a value handed back to the caller.
    ///
    /// # Guarantees
    /// The history `decide` sees is the latest and cannot change before the append
    /// commits. Nothing is written if `decide` fails or returns `None`.
    pub async fn append_locked<T>(
        &self,
        workflow_id: &WorkflowId,
        decide: impl FnOnce(&WorkflowSummary, &[StoredEvent]) -> Result<(Option<AppendBatch>, T)>,
    ) -> Result<(Option<Appended>, T)> {
        let mut tx = self.pool.begin().await?;
        let row: Option<IndexRow> =
            sqlx::query_as(&format!("{SELECT_INDEX} WHERE workflow_id = $1 FOR UPDATE"))
                .bind(workflow_id.as_str())
                .fetch_optional(&mut *tx)
                .await?;
        let Some(row) = row else {
            return Err(Error::NotFound(workflow_id.clone()));
        };
        let summary = to_summary(row)?;
        let rows: Vec<EventRow> = sqlx::query_as(
            "SELECT seq, event_type, recorded_at, body, prev_hash, hash
               FROM events WHERE workflow_id = $1 ORDER BY seq",
        )
        .bind(workflow_id.as_str())
        .fetch_all(&mut *tx)
        .await?;
        let events = rows
            .into_iter()
            .map(|row| to_event(workflow_id, row))
            .collect::<Result<Vec<_>>>()?;
        let (batch, value) = decide(&summary, &events)?;
        let Some(batch) = batch else {
            tx.rollback().await?;
            return Ok((None, value));
        };
        if batch.workflow_id != *workflow_id || batch.expected_next_seq != summary.next_seq {
            return Err(Error::InvalidInput(format!(
                "a locked append to {workflow_id} must start at seq {}",
                summary.next_seq
            )));
        }
        let prev = events.last().map_or(ChainHash::GENESIS, |e| e.hash);
        if prev != summary.head_hash {
            return Err(Error::Corrupt {
                workflow_id: workflow_id.to_string(),
                seq: summary.next_seq.get().saturating_sub(1),
                reason: "the index head hash differs from the last event's hash".into(),
            });
        }
        let appended = finish_append(&mut tx, &batch, prev, to_i64(summary.next_seq)).await?;
        tx.commit().await?;
        Ok((Some(appended), value))
    }
}

//! Reading a history, and verifying its hash chain.

use chrono::{DateTime, Utc};
use hcpflow_engine::{ChainHash, Seq, WorkflowId};

use crate::error::{Error, Result};
use crate::record::{envelope_mismatch, StoredEvent};
use crate::store::EventStore;
use crate::timers::to_i64;

/// One page of a history.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryPage {
    pub events: Vec<StoredEvent>,
    /// Where the next page starts, or `None` when this page reached the end.
    pub next_from: Option<Seq>,
}

/// A history whose chain verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedHistory {
    /// Number of events (the last seq).
    pub events: u64,
    /// The hash of the last event ([`ChainHash::GENESIS`] for an empty history).
    pub head_hash: ChainHash,
    /// The kind of the last event (`WorkflowCompleted`, ...), if any.
    pub head_event_type: Option<String>,
}

pub(crate) type EventRow = (i64, String, DateTime<Utc>, Vec<u8>, Vec<u8>, Vec<u8>);

const VERIFY_PAGE: u32 = 1000;

impl EventStore {
    /// Up to `limit` events from `from` on, in seq order.
    pub async fn read_history(
        &self,
        workflow_id: &WorkflowId,
        from: Seq,
        limit: u32,
    ) -> Result<HistoryPage> {
        if limit == 0 {
            return Err(Error::InvalidInput(
                "a history page needs a limit of at least 1".into(),
            ));
        }
        read_page(&self.pool, workflow_id, from, limit).await
    }

    /// The whole history; for large histories prefer [`EventStore::read_history`] pages.
    pub async fn read_full_history(&self, workflow_id: &WorkflowId) -> Result<Vec<StoredEvent>> {
        let mut events = Vec::new();
        let mut from = Some(Seq::FIRST);
        while let Some(start) = from {
            let page = self.read_history(workflow_id, start, VERIFY_PAGE).await?;
            events.extend(page.events);
            from = page.next_from;
        }
        Ok(events)
    }

    /// Recomputes the hash chain of a stored history and checks it against the index.
    ///
    /// # Errors
    /// [`Error::Corrupt`] naming the first seq that is wrong: a changed event (its bytes
    /// no longer hash to its stored hash), a broken link, a missing seq, a row whose
    /// columns disagree with its hashed bytes, or an index head that does not match the
    /// last event (events removed from, or added behind, the index's back).
    /// [`Error::NotFound`] when the workflow does not exist.
    pub async fn verify_history(&self, workflow_id: &WorkflowId) -> Result<VerifiedHistory> {
        // One snapshot for the index and every page: a running workflow appends between
        // reads, and the index read first would otherwise trail the log read after it.
        let mut snapshot = self.pool.begin().await?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(&mut *snapshot)
            .await?;
        let index: Option<(i64, Vec<u8>)> =
            sqlx::query_as("SELECT next_seq, head_hash FROM workflows WHERE workflow_id = $1")
                .bind(workflow_id.as_str())
                .fetch_optional(&mut *snapshot)
                .await?;
        let Some((index_next, index_head)) = index else {
            return Err(Error::NotFound(workflow_id.clone()));
        };
        let corrupt = |seq: u64, reason: String| Error::Corrupt {
            workflow_id: workflow_id.to_string(),
            seq,
            reason,
        };

        let mut prev = ChainHash::GENESIS;
        let mut head_event_type = None;
        let mut expected_seq = Seq::FIRST;
        let mut from = Some(Seq::FIRST);
        while let Some(start) = from {
            let page = read_page(&mut *snapshot, workflow_id, start, VERIFY_PAGE).await?;
            for event in &page.events {
                let seq = event.seq.get();
                if event.seq != expected_seq {
                    return Err(corrupt(
                        expected_seq.get(),
                        format!("event missing (next stored seq is {seq})"),
                    ));
                }
                if event.prev_hash != prev {
                    return Err(corrupt(
                        seq,
                        "prev_hash does not link to the previous event".into(),
                    ));
                }
                if prev.next(&event.body) != event.hash {
                    return Err(corrupt(
                        seq,
                        "stored bytes do not hash to the stored hash".into(),
                    ));
                }
                if let Some(reason) = envelope_mismatch(event) {
                    return Err(corrupt(seq, reason));
                }
                prev = event.hash;
                head_event_type = Some(event.event_type.clone());
                expected_seq = expected_seq.next();
            }
            from = page.next_from;
        }

        let stored_next = to_i64(expected_seq);
        if index_next != stored_next {
            let first_bad = index_next.min(stored_next);
            return Err(corrupt(
                u64::try_from(first_bad).unwrap_or(0),
                format!(
                    "the index says the next seq is {index_next}, the log holds events up to {}",
                    stored_next - 1
                ),
            ));
        }
        if index_head != prev.as_bytes() {
            return Err(corrupt(
                expected_seq.get().saturating_sub(1),
                "the index head hash differs from the last event's hash".into(),
            ));
        }
        Ok(VerifiedHistory {
            events: expected_seq.get() - 1,
            head_hash: prev,
            head_event_type,
        })
    }
}

/// A page read through `executor`: the pool, or a snapshot transaction.
async fn read_page<'e, E>(
    executor: E,
    workflow_id: &WorkflowId,
    from: Seq,
    limit: u32,
) -> Result<HistoryPage>
where
    E: sqlx::PgExecutor<'e>,
{
    // One row more than asked tells whether another page follows.
    let rows: Vec<EventRow> = sqlx::query_as(
        "SELECT seq, event_type, recorded_at, body, prev_hash, hash
               FROM events WHERE workflow_id = $1 AND seq >= $2
              ORDER BY seq LIMIT $3",
    )
    .bind(workflow_id.as_str())
    .bind(to_i64(from))
    .bind(i64::from(limit) + 1)
    .fetch_all(executor)
    .await?;
    let mut events = rows
        .into_iter()
        .map(|row| to_event(workflow_id, row))
        .collect::<Result<Vec<_>>>()?;
    let next_from = if events.len() > limit as usize {
        events.truncate(limit as usize);
        events.last().map(|event| event.seq.next())
    } else {
        None
    };
    Ok(HistoryPage { events, next_from })
}

pub(crate) fn to_event(workflow_id: &WorkflowId, row: EventRow) -> Result<StoredEvent> {
    let (seq, event_type, recorded_at, body, prev_hash, hash) = row;
    let corrupt = |reason: String| Error::Corrupt {
        workflow_id: workflow_id.to_string(),
        seq: u64::try_from(seq).unwrap_or(0),
        reason,
    };
    Ok(StoredEvent {
        workflow_id: workflow_id.clone(),
        seq: u64::try_from(seq)
            .ok()
            .and_then(|s| Seq::new(s).ok())
            .ok_or_else(|| corrupt(format!("invalid seq {seq}")))?,
        event_type,
        recorded_at,
        body,
        prev_hash: ChainHash::from_slice(&prev_hash).map_err(|e| corrupt(e.to_string()))?,
        hash: ChainHash::from_slice(&hash).map_err(|e| corrupt(e.to_string()))?,
    })
}

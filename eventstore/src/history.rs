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
        // Most histories fit one page: the index row and every event in one statement
        // (one snapshot, one round trip; the checkpointer verifies each ended workflow).
        let rows: Vec<IndexAndEventRow> = sqlx::query_as(
            "SELECT w.next_seq, w.head_hash, e.seq, e.event_type, e.recorded_at, e.body,
                    e.prev_hash, e.hash
               FROM workflows w
               LEFT JOIN LATERAL (
                    SELECT seq, event_type, recorded_at, body, prev_hash, hash FROM events
                     WHERE events.workflow_id = w.workflow_id
                     ORDER BY seq LIMIT $2) e ON true
              WHERE w.workflow_id = $1
              ORDER BY e.seq",
        )
        .bind(workflow_id.as_str())
        .bind(i64::from(VERIFY_PAGE) + 1)
        .fetch_all(&self.pool)
        .await?;
        let Some((index_next, index_head)) = rows.first().map(|row| (row.0, row.1.clone())) else {
            return Err(Error::NotFound(workflow_id.clone()));
        };
        if rows.len() > VERIFY_PAGE as usize {
            return self.verify_long_history(workflow_id).await;
        }
        let mut chain = ChainCheck::new(workflow_id);
        for row in rows {
            let (_, _, seq, event_type, recorded_at, body, prev_hash, hash) = row;
            // A history with no event yet reads as one row without an event.
            if let (
                Some(seq),
                Some(event_type),
                Some(recorded_at),
                Some(body),
                Some(prev),
                Some(hash),
            ) = (seq, event_type, recorded_at, body, prev_hash, hash)
            {
                let row = (seq, event_type, recorded_at, body, prev, hash);
                chain.feed(&to_event(workflow_id, row)?)?;
            }
        }
        chain.finish(index_next, &index_head)
    }

    /// [`EventStore::verify_history`] of a history longer than a page: page after page,
    /// all in one snapshot.
    async fn verify_long_history(&self, workflow_id: &WorkflowId) -> Result<VerifiedHistory> {
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
        let mut chain = ChainCheck::new(workflow_id);
        let mut from = Some(Seq::FIRST);
        while let Some(start) = from {
            let page = read_page(&mut *snapshot, workflow_id, start, VERIFY_PAGE).await?;
            for event in &page.events {
                chain.feed(event)?;
            }
            from = page.next_from;
        }
        chain.finish(index_next, &index_head)
    }
}

/// The index row's next seq and head hash, and one event (none for an empty history).
type IndexAndEventRow = (
    i64,
    Vec<u8>,
    Option<i64>,
    Option<String>,
    Option<DateTime<Utc>>,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
);

/// A hash chain checked event by event, from the first.
struct ChainCheck<'a> {
    workflow_id: &'a WorkflowId,
    prev: ChainHash,
    head_event_type: Option<String>,
    expected_seq: Seq,
}

impl<'a> ChainCheck<'a> {
    fn new(workflow_id: &'a WorkflowId) -> Self {
        Self {
            workflow_id,
            prev: ChainHash::GENESIS,
            head_event_type: None,
            expected_seq: Seq::FIRST,
        }
    }

    fn corrupt(&self, seq: u64, reason: String) -> Error {
        Error::Corrupt {
            workflow_id: self.workflow_id.to_string(),
            seq,
            reason,
        }
    }

    /// The next event: it must be the next seq, link to the previous one, hash to its
    /// stored hash and say in its bytes what its columns say.
    fn feed(&mut self, event: &StoredEvent) -> Result<()> {
        let seq = event.seq.get();
        if event.seq != self.expected_seq {
            return Err(self.corrupt(
                self.expected_seq.get(),
                format!("event missing (next stored seq is {seq})"),
            ));
        }
        if event.prev_hash != self.prev {
            return Err(self.corrupt(seq, "prev_hash does not link to the previous event".into()));
        }
        if self.prev.next(&event.body) != event.hash {
            return Err(self.corrupt(seq, "stored bytes do not hash to the stored hash".into()));
        }
        if let Some(reason) = envelope_mismatch(event) {
            return Err(self.corrupt(seq, reason));
        }
        self.prev = event.hash;
        self.head_event_type = Some(event.event_type.clone());
        self.expected_seq = self.expected_seq.next();
        Ok(())
    }

    /// The chain as a whole against the index row: it must end where the index says.
    fn finish(self, index_next: i64, index_head: &[u8]) -> Result<VerifiedHistory> {
        let stored_next = to_i64(self.expected_seq);
        if index_next != stored_next {
            let first_bad = index_next.min(stored_next);
            return Err(self.corrupt(
                u64::try_from(first_bad).unwrap_or(0),
                format!(
                    "the index says the next seq is {index_next}, the log holds events up to {}",
                    stored_next - 1
                ),
            ));
        }
        if index_head != self.prev.as_bytes() {
            return Err(self.corrupt(
                self.expected_seq.get().saturating_sub(1),
                "the index head hash differs from the last event's hash".into(),
            ));
        }
        Ok(VerifiedHistory {
            events: self.expected_seq.get() - 1,
            head_hash: self.prev,
            head_event_type: self.head_event_type,
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

//! The events-stream watermark: how far each workflow's events are known to be on NATS.
//!
//! Every appended event goes to the events stream. Instead of an outbox row per event
//! (a write and a later update per event on the hot path), the appending process
//! publishes the committed events itself and reports the range it published; the
//! watermark `events_published_seq` moves only over a range that starts right after it,
//! so it never skips an event another process failed to publish. The relay publishes
//! whatever lies between the mark and the head once an append is older than its grace.
//!
//! Guarantees: an event below the mark was acknowledged by JetStream; an event above it
//! is published again by the relay (with the same `Nats-Msg-Id`, so a copy within the
//! duplicate window is dropped).

use std::time::Duration;

use chrono::{DateTime, Utc};
use hcpflow_engine::{Seq, WorkflowId};

use crate::error::{Error, Result};
use crate::history::{to_event, EventRow};
use crate::record::StoredEvent;
use crate::store::EventStore;
use crate::timers::to_i64;

/// A contiguous run of one workflow's events that JetStream acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PublishedRange {
    pub first: Seq,
    pub last: Seq,
}

impl PublishedRange {
    /// Joins `other` when the two touch or overlap; otherwise keeps the earlier range
    /// (the later one is left to the relay: a mark can only move over a gap-free run).
    #[must_use]
    pub fn merge(self, other: PublishedRange) -> PublishedRange {
        let (low, high) = if self.first <= other.first {
            (self, other)
        } else {
            (other, self)
        };
        if high.first.get() <= low.last.get().saturating_add(1) {
            PublishedRange {
                first: low.first,
                last: low.last.max(high.last),
            }
        } else {
            low
        }
    }
}

/// Events the appending processes did not report published, oldest change first.
#[derive(Debug, Default)]
pub struct UnpublishedEvents {
    /// Each with its workflow's events subject, in workflow, then seq order.
    pub events: Vec<(String, StoredEvent)>,
    /// The oldest last change among their workflows (for the lag gauge).
    pub oldest_change: Option<DateTime<Utc>>,
}

type UnpublishedRow = (
    String,
    String,
    DateTime<Utc>,
    i64,
    String,
    DateTime<Utc>,
    Vec<u8>,
    Vec<u8>,
    Vec<u8>,
);

impl EventStore {
    /// Moves the watermarks of many workflows (what a process published outside an
    /// append of the same workflow). A range that does not start at or before the mark
    /// plus one changes nothing.
    pub async fn mark_events_published(
        &self,
        ranges: &[(WorkflowId, PublishedRange)],
    ) -> Result<u64> {
        if ranges.is_empty() {
            return Ok(0);
        }
        let ids: Vec<&str> = ranges.iter().map(|(id, _)| id.as_str()).collect();
        let firsts: Vec<i64> = ranges.iter().map(|(_, r)| to_i64(r.first)).collect();
        let lasts: Vec<i64> = ranges.iter().map(|(_, r)| to_i64(r.last)).collect();
        let done = sqlx::query(
            "UPDATE workflows w SET events_published_seq = m.last
               FROM UNNEST($1::text[], $2::bigint[], $3::bigint[]) AS m(id, first, last)
              WHERE w.workflow_id = m.id
                AND w.events_published_seq >= m.first - 1
                AND w.events_published_seq < m.last",
        )
        .bind(&ids)
        .bind(&firsts)
        .bind(&lasts)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    /// Up to `limit` events above their workflow's mark, of workflows whose last change
    /// is older than `grace` (younger ones are still being published by their process).
    pub async fn unpublished_events(
        &self,
        grace: Duration,
        limit: u32,
    ) -> Result<UnpublishedEvents> {
        let rows: Vec<UnpublishedRow> = sqlx::query_as(
            "SELECT w.workflow_id, w.events_subject, w.updated_at, e.seq, e.event_type,
                    e.recorded_at, e.body, e.prev_hash, e.hash
               FROM (SELECT workflow_id, events_subject, updated_at, events_published_seq
                       FROM workflows
                      WHERE events_published_seq < next_seq - 1 AND events_subject IS NOT NULL
                        AND updated_at < now() - make_interval(secs => $1)
                      ORDER BY updated_at
                      LIMIT $2) w
               JOIN events e ON e.workflow_id = w.workflow_id AND e.seq > w.events_published_seq
              ORDER BY w.updated_at, w.workflow_id, e.seq
              LIMIT $2",
        )
        .bind(grace.as_secs_f64())
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        let mut unpublished = UnpublishedEvents::default();
        for (workflow_id, subject, changed, seq, event_type, recorded_at, body, prev_hash, hash) in
            rows
        {
            let id = WorkflowId::new(workflow_id)
                .map_err(|e| Error::InvalidInput(format!("stored workflow id: {e}")))?;
            let row: EventRow = (seq, event_type, recorded_at, body, prev_hash, hash);
            unpublished.events.push((subject, to_event(&id, row)?));
            unpublished.oldest_change = Some(
                unpublished
                    .oldest_change
                    .map_or(changed, |oldest| oldest.min(changed)),
            );
        }
        Ok(unpublished)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(first: u64, last: u64) -> PublishedRange {
        PublishedRange {
            first: Seq::new(first).unwrap(),
            last: Seq::new(last).unwrap(),
        }
    }

    #[test]
    fn touching_and_overlapping_ranges_join() {
        assert_eq!(range(1, 3).merge(range(4, 6)), range(1, 6));
        assert_eq!(range(4, 6).merge(range(1, 3)), range(1, 6));
        assert_eq!(range(1, 5).merge(range(3, 4)), range(1, 5));
    }

    #[test]
    fn a_gap_keeps_the_earlier_range() {
        assert_eq!(range(1, 3).merge(range(5, 6)), range(1, 3));
        assert_eq!(range(5, 6).merge(range(1, 3)), range(1, 3));
    }
}

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

use crate::error::Result;
use crate::history::{to_event, EventRow};
use crate::index::stored_workflow_id;
use crate::record::StoredEvent;
use crate::store::EventStore;
use crate::timers::to_i64;

/// A contiguous run of one workflow's events that JetStream acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PublishedRange {
    pub first: Seq,
    pub last: Seq,
}

/// One workflow's published runs not marked yet: disjoint, in order, touching runs
/// joined. Runs arrive out of order (acknowledgements of consecutive steps overlap), so
/// a run may wait here for the one before it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PublishedRuns {
    runs: Vec<PublishedRange>,
}

impl PublishedRuns {
    pub fn add(&mut self, range: PublishedRange) {
        self.runs.push(range);
        self.runs.sort_by_key(|run| run.first);
        let mut joined: Vec<PublishedRange> = Vec::with_capacity(self.runs.len());
        for run in self.runs.drain(..) {
            match joined.last_mut() {
                Some(last) if run.first.get() <= last.last.get().saturating_add(1) => {
                    last.last = last.last.max(run.last);
                }
                _ => joined.push(run),
            }
        }
        self.runs = joined;
    }

    /// The earliest run: the only one that can move the mark next.
    pub fn take_first(&mut self) -> Option<PublishedRange> {
        (!self.runs.is_empty()).then(|| self.runs.remove(0))
    }

    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
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
    /// plus one changes nothing; the workflows of such ranges that still lie ahead of
    /// their mark are returned, for the caller to try again once the run before them is
    /// published (ranges the mark already covers are done). So are those of workflows
    /// whose row another transaction holds locked at that moment: this never waits.
    pub async fn mark_events_published(
        &self,
        ranges: &[(WorkflowId, PublishedRange)],
    ) -> Result<Vec<WorkflowId>> {
        if ranges.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<&str> = ranges.iter().map(|(id, _)| id.as_str()).collect();
        let firsts: Vec<i64> = ranges.iter().map(|(_, r)| to_i64(r.first)).collect();
        let lasts: Vec<i64> = ranges.iter().map(|(_, r)| to_i64(r.last)).collect();
        // Only rows nobody holds are marked: a row an append holds locked is skipped
        // and its range handed back as pending (its next append, or the next flush,
        // marks it). Waiting would hold the rows already locked against their own
        // appends meanwhile, and an UPDATE ... FROM that waits can deadlock with a group
        // append that locks in another order (an UPDATE locks in its join's order: the
        // table's pages when the planner scans a small table whole; seen in a soak).
        // The outer SELECT sees the rows as they were before the UPDATE.
        let pending: Vec<String> = sqlx::query_scalar(
            "WITH m AS (SELECT * FROM UNNEST($1::text[], $2::bigint[], $3::bigint[])
                                 AS m(id, first, last)),
                  lk AS MATERIALIZED (
                      SELECT workflow_id FROM workflows WHERE workflow_id = ANY($1::text[])
                         FOR NO KEY UPDATE SKIP LOCKED),
                  up AS (UPDATE workflows w SET events_published_seq = m.last
                           FROM m
                          WHERE w.workflow_id = m.id
                            AND w.events_published_seq >= m.first - 1
                            AND w.events_published_seq < m.last
                            AND w.workflow_id IN (SELECT workflow_id FROM lk)
                         RETURNING w.workflow_id)
             SELECT m.id FROM m JOIN workflows w ON w.workflow_id = m.id
              WHERE w.events_published_seq < m.last
                AND m.id NOT IN (SELECT workflow_id FROM up)",
        )
        .bind(&ids)
        .bind(&firsts)
        .bind(&lasts)
        .fetch_all(&self.pool)
        .await?;
        pending.into_iter().map(stored_workflow_id).collect()
    }

    /// Up to `limit` events above their workflow's mark, of workflows whose last change
    /// is older than `grace` (younger ones are still being published by their process)
    /// and whose events subject starts with `subject_prefix` ("" for all).
    pub async fn unpublished_events(
        &self,
        subject_prefix: &str,
        grace: Duration,
        limit: u32,
    ) -> Result<UnpublishedEvents> {
        let rows: Vec<UnpublishedRow> = sqlx::query_as(
            "SELECT w.workflow_id, w.events_subject, w.updated_at, e.seq, e.event_type,
                    e.recorded_at, e.body, e.prev_hash, e.hash
               FROM (SELECT workflow_id, events_subject, updated_at, events_published_seq
                       FROM workflows
                      WHERE events_open
                        AND events_published_seq < next_seq - 1 AND events_subject IS NOT NULL
                        AND updated_at < now() - make_interval(secs => $1)
                        AND left(events_subject, length($3)) = $3
                      ORDER BY updated_at
                      LIMIT $2) w
               JOIN events e ON e.workflow_id = w.workflow_id AND e.seq > w.events_published_seq
              ORDER BY w.updated_at, w.workflow_id, e.seq
              LIMIT $2",
        )
        .bind(grace.as_secs_f64())
        .bind(i64::from(limit))
        .bind(subject_prefix)
        .fetch_all(&self.pool)
        .await?;
        let mut unpublished = UnpublishedEvents::default();
        for (workflow_id, subject, changed, seq, event_type, recorded_at, body, prev_hash, hash) in
            rows
        {
            let id = stored_workflow_id(workflow_id)?;
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

    fn runs(ranges: &[(u64, u64)]) -> Vec<PublishedRange> {
        let mut runs = PublishedRuns::default();
        for (first, last) in ranges {
            runs.add(range(*first, *last));
        }
        std::iter::from_fn(|| runs.take_first()).collect()
    }

    #[test]
    fn touching_and_overlapping_runs_join_in_any_order() {
        assert_eq!(runs(&[(1, 3), (4, 6)]), vec![range(1, 6)]);
        assert_eq!(runs(&[(4, 6), (1, 3)]), vec![range(1, 6)]);
        assert_eq!(runs(&[(1, 5), (3, 4)]), vec![range(1, 5)]);
        assert_eq!(runs(&[(7, 9), (1, 3), (4, 6)]), vec![range(1, 9)]);
    }

    #[test]
    fn a_gap_keeps_both_runs_earliest_first() {
        assert_eq!(runs(&[(5, 6), (1, 3)]), vec![range(1, 3), range(5, 6)]);
        assert_eq!(
            runs(&[(1, 3), (8, 9), (5, 6)]),
            vec![range(1, 3), range(5, 6), range(8, 9)]
        );
    }
}

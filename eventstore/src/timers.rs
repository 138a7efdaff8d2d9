//! Durable timers: workflow sleeps and activity retry backoffs as due-time rows.
//!
//! Guarantees: a timer is written in the same transaction as the event that starts it.
//! A claim holds a row under lease, so concurrent timer services never claim the same
//! live row; a row whose claimer died becomes claimable again when the lease runs out
//! (firing is at-least-once; the engine drops a second `TimerFired` for the same seq).

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Utc};
use hcpflow_engine::{Seq, WorkflowId};

use crate::error::{Error, Result};
use crate::store::EventStore;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimerKind {
    /// A workflow's `sleep`.
    Timer,
    /// The backoff before an activity's next attempt.
    Retry,
}

impl TimerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TimerKind::Timer => "timer",
            TimerKind::Retry => "retry",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        match text {
            "timer" => Some(TimerKind::Timer),
            "retry" => Some(TimerKind::Retry),
            _ => None,
        }
    }
}

impl fmt::Display for TimerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A timer to create with an append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTimer {
    /// The seq of the command the timer belongs to (the sleep, or the retried activity).
    pub seq: Seq,
    pub kind: TimerKind,
    pub due_at: DateTime<Utc>,
}

/// A due timer held under lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedTimer {
    pub id: i64,
    pub workflow_id: WorkflowId,
    pub seq: Seq,
    pub kind: TimerKind,
    pub due_at: DateTime<Utc>,
}

/// The LISTEN/NOTIFY channel an append notifies when it armed timers.
pub const TIMERS_CHANNEL: &str = "hcpflow_timers";

pub(crate) fn to_i64(seq: Seq) -> i64 {
    // A history of 2^63 events is not a thing; saturate rather than wrap.
    i64::try_from(seq.get()).unwrap_or(i64::MAX)
}

impl EventStore {
    /// Claims up to `limit` timers due by the database's clock, earliest first, of one
    /// deployment's workflows (their events go to `events_prefix`): deployments sharing
    /// a database each fire their own.
    pub async fn claim_due_timers(
        &self,
        claimer: &str,
        events_prefix: &str,
        limit: u32,
        lease: Duration,
    ) -> Result<Vec<ClaimedTimer>> {
        let rows: Vec<(i64, String, i64, String, DateTime<Utc>)> = sqlx::query_as(
            "UPDATE timers t
                SET claimed_by = $1, claim_expires_at = now() + make_interval(secs => $3)
              WHERE t.id IN (
                    SELECT d.id FROM timers d JOIN workflows w ON w.workflow_id = d.workflow_id
                     WHERE d.fired_at IS NULL AND d.due_at <= now()
                       AND (d.claim_expires_at IS NULL OR d.claim_expires_at < now())
                       AND left(w.events_subject, length($4)) = $4
                     ORDER BY d.due_at, d.id
                     LIMIT $2
                     FOR UPDATE OF d SKIP LOCKED)
             RETURNING t.id, t.workflow_id, t.seq, t.kind, t.due_at",
        )
        .bind(claimer)
        .bind(i64::from(limit))
        .bind(lease.as_secs_f64())
        .bind(events_prefix)
        .fetch_all(&self.pool)
        .await?;
        let mut claimed = rows
            .into_iter()
            .map(|(id, workflow_id, seq, kind, due_at)| {
                let corrupt =
                    |reason: String| Error::InvalidInput(format!("timer row {id}: {reason}"));
                Ok(ClaimedTimer {
                    id,
                    workflow_id: WorkflowId::new(workflow_id)
                        .map_err(|e| corrupt(e.to_string()))?,
                    seq: u64::try_from(seq)
                        .ok()
                        .and_then(|s| Seq::new(s).ok())
                        .ok_or_else(|| corrupt(format!("bad seq {seq}")))?,
                    kind: TimerKind::parse(&kind)
                        .ok_or_else(|| corrupt(format!("bad kind {kind}")))?,
                    due_at,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        claimed.sort_by_key(|timer| (timer.due_at, timer.id));
        Ok(claimed)
    }

    /// Marks timers fired. Only rows still claimed by `claimer` are changed; returns how many.
    pub async fn mark_timers_fired(&self, claimer: &str, ids: &[i64]) -> Result<u64> {
        let done = sqlx::query(
            "UPDATE timers SET fired_at = now(), claim_expires_at = NULL
              WHERE id = ANY($1) AND claimed_by = $2 AND fired_at IS NULL",
        )
        .bind(ids)
        .bind(claimer)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    /// The earliest due time of an unfired timer, so a timer service can sleep until then.
    pub async fn next_timer_due(&self) -> Result<Option<DateTime<Utc>>> {
        let due: Option<DateTime<Utc>> =
            sqlx::query_scalar("SELECT min(due_at) FROM timers WHERE fired_at IS NULL")
                .fetch_one(&self.pool)
                .await?;
        Ok(due)
    }
}

//! The timer service: fires durable timers (`TimerFired` + a workflow task) and retry
//! backoffs (the next attempt's activity task) when they are due.
//!
//! It sleeps until the earliest due time, woken early by LISTEN/NOTIFY when an append
//! arms a new timer; a slow fallback poll covers a lost notification. Claims carry a
//! lease, so several services never fire one timer at once; firing twice after a crash
//! is harmless (`TimerFired` is appended only while the timer is pending, and task
//! messages are deduplicated by id).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;

use hcpflow_engine::event::TimerFired;
use hcpflow_engine::history::pending_work;
use hcpflow_engine::{Seq, WorkflowId};
use hcpflow_eventstore::{ClaimedTimer, Error as StoreError, TimerKind, TIMERS_CHANNEL};
use tokio::sync::watch;

use crate::runtime::journal::{Journal, Write};

const FALLBACK_POLL: Duration = Duration::from_secs(5);
const LEASE: Duration = Duration::from_secs(30);
/// Timers claimed at once, and fired at once: each firing is a step of its own
/// workflow (read, decide, append), so firing them together lets their appends share
/// group commits. One at a time, a loaded server fired fewer timers a second than its
/// workflows armed, and a 2 s timer fired 85 s late (the soak's timer workflows).
const CLAIM_BATCH: u32 = 100;
const FIRE_CONCURRENCY: usize = 32;

#[derive(Debug)]
pub struct TimerService {
    pub journal: Arc<Journal>,
    pub name: String,
}

impl TimerService {
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) -> anyhow::Result<()> {
        let mut listener = self.journal.store.listen(&[TIMERS_CHANNEL]).await?;
        loop {
            let fired = match self.fire_due().await {
                Ok(fired) => fired,
                Err(error) => {
                    tracing::warn!(%error, "firing timers failed; retrying");
                    0
                }
            };
            if fired > 0 {
                continue; // there may be more due
            }
            let wait = match self.journal.store.next_timer_due().await {
                Ok(Some(due)) => (due - chrono::Utc::now())
                    .to_std()
                    .unwrap_or(Duration::ZERO)
                    .min(FALLBACK_POLL),
                _ => FALLBACK_POLL,
            };
            tokio::select! {
                _ = shutdown.changed() => return Ok(()),
                _ = tokio::time::sleep(wait) => {}
                notified = listener.recv() => {
                    if let Err(error) = notified {
                        tracing::warn!(%error, "timer notifications interrupted");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
            }
        }
    }

    /// `<prefix>.events.`: deployments sharing a database each fire their own timers.
    fn events_prefix(&self) -> String {
        format!("{}.events.", self.journal.outgoing.subjects.prefix())
    }

    /// Fires every due timer it can claim; returns how many.
    async fn fire_due(&self) -> anyhow::Result<usize> {
        let due = self
            .journal
            .store
            .claim_due_timers(&self.name, &self.events_prefix(), CLAIM_BATCH, LEASE)
            .await?;
        let firings: Vec<_> = due.iter().map(|timer| self.fire_or_log(timer)).collect();
        let fired: Vec<i64> = futures::stream::iter(firings)
            .buffer_unordered(FIRE_CONCURRENCY)
            .filter_map(std::future::ready)
            .collect()
            .await;
        self.journal
            .store
            .mark_timers_fired(&self.name, &fired)
            .await?;
        self.journal.metrics.timers_fired.add(fired.len() as u64);
        Ok(due.len())
    }

    /// Fires one timer: its id once fired, `None` (logged) if it could not be.
    async fn fire_or_log(&self, timer: &ClaimedTimer) -> Option<i64> {
        match self.fire(timer).await {
            Ok(()) => Some(timer.id),
            Err(error) => {
                tracing::warn!(workflow_id = %timer.workflow_id, seq = %timer.seq, %error, "timer not fired; it will be retried after its lease");
                None
            }
        }
    }

    async fn fire(&self, timer: &ClaimedTimer) -> anyhow::Result<()> {
        match timer.kind {
            TimerKind::Timer => self.fire_timer(&timer.workflow_id, timer.seq).await,
            TimerKind::Retry => {
                let history = self.journal.load(&timer.workflow_id).await?;
                let work = pending_work(&timer.workflow_id, &history);
                let Some(retry) = work
                    .activities
                    .iter()
                    .find(|a| a.scheduled_seq == timer.seq)
                else {
                    return Ok(()); // finished or cancelled meanwhile
                };
                let task = self.journal.outgoing.activity_message(retry);
                self.journal.publish(&task).await
            }
        }
    }

    async fn fire_timer(&self, id: &WorkflowId, seq: Seq) -> anyhow::Result<()> {
        let step = self
            .journal
            .step(id, |_, history| {
                // Fired, cancelled, or the workflow ended: nothing to do.
                pending_work(id, history)
                    .timers
                    .iter()
                    .any(|t| t.started_seq == seq)
                    .then(|| Write {
                        events: vec![TimerFired { started_seq: seq }.into()],
                        ..Write::default()
                    })
            })
            .await;
        match step {
            Ok(_) | Err(StoreError::NotFound(_)) => Ok(()),
            Err(error) => Err(error.into()),
        }
    }
}

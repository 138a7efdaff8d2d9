//! One step of a workflow in one transaction: record the inputs that arrived (an
//! activity outcome, a fired timer, a child's end), run the workflow code over the
//! history they complete, and append its commands — all in one commit, which writes
//! only if the workflow's index row still stands where the decision found it. Steps of
//! one workflow in one process take turns (`step_gate.rs`).
//!
//! A process without the workflow code records the inputs and wakes the workflow
//! through NATS instead. An activity-only process runs the code too, but hands a
//! history its code does not replay to a workflow worker rather than block it.

use chrono::{SubsecRound, Utc};
use hcpflow_engine::event::HistoryEvent;
use hcpflow_engine::{ExecError, OsEntropy, Seq, Timestamp, WorkflowId, WorkflowStatus};
use hcpflow_eventstore::{
    AppendBatch, Appended, Error as StoreError, StoredEvent, WorkflowSummary,
};

use crate::runtime::decide::{Decider, Step};
use crate::runtime::eager::LocalTask;
use crate::runtime::history_cache::CachedHistory;
use crate::runtime::journal::{to_datetime, Journal, Write};
use crate::runtime::publish::TakenMarks;

/// What a step did.
#[derive(Debug, Default)]
pub struct StepOutcome {
    pub appended: Option<Appended>,
    /// The workflow code diverged from its history: the workflow must be blocked.
    pub blocked: Option<ExecError>,
    /// Inputs were refused by `inputs` (a duplicate outcome, a fired timer...).
    pub nothing_to_do: bool,
}

struct Decision {
    blocked: Option<ExecError>,
    nothing_to_do: bool,
    /// A blocked workflow replays again: its status to return to.
    unblocked: Option<WorkflowStatus>,
    /// The history the decision was made on, with the recorded inputs, and its index:
    /// kept for the next step (extended by the append, or as it was when nothing was
    /// appended).
    seen: Option<CachedHistory>,
    /// Activity tasks this process runs itself once the append commits.
    eager: Vec<LocalTask>,
    /// What the append marks published: given back if it does not commit.
    marks: Option<TakenMarks>,
}

impl Decision {
    /// Nothing to record: the history it looked at is kept as it was.
    fn nothing_to_do(seen: CachedHistory) -> Self {
        Self {
            blocked: None,
            nothing_to_do: true,
            unblocked: None,
            seen: Some(seen),
            eager: Vec::new(),
            marks: None,
        }
    }

    /// Its append committed: what it marked published is marked.
    fn committed(mut self) -> Self {
        if let Some(marks) = self.marks.take() {
            marks.committed();
        }
        self
    }
}

impl Journal {
    /// Runs a step. `inputs` sees the current history and returns the input events to
    /// record (with their ledger rows and timers in `Write`), or `None` to record
    /// nothing; with no inputs the step only runs the workflow code.
    ///
    /// The history comes from this process's cache when its last append (or its last
    /// step that appended nothing) was ours, and is read otherwise; `inputs` may be
    /// called more than once (a stale cache, a lost race), each time on a newer history.
    ///
    /// Steps of one workflow in this process take turns (see `step_gate.rs`), so that
    /// each starts from the history the one before it cached.
    pub async fn step(
        &self,
        id: &WorkflowId,
        mut inputs: impl FnMut(&WorkflowSummary, &[HistoryEvent]) -> Option<Write> + Send,
    ) -> Result<StepOutcome, StoreError> {
        let turn = self.step_gate.enter(id).await;
        // Until the head it appends is recorded, the checkpointer leaves an unknown head
        // of the workflow to a later scan.
        let in_flight = self.witnessed.step_in_flight(id);
        let (appended, mut decision) = self.decide_and_append(id, &mut inputs).await?;
        if let Some(appended) = &appended {
            let whole_chain = decision.seen.as_ref().is_some_and(|seen| seen.witnessed);
            self.witnessed.record(id, appended, whole_chain);
            // Queued while the workflow's turn is held: its next step here queues after.
            self.events
                .queue(&self.outgoing, &appended.tenant, &appended.events);
        }
        drop(in_flight);
        // The next step of this workflow here starts from what this one appended, or
        // from the history it found when it appended nothing.
        match (&appended, decision.seen.take()) {
            (Some(appended), Some(seen)) => self.keep_history(seen, appended),
            (None, Some(seen)) => self.keep_unchanged(seen),
            (_, None) => {}
        }
        drop(turn);
        self.finish_step(id, appended, decision).await
    }

    /// Decides the step on the cached history, or on a fresh read when there is none or
    /// it proves stale, and appends what it decided.
    async fn decide_and_append(
        &self,
        id: &WorkflowId,
        inputs: &mut (impl FnMut(&WorkflowSummary, &[HistoryEvent]) -> Option<Write> + Send),
    ) -> Result<(Option<Appended>, Decision), StoreError> {
        let now = Utc::now().trunc_subsecs(3);
        // The head of a chain this process wrote whole, as it cached it: a fresh read
        // that finds the same head finds that chain still.
        let mut witnessed_head = None;
        if let Some(cached) = self.history_cache.take(id) {
            let summary = cached.summary.clone();
            if cached.witnessed {
                witnessed_head = Some((summary.next_seq, summary.head_hash));
            }
            // Replaying a long history is milliseconds of CPU, and so is looking through
            // it for the inputs to record.
            let (batch, decision) = off_the_async_workers(cached.history.len(), || {
                self.decide(
                    id,
                    &summary,
                    (cached.history, cached.witnessed),
                    inputs,
                    now,
                )
            });
            // Only an append is checked against the database; a decision to do nothing
            // on a possibly stale copy is made again on a fresh read below.
            if let Some(batch) = batch {
                if batch.status.is_some_and(WorkflowStatus::is_terminal) {
                    self.events.send_ahead_of_end(id);
                }
                // A failed append's decision, dropped, gives back its marks.
                match self.store.append_known(&summary, &batch).await {
                    Ok(appended) => return Ok((Some(appended), decision.committed())),
                    Err(error) => {
                        if !matches!(error, StoreError::Conflict { .. }) {
                            return Err(error);
                        }
                        self.metrics.conflicts.inc();
                    }
                }
            }
        }
        // A second call of the closure below means the first try lost a race.
        let mut tries = 0u32;
        // An append checks that the index row read ends where the log read does; a
        // history kept for the next step without an append is checked here.
        let mut index_matches_log = false;
        let (appended, decision) = self
            .store
            .append_locked(id, |summary, stored| {
                tries += 1;
                index_matches_log = summary.agrees_with_log(stored);
                // Read from the database, the chain is this process's own only if its
                // head is the one this process appended last (the new events chain
                // from that head, not from the bytes read).
                let witnessed = witnessed_head == Some((summary.next_seq, summary.head_hash));
                // Decoding a long history read from the store is CPU work too.
                off_the_async_workers(stored.len(), || {
                    let history = decode(stored)?;
                    Ok(self.decide(id, summary, (history, witnessed), inputs, now))
                })
            })
            .await?;
        if tries > 1 {
            self.metrics.conflicts.inc();
        }
        let decision = match appended {
            Some(_) => decision.committed(),
            None if index_matches_log => decision,
            None => Decision {
                seen: None,
                ..decision
            },
        };
        Ok((appended, decision))
    }

    /// Decides a step on `history` (see [`decide`]), which says whether this process
    /// wrote every event of it: the batch to append, if any, with the activity tasks
    /// this process reserved to run itself.
    fn decide(
        &self,
        id: &WorkflowId,
        summary: &WorkflowSummary,
        (history, witnessed): (Vec<HistoryEvent>, bool),
        inputs: &mut impl FnMut(&WorkflowSummary, &[HistoryEvent]) -> Option<Write>,
        now: chrono::DateTime<Utc>,
    ) -> (Option<AppendBatch>, Decision) {
        let Some(write) = inputs(summary, &history) else {
            let seen = CachedHistory {
                summary: summary.clone(),
                history,
                witnessed,
            };
            return (None, Decision::nothing_to_do(seen));
        };
        // A history's times never go backwards, whatever the clock of the process that
        // appended last (times are whole milliseconds, as the engine's are).
        let now = history
            .last()
            .map_or(now, |last| now.max(to_datetime(last.recorded_at)));
        let step = Step {
            id,
            status: summary.status,
            next_seq: summary.next_seq,
            history,
            recorded_at: Timestamp::from_millis(u64::try_from(now.timestamp_millis()).unwrap_or(0)),
        };
        let decider = Decider {
            registry: self.catalog.as_ref().map(|catalog| catalog.registry()),
            outgoing: &self.outgoing,
            blocks: self.blocks_divergent,
        };
        let decided = decider.decide(step, write, Box::new(OsEntropy));
        let decision = Decision {
            seen: decided.history_after.map(|history| CachedHistory {
                summary: summary.clone(),
                history,
                witnessed,
            }),
            blocked: decided.blocked,
            nothing_to_do: false,
            unblocked: decided.unblocked,
            eager: Vec::new(),
            marks: None,
        };
        if decided.write.events.is_empty() {
            return (None, decision);
        }
        let (mut batch, eager, marks) = self.batch(id, summary.next_seq, decided.write);
        batch.recorded_at = Some(now);
        let marks = Some(marks);
        (
            Some(batch),
            Decision {
                eager,
                marks,
                ..decision
            },
        )
    }

    /// After the append (or the decision to append nothing), the workflow's turn given
    /// up: publish, and record a blocked or unblocked workflow.
    async fn finish_step(
        &self,
        id: &WorkflowId,
        appended: Option<Appended>,
        mut decision: Decision,
    ) -> Result<StepOutcome, StoreError> {
        match &appended {
            Some(appended) => {
                tracing::debug!(workflow_id = %id, next_seq = %appended.next_seq, "step committed");
                // The history was cached before this (`step`): the activity a publish
                // starts may finish before the acknowledgements are in.
                self.after_commit(appended, std::mem::take(&mut decision.eager))
                    .await;
            }
            None => {
                if let Some(status) = decision.unblocked {
                    self.store.clear_blocked(id, status).await?;
                }
            }
        }
        if let Some(error) = &decision.blocked {
            tracing::error!(workflow_id = %id, %error, "workflow blocked");
            self.metrics.blocked.inc();
            self.store.set_blocked(id, &error.to_string()).await?;
        }
        Ok(StepOutcome {
            appended,
            blocked: decision.blocked,
            nothing_to_do: decision.nothing_to_do,
        })
    }

    /// Caches the history an append extended, unless the workflow ended or waits.
    pub(crate) fn keep_history(&self, mut seen: CachedHistory, appended: &Appended) {
        let status = appended.status.unwrap_or(seen.summary.status);
        if !steps_again_here(status) {
            return;
        }
        debug_assert_eq!(
            seen.history.last().map(|e| e.seq.next()),
            Some(appended.next_seq)
        );
        seen.summary.next_seq = appended.next_seq;
        seen.summary.head_hash = appended.head_hash;
        seen.summary.status = status;
        self.history_cache.put(seen);
    }

    /// Caches a history a step appended nothing to, unless the workflow ended or waits.
    fn keep_unchanged(&self, seen: CachedHistory) {
        if !steps_again_here(seen.summary.status) {
            return;
        }
        // Measuring a history read from the database serialises every event of it.
        off_the_async_workers(seen.history.len(), || self.history_cache.put(seen));
    }

    /// Publishes what the append wrote to the outbox (its events were queued at the
    /// commit), runs here what it claimed, and wakes a workflow it promoted.
    async fn after_commit(&self, appended: &Appended, eager: Vec<LocalTask>) {
        self.publish_committed(appended, eager).await;
        if let Some(promoted) = &appended.promoted {
            let wake = self.outgoing.workflow_task(promoted, Seq::FIRST);
            if let Err(error) = self.publish(&wake).await {
                tracing::warn!(workflow_id = %promoted, %error, "waking a promoted workflow failed; the sweeper will");
            }
        }
    }
}

/// Whether a workflow with this status has a next step for the cache to serve: not one
/// that ended, nor one waiting for its turn (promoted, it is read afresh).
fn steps_again_here(status: WorkflowStatus) -> bool {
    !status.is_terminal() && status != WorkflowStatus::Pending
}

fn decode(stored: &[StoredEvent]) -> Result<Vec<HistoryEvent>, StoreError> {
    stored.iter().map(StoredEvent::to_history_event).collect()
}

/// From how many events a step's decision runs as blocking work.
const LONG_HISTORY: usize = 500;

/// Runs `work` on a history of `events` events. For a long history, the runtime first
/// moves the other tasks of this async worker thread elsewhere, so that they are not
/// held up by milliseconds of CPU (`block_in_place`; a call nested in another runs as
/// it is). `block_in_place` needs the multi-threaded runtime, the server's; tests may
/// run on the current-thread one.
pub(crate) fn off_the_async_workers<R>(events: usize, work: impl FnOnce() -> R) -> R {
    let multi_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|handle| handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if events >= LONG_HISTORY && multi_thread {
        tokio::task::block_in_place(work)
    } else {
        work()
    }
}

#[cfg(test)]
mod tests {
    /// A caller already off the async workers (a long history's decoding) may call
    /// again: the inner call runs as it is.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn blocking_work_may_nest() {
        let n = super::off_the_async_workers(super::LONG_HISTORY, || {
            super::off_the_async_workers(super::LONG_HISTORY, || 7)
        });
        assert_eq!(n, 7);
    }
}

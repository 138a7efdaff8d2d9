//! Appended events on their way to the events stream, in batches.
//!
//! An append's events go to the events stream after its commit, but not one append at
//! a time: they wait here up to [`LINGER`] for the events of later appends, and the
//! batch goes to NATS together (written at once, acknowledged together). Per-append
//! publishing cost NATS, and this process's NATS connection, a wake-up and a flush for
//! every step — at one workflow in flight more CPU than the step's own write, taken
//! from the two cores the step runs on. A workflow's end is not held: a terminal event
//! sends what waits at once, so that whoever waits for it hears of it on its commit;
//! and when all that waits is the ending workflow's own, it goes while the last append
//! is being written ([`EventBatches::send_ahead_of_end`]), so that little is ahead of
//! the end.
//!
//! One batch is published at a time, in the order the appends queued their events, so
//! a workflow's events reach the stream in order. Nothing is lost by waiting: the
//! events are in the log, and those this process does not publish (it stopped, too
//! many were waiting, NATS refused them) stay above their workflow's watermark, where
//! the relay finds them. What NATS acknowledged is marked as before (`publish.rs`).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_nats::jetstream;
use hcpflow_engine::{Seq, TenantId, WorkflowId};
use hcpflow_eventstore::{OutboxMessage, PublishedRange, StoredEvent};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::runtime::metrics::Metrics;
use crate::runtime::outgoing::Outgoing;
use crate::runtime::publish::{publish_messages, Published};

/// How long an event waits for others to go with it. Watchers see a step's events
/// this much later at most; a terminal event does not wait.
pub const LINGER: Duration = Duration::from_millis(5);

/// A batch of this many events goes at once, whatever its age.
const FULL_BATCH: usize = 512;

/// Beyond this many bytes of events waiting (NATS slow or away), an append's events
/// are left to the relay rather than held in memory.
const MAX_WAITING_BYTES: usize = 16 * 1024 * 1024;

/// The events waiting to be published, and the task that publishes them.
#[derive(Debug)]
pub struct EventBatches {
    js: jetstream::Context,
    metrics: Arc<Metrics>,
    /// Where acknowledged runs go, to be marked with a later append or the periodic
    /// flush.
    published: Arc<Mutex<Published>>,
    waiting: Mutex<Waiting>,
    /// Rings when an event that may not wait arrives, or the batch is full.
    hurry: Notify,
    /// Rings when the publishing task ends (see [`Self::drained`]).
    task_ended: Notify,
}

#[derive(Debug, Default)]
struct Waiting {
    runs: Vec<Run>,
    events: usize,
    bytes: usize,
    /// When the oldest waiting event was queued.
    since: Option<Instant>,
    /// An event that may not wait is among them.
    urgent: bool,
    /// A task is publishing (or about to): the next one starts only when it ends.
    publishing: bool,
    /// Events were left to the relay since NATS last took a whole batch.
    overflowing: bool,
}

/// One append's events, consecutive in their workflow's history.
#[derive(Debug)]
struct Run {
    workflow_id: WorkflowId,
    first: Seq,
    messages: Vec<OutboxMessage>,
}

impl EventBatches {
    pub(super) fn new(
        js: jetstream::Context,
        metrics: Arc<Metrics>,
        published: Arc<Mutex<Published>>,
    ) -> Self {
        Self {
            js,
            metrics,
            published,
            waiting: Mutex::default(),
            hurry: Notify::new(),
            task_ended: Notify::new(),
        }
    }

    /// Queues the events of one committed append for publishing (all of them, in
    /// order), and starts the publishing task if none runs.
    pub(super) fn queue(
        self: &Arc<Self>,
        outgoing: &Outgoing,
        tenant: &TenantId,
        events: &[StoredEvent],
    ) {
        let Some(first) = events.first() else {
            return;
        };
        let urgent = events
            .iter()
            .any(|event| hcpflow_engine::Event::is_terminal_kind(&event.event_type));
        let messages: Vec<OutboxMessage> = events
            .iter()
            .map(|event| outgoing.event_message(tenant, event))
            .collect();
        let bytes: usize = messages.iter().map(|message| message.payload.len()).sum();
        let start_publishing = {
            let mut waiting = self.lock();
            if waiting.bytes + bytes > MAX_WAITING_BYTES {
                // Once until NATS takes a whole batch again: an outage would say it for
                // every step.
                if !std::mem::replace(&mut waiting.overflowing, true) {
                    tracing::warn!(workflow_id = %first.workflow_id, "more than {} MiB of events wait for NATS; the relay will publish those that do not fit", MAX_WAITING_BYTES >> 20);
                }
                return;
            }
            waiting.runs.push(Run {
                workflow_id: first.workflow_id.clone(),
                first: first.seq,
                messages,
            });
            waiting.events += events.len();
            waiting.bytes += bytes;
            waiting.since.get_or_insert_with(Instant::now);
            waiting.urgent |= urgent;
            if waiting.urgent || waiting.events >= FULL_BATCH {
                self.hurry.notify_one();
            }
            !std::mem::replace(&mut waiting.publishing, true)
        };
        if start_publishing {
            tokio::spawn(Arc::clone(self).publish_until_empty());
        }
    }

    /// Called as workflow `id`'s last append goes to Postgres. When every event waiting
    /// is that workflow's own, they go now, while that write is in flight, instead of
    /// with its end when it commits: whoever waits for the end then hears of it with
    /// only the last append's events ahead of it (at one workflow in flight, a dozen
    /// fewer messages, ~0.3 ms, between the commit and the end on the stream). Other
    /// workflows' events waiting too (load) keep their linger; the end's commit sends
    /// them as before.
    pub(super) fn send_ahead_of_end(&self, id: &WorkflowId) {
        {
            let mut waiting = self.lock();
            if !waiting.only_of(id) {
                return;
            }
            waiting.urgent = true;
        }
        self.hurry.notify_one();
    }

    /// Sends what waits now and waits until it is published, at most `wait`; whether
    /// it was. For a process that stops: what is left is the relay's.
    pub async fn drained(&self, wait: Duration) -> bool {
        let empty = async {
            loop {
                let ended = self.task_ended.notified();
                tokio::pin!(ended);
                ended.as_mut().enable();
                {
                    let mut waiting = self.lock();
                    if !waiting.publishing {
                        return;
                    }
                    waiting.urgent = true;
                }
                self.hurry.notify_one();
                ended.await;
            }
        };
        tokio::time::timeout(wait, empty).await.is_ok()
    }

    /// Publishes batch after batch, each once its oldest event has waited [`LINGER`]
    /// (or sooner: see [`Self::queue`]), until none waits.
    async fn publish_until_empty(self: Arc<Self>) {
        // Should this task end any other way than below (a panic, a runtime shutting
        // down), the next queued append starts another.
        let mut ended = EndOfTask {
            batches: &self,
            finished: false,
        };
        loop {
            let due = {
                let mut waiting = self.lock();
                let Some(since) = waiting.since else {
                    waiting.publishing = false;
                    waiting.urgent = false;
                    ended.finished = true;
                    drop(waiting);
                    self.task_ended.notify_waiters();
                    return;
                };
                if waiting.urgent || waiting.events >= FULL_BATCH {
                    None
                } else {
                    Some(since + LINGER)
                }
            };
            if let Some(due) = due.filter(|due| Instant::now() < *due) {
                tokio::select! {
                    () = tokio::time::sleep_until(due) => {}
                    () = self.hurry.notified() => {}
                }
                continue;
            }
            let runs = self.lock().take_batch();
            self.publish(runs).await;
        }
    }

    /// Publishes `runs` and hands what NATS acknowledged to be marked: of each run, the
    /// events up to its first refusal (a watermark moves over gap-free runs only).
    async fn publish(&self, runs: Vec<Run>) {
        let lengths: Vec<usize> = runs.iter().map(|run| run.messages.len()).collect();
        let mut heads = Vec::with_capacity(runs.len());
        let mut messages = Vec::with_capacity(lengths.iter().sum());
        for run in runs {
            heads.push((run.workflow_id, run.first));
            messages.extend(run.messages);
        }
        let acked = publish_messages(&self.js, &self.metrics, &messages).await;
        if acked.iter().all(|acked| *acked) {
            self.lock().overflowing = false;
        }
        let mut acked = acked.as_slice();
        let Ok(mut published) = self.published.lock() else {
            return;
        };
        for ((workflow_id, first), length) in heads.into_iter().zip(lengths) {
            let (of_run, rest) = acked.split_at(length.min(acked.len()));
            acked = rest;
            let run = of_run.iter().take_while(|acked| **acked).count();
            if let Some(last) = run.checked_sub(1) {
                let range = PublishedRange {
                    first,
                    last: first.advance(last as u64),
                };
                published.give_back(Vec::new(), Some((workflow_id, range)));
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, Waiting> {
        self.waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Waiting {
    /// Whether events wait, and all of them are workflow `id`'s.
    fn only_of(&self, id: &WorkflowId) -> bool {
        !self.runs.is_empty() && self.runs.iter().all(|run| run.workflow_id == *id)
    }

    /// Everything waiting, taken to be published; the task publishing it stays.
    fn take_batch(&mut self) -> Vec<Run> {
        self.events = 0;
        self.bytes = 0;
        self.since = None;
        self.urgent = false;
        std::mem::take(&mut self.runs)
    }
}

/// Clears the publishing flag when the publishing task ends otherwise than by finding
/// nothing left (which clears it itself, under the lock that saw the queue empty).
struct EndOfTask<'a> {
    batches: &'a EventBatches,
    finished: bool,
}

impl Drop for EndOfTask<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.batches.lock().publishing = false;
            self.batches.task_ended.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_of(id: &str) -> Run {
        Run {
            workflow_id: WorkflowId::new(id).unwrap(),
            first: Seq::FIRST,
            messages: Vec::new(),
        }
    }

    #[test]
    fn only_a_workflow_s_own_waiting_events_go_ahead_of_its_end() {
        let ending = WorkflowId::new("ending").unwrap();
        let mut waiting = Waiting::default();
        assert!(!waiting.only_of(&ending), "nothing waits");
        waiting.runs.push(run_of("ending"));
        waiting.runs.push(run_of("ending"));
        assert!(waiting.only_of(&ending));
        waiting.runs.push(run_of("another"));
        assert!(
            !waiting.only_of(&ending),
            "another workflow's events wait too"
        );
    }
}

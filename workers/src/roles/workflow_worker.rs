//! The workflow worker: takes a workflow task, replays the history, appends the new
//! commands with their outbox rows in one transaction, then acks.
//!
//! Guarantees: an append that loses a race reloads and runs again; nothing is appended
//! for a history the code does not replay (the workflow becomes `blocked`, visibly).
//! Tasks for a workflow already being processed here are coalesced: one more pass runs
//! after the current one instead of a storm of racing tasks.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::FutureExt;
use hcpflow_engine::event::{digest, ChildCompleted, ChildStarted, Event, WorkflowStarted};
use hcpflow_engine::{HistoryEvent, Seq, WorkflowError, WorkflowId, WorkflowStatus};
use hcpflow_eventstore::Error as StoreError;
use tokio::sync::watch;

use crate::runtime::dead_letter::DeadLetters;
use crate::runtime::journal::{Journal, Write};
use crate::runtime::nats::{serve_tasks, Deliveries};
use crate::runtime::task_error::{settle, TaskError};
use hcpflow_protocol::WorkflowTask;

#[derive(Debug)]
pub struct WorkflowWorker {
    pub journal: Arc<Journal>,
    pub concurrency: usize,
    /// Workflows being processed here; `true` when another task came in meanwhile.
    in_flight: Mutex<BTreeMap<WorkflowId, bool>>,
}

impl WorkflowWorker {
    pub fn new(journal: Arc<Journal>, concurrency: usize) -> Arc<Self> {
        Arc::new(Self {
            journal,
            concurrency,
            in_flight: Mutex::new(BTreeMap::new()),
        })
    }

    pub async fn run(
        self: Arc<Self>,
        consumer: async_nats::jetstream::consumer::PullConsumer,
        shutdown: watch::Receiver<bool>,
    ) -> anyhow::Result<()> {
        let deliveries = Deliveries::new(consumer, "workflow tasks");
        let slots = Arc::new(tokio::sync::Semaphore::new(self.concurrency));
        serve_tasks(
            deliveries,
            (slots, self.concurrency),
            shutdown,
            DeadLetters::new(
                self.journal.js.clone(),
                &self.journal.outgoing.subjects,
                crate::runtime::dead_letter::TASKS,
                self.journal.metrics.clone(),
            ),
            move |message, task| {
                let worker = self.clone();
                async move { worker.handle(message, task).await }
            },
        )
        .await
    }

    async fn handle(&self, message: async_nats::jetstream::Message, task: WorkflowTask) {
        let id = task.workflow_id;
        if !self.enter(&id) {
            // Being processed here right now: one more pass will follow.
            let _ = message.ack().await;
            return;
        }
        let mut outcome = self.process_guarded(&id, task.child.as_ref()).await;
        while outcome.is_ok() && self.leave_or_again(&id) {
            outcome = self.process_guarded(&id, None).await;
        }
        if outcome.is_err() {
            self.leave(&id);
        }
        settle(
            &self.journal,
            &message,
            &id,
            outcome,
            std::time::Duration::from_millis(500),
        )
        .await;
    }

    /// [`Self::process`], with a panic of the runtime caught as the task's error (the
    /// workflow code's own panics the executor turns into `blocked` already).
    async fn process_guarded(
        &self,
        id: &WorkflowId,
        child: Option<&hcpflow_protocol::ChildDone>,
    ) -> Result<(), TaskError> {
        AssertUnwindSafe(self.process(id, child))
            .catch_unwind()
            .await
            .unwrap_or_else(|payload| Err(TaskError::panicked(id, payload.as_ref())))
    }

    fn enter(&self, id: &WorkflowId) -> bool {
        let Ok(mut in_flight) = self.in_flight.lock() else {
            return true;
        };
        match in_flight.get_mut(id) {
            Some(again) => {
                *again = true;
                false
            }
            None => {
                in_flight.insert(id.clone(), false);
                true
            }
        }
    }

    /// Leaves, unless another task arrived meanwhile: then returns true (run again).
    fn leave_or_again(&self, id: &WorkflowId) -> bool {
        let Ok(mut in_flight) = self.in_flight.lock() else {
            return false;
        };
        match in_flight.get_mut(id) {
            Some(again) if *again => {
                *again = false;
                true
            }
            _ => {
                in_flight.remove(id);
                false
            }
        }
    }

    fn leave(&self, id: &WorkflowId) {
        if let Ok(mut in_flight) = self.in_flight.lock() {
            in_flight.remove(id);
        }
    }

    /// One workflow task: runs the workflow code in one locked transaction, recording
    /// first the outcome of every child the history waits for that has ended — not only
    /// the one a task reports: a child that ended while its parent was being processed
    /// here (its wake-up coalesced into the next pass) is not lost.
    pub async fn process(
        &self,
        id: &WorkflowId,
        child: Option<&hcpflow_protocol::ChildDone>,
    ) -> Result<(), TaskError> {
        let mut views = Vec::new();
        if let Some(done) = child {
            views.extend(self.child_view(&done.child_id).await?);
        }
        // A pass, and another when a child the pass still waited for turns out to have
        // ended meanwhile.
        for _ in 0..2 {
            let started = Instant::now();
            let mut waiting = Vec::new();
            let step = self
                .journal
                .step(id, |summary, history| {
                    waiting.clear();
                    if summary.status == WorkflowStatus::Pending || summary.status.is_terminal() {
                        return None;
                    }
                    let mut write = Write::default();
                    for (started_seq, expected) in waited_children(history) {
                        let view = views.iter().find(|v| v.id == expected.child_id);
                        match view.and_then(|v| v.outcome_for(id, started_seq, expected)) {
                            Some(outcome) => write.events.push(
                                ChildCompleted {
                                    started_seq,
                                    outcome,
                                }
                                .into(),
                            ),
                            None => waiting.push(expected.child_id.clone()),
                        }
                    }
                    Some(write)
                })
                .await;
            let step = step.map_err(|error| TaskError::from_store(id, error))?;
            if step.appended.is_some() {
                self.journal.metrics.workflow_tasks.inc();
                self.journal
                    .metrics
                    .workflow_task_time
                    .record(started.elapsed());
            }
            let mut fresh = Vec::new();
            for child_id in waiting
                .iter()
                .filter(|c| !views.iter().any(|v| &v.id == *c))
            {
                fresh.extend(self.child_view(child_id).await?);
            }
            if !fresh.iter().any(|view| view.may_be_final_for(id)) {
                break;
            }
            views = fresh;
        }
        Ok(())
    }

    /// What the store holds of a child: how it was started and how it ended; `None`
    /// before it exists.
    async fn child_view(&self, child_id: &WorkflowId) -> Result<Option<ChildView>, TaskError> {
        let history = match self.journal.load(child_id).await {
            Ok(history) => history,
            Err(StoreError::NotFound(_)) => return Ok(None),
            // The child's history is the child's to block on; the parent retries.
            Err(error) => return Err(TaskError::Transient(error.into())),
        };
        let started = history.first().and_then(|e| match &e.event {
            Event::WorkflowStarted(started) => Some(started.clone()),
            _ => None,
        });
        let ended = history
            .iter()
            .find(|e| e.event.is_terminal())
            .map(|terminal| match &terminal.event {
                Event::WorkflowCompleted(done) => Ok(done.output.clone()),
                other => Err(WorkflowError::Child {
                    child_id: child_id.to_string(),
                    message: format!("ended with {}", other.kind()),
                }),
            });
        Ok(Some(ChildView {
            id: child_id.clone(),
            started,
            ended,
        }))
    }
}

/// The children a history waits for: each `ChildStarted` without its `ChildCompleted`
/// (one pass over the history; every workflow task asks, most histories have none).
fn waited_children(history: &[HistoryEvent]) -> Vec<(Seq, &ChildStarted)> {
    let mut started = Vec::new();
    let mut reported = Vec::new();
    for e in history {
        match &e.event {
            Event::ChildStarted(child) => started.push((e.seq, child)),
            Event::ChildCompleted(done) => reported.push(done.started_seq),
            other if other.is_terminal() => return Vec::new(),
            _ => {}
        }
    }
    started.retain(|(seq, _)| !reported.contains(seq));
    started
}

/// A child as the store holds it.
#[derive(Debug)]
struct ChildView {
    id: WorkflowId,
    started: Option<WorkflowStarted>,
    ended: Option<ChildOutcome>,
}

impl ChildView {
    /// What the parent records for its `ChildStarted` at `started_seq`: the child's
    /// result once it ended, `None` while it runs. A workflow under the child's id that
    /// this parent did not start — another type or input, or no link back to this
    /// `ChildStarted` (a client took the id first) — is the child's failure, never its
    /// result.
    fn outcome_for(
        &self,
        parent: &WorkflowId,
        started_seq: Seq,
        expected: &ChildStarted,
    ) -> Option<ChildOutcome> {
        let ours = self.started.as_ref().is_some_and(|started| {
            started.workflow_type == expected.workflow_type
                && digest(&started.input) == expected.input_digest
                && started
                    .parent
                    .as_ref()
                    .is_some_and(|link| link.workflow_id == *parent && link.seq == started_seq)
        });
        if !ours {
            return Some(Err(WorkflowError::Child {
                child_id: self.id.to_string(),
                message: "another workflow holds this child's id: this parent did not start it with this type and input".into(),
            }));
        }
        self.ended.clone()
    }

    /// Whether recording it could move the parent on: it ended, or it is not the
    /// parent's own.
    fn may_be_final_for(&self, parent: &WorkflowId) -> bool {
        let linked = self
            .started
            .as_ref()
            .and_then(|started| started.parent.as_ref())
            .is_some_and(|link| link.workflow_id == *parent);
        self.ended.is_some() || !linked
    }
}

/// A child's result as its parent records it.
type ChildOutcome = Result<serde_json::Value, WorkflowError>;

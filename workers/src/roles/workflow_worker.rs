//! The workflow worker: takes a workflow task, replays the history, appends the new
//! commands with their outbox rows in one transaction, then acks.
//!
//! Guarantees: an append that loses a race reloads and runs again; nothing is appended
//! for a history the code does not replay (the workflow becomes `blocked`, visibly).
//! Tasks for a workflow already being processed here are coalesced: one more pass runs
//! after the current one instead of a storm of racing tasks.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use hcpflow_engine::event::{ChildCompleted, Event};
use hcpflow_engine::{Seq, WorkflowError, WorkflowId, WorkflowStatus};
use hcpflow_eventstore::Error as StoreError;
use tokio::sync::watch;

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
            self.journal.metrics.clone(),
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
        let mut outcome = self.process(&id, task.child.as_ref()).await;
        while outcome.is_ok() && self.leave_or_again(&id) {
            outcome = self.process(&id, None).await;
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

    /// One workflow task: runs the workflow code in one locked transaction (recording a
    /// finished child's outcome first, when the task reports one).
    pub async fn process(
        &self,
        id: &WorkflowId,
        child: Option<&hcpflow_protocol::ChildDone>,
    ) -> Result<(), TaskError> {
        let started = Instant::now();
        let child_outcome = match child {
            Some(done) => self.child_outcome(done).await?,
            None => None,
        };
        let step = self
            .journal
            .step(id, |summary, history| {
                if summary.status == WorkflowStatus::Pending || summary.status.is_terminal() {
                    return None;
                }
                let mut write = Write::default();
                if let Some((started_seq, child_id, outcome)) = &child_outcome {
                    let started_here = history.iter().any(|e| {
                        e.seq == *started_seq && matches!(&e.event, Event::ChildStarted(c) if c.child_id == *child_id)
                    });
                    let already = history
                        .iter()
                        .any(|e| matches!(&e.event, Event::ChildCompleted(c) if c.started_seq == *started_seq));
                    if started_here && !already {
                        write.events.push(
                            ChildCompleted {
                                started_seq: *started_seq,
                                outcome: outcome.clone(),
                            }
                            .into(),
                        );
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
        Ok(())
    }

    /// A finished child's outcome, read from its history.
    async fn child_outcome(
        &self,
        done: &hcpflow_protocol::ChildDone,
    ) -> Result<Option<(Seq, WorkflowId, Result<serde_json::Value, WorkflowError>)>, TaskError>
    {
        let (started_seq, child_id) = (done.started_seq, done.child_id.clone());
        let history = match self.journal.load(&child_id).await {
            Ok(history) => history,
            Err(StoreError::NotFound(_)) => return Ok(None),
            // The child's history is the child's to block on; the parent retries.
            Err(error) => return Err(TaskError::Transient(error.into())),
        };
        let Some(terminal) = history.iter().find(|e| e.event.is_terminal()) else {
            return Ok(None);
        };
        let outcome = match &terminal.event {
            Event::WorkflowCompleted(done) => Ok(done.output.clone()),
            other => Err(WorkflowError::Child {
                child_id: child_id.to_string(),
                message: format!("ended with {}", other.kind()),
            }),
        };
        Ok(Some((started_seq, child_id, outcome)))
    }
}

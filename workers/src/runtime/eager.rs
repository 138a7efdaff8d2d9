//! Eager activity dispatch: an activity scheduled by a step of this process, on a task
//! queue this process serves and with a free slot, runs here at once instead of going
//! through NATS (Temporal calls it eager activity execution).
//!
//! Guarantees: the step's commit claims the attempt for this process under a lease it
//! extends while the activity runs (no outbox row: the task never goes to NATS unless
//! this process cannot run or record it). A crash loses nothing: once the lease has run
//! out, the sweeper finds the lapsed claim and publishes the attempt's task from the
//! history, and any activity worker runs it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

use hcpflow_engine::history::ActivityTask;
use hcpflow_eventstore::{AttemptClaim, OutboxMessage};

/// How long a local run holds its attempt's claim without extending it (it extends it
/// every third of this): how long a crashed process's eager task waits for the sweeper.
pub const LOCAL_LEASE: Duration = Duration::from_secs(15);

/// An activity task a step of this process runs itself: its slot is reserved while the
/// step decides, and the task handed to the activity worker once the step commits.
#[derive(Debug)]
pub struct LocalTask {
    pub task: ActivityTask,
    /// The task's NATS message, published when this process cannot run or record it.
    pub message: OutboxMessage,
    /// The activity worker's slot it runs in.
    pub permit: OwnedSemaphorePermit,
}

/// The task queues this process serves, each with its activity worker's slots and the
/// channel its local tasks go to.
#[derive(Debug)]
pub struct EagerDispatch {
    /// Who claims the attempts (this process).
    pub claimer: String,
    queues: BTreeMap<String, (Arc<Semaphore>, mpsc::UnboundedSender<LocalTask>)>,
}

impl EagerDispatch {
    pub fn new(claimer: String) -> Self {
        Self {
            claimer,
            queues: BTreeMap::new(),
        }
    }

    /// Serves `queue` here: local tasks of it go to the returned receiver and share
    /// `slots` with the tasks its activity worker takes from NATS.
    pub fn serve(
        &mut self,
        queue: &str,
        slots: Arc<Semaphore>,
    ) -> mpsc::UnboundedReceiver<LocalTask> {
        let (sender, receiver) = mpsc::unbounded_channel();
        self.queues.insert(queue.to_owned(), (slots, sender));
        receiver
    }

    /// A free slot of `queue`'s activity worker, if this process serves it and has one.
    pub fn reserve(&self, queue: &str) -> Option<OwnedSemaphorePermit> {
        let (slots, sender) = self.queues.get(queue)?;
        if sender.is_closed() {
            return None;
        }
        slots.clone().try_acquire_owned().ok()
    }

    /// Hands a committed task to its activity worker; gives it back when the worker is
    /// gone (shutting down), for the caller to publish instead.
    pub fn hand_over(&self, local: LocalTask) -> Result<(), Box<LocalTask>> {
        match self.queues.get(&local.task.options.task_queue) {
            Some((_, sender)) => sender.send(local).map_err(|refused| Box::new(refused.0)),
            None => Err(Box::new(local)),
        }
    }
}

/// The claim `runner` holds (or takes) on `task`'s attempt.
pub fn claim_of(task: &ActivityTask, runner: String) -> AttemptClaim {
    AttemptClaim {
        workflow_id: task.workflow_id.clone(),
        scheduled_seq: task.scheduled_seq,
        attempt: task.attempt,
        runner,
    }
}

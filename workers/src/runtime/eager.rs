//! Eager activity dispatch: an activity scheduled by a step of this process, on a task
//! queue this process serves and with a free slot, runs here at once instead of going
//! through NATS (Temporal calls it eager activity execution).
//!
//! Guarantees: the activity task is still written to the outbox in the step's commit —
//! claimed by this process under a lease it extends while the activity runs — so a
//! crash loses nothing: once the lease runs out, the relay publishes the task and any
//! activity worker runs it. The row is marked published once the outcome is recorded.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

use hcpflow_engine::history::ActivityTask;

/// How long a local run holds its outbox row without extending the lease (it extends it
/// every third of this): how long a crashed process's eager task waits for the relay.
pub const LOCAL_LEASE: Duration = Duration::from_secs(15);

/// An activity task a step of this process dispatched to itself.
#[derive(Debug)]
pub struct LocalTask {
    /// The task's outbox row, claimed by this process.
    pub outbox_id: i64,
    pub task: ActivityTask,
    /// The activity worker's slot it runs in.
    pub permit: OwnedSemaphorePermit,
}

/// A slot reserved while a step decides, before its commit.
#[derive(Debug)]
pub struct Reserved {
    /// Position of the task's message in the step's outbox messages.
    pub position: usize,
    pub task: ActivityTask,
    pub permit: OwnedSemaphorePermit,
}

/// The task queues this process serves, each with its activity worker's slots and the
/// channel its local tasks go to.
#[derive(Debug)]
pub struct EagerDispatch {
    /// Who claims the outbox rows (this process).
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

    /// Hands a committed task to its activity worker; false when the worker is gone
    /// (shutting down), and the caller publishes the task instead.
    pub fn hand_over(&self, local: LocalTask) -> bool {
        match self.queues.get(&local.task.options.task_queue) {
            Some((_, sender)) => sender.send(local).is_ok(),
            None => false,
        }
    }
}

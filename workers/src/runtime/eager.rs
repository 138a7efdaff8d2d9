//! Eager activity dispatch: an activity scheduled by a step of this process, on a task
//! queue this process serves and with a free slot, runs here at once instead of going
//! through NATS (Temporal calls it eager activity execution).
//!
//! Guarantees: the step's commit claims the attempt for this process under a lease it
//! extends while the activity runs (no outbox row: the task never goes to NATS unless
//! this process cannot run or record it). A crash loses nothing: once the lease has run
//! out, the sweeper finds the lapsed claim and publishes the attempt's task from the
//! history, and any activity worker runs it.
//!
//! With every slot taken, a task still stays here if the queue's backlog has room (a
//! budget of bytes, `--activity-backlog-bytes`): it waits for a slot, its claim
//! extended while it waits (many in one statement), for at most
//! `--activity-backlog-wait-secs`; then, or when its claim could not be extended in
//! time, or when the process stops, it goes to NATS. Under a load of thousands of workflows in flight, a step then
//! costs one commit, as at low load, instead of an outbox row, a relay, a JetStream
//! round trip and a claim of its own.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

use hcpflow_engine::history::ActivityTask;
use hcpflow_eventstore::{AttemptClaim, OutboxMessage};

/// How long a local run holds its attempt's claim without extending it (it extends it
/// every third of this): how long a crashed process's eager task waits for the sweeper.
pub const LOCAL_LEASE: Duration = Duration::from_secs(15);

/// How often the backlog's claims are looked after: a sixth of a lease. A claim is due
/// for extension below [`BACKLOG_EXTEND_BELOW`] and its task must go to NATS below half a
/// lease; the window between them is a tick and a half wide, so a tick that comes late
/// (a busy process, a slow statement) still extends the claim before the task would have
/// to leave. A task leaving the backlog for a slot has at least half a lease left — more
/// than the run waits for its first extension (a third).
pub const BACKLOG_TICK: Duration = Duration::from_millis(2500);

/// A waiting task's claim with less than this left is extended on the backlog's next
/// tick: three quarters of a lease.
pub const BACKLOG_EXTEND_BELOW: Duration =
    Duration::from_millis(LOCAL_LEASE.as_millis() as u64 * 3 / 4);

// A late tick must still find the claim due before its task would have to leave.
const _: () = assert!(
    BACKLOG_EXTEND_BELOW.as_millis() > LOCAL_LEASE.as_millis() / 2 + BACKLOG_TICK.as_millis()
);

/// The longest a task waits in the backlog by default (`--activity-backlog-wait-secs`)
/// before it goes to NATS, where a process with a free slot may take it.
pub const DEFAULT_BACKLOG_WAIT: Duration = Duration::from_secs(30);

/// What a task in the backlog weighs besides its message's payload.
const BACKLOG_ENTRY_OVERHEAD: usize = 1024;

/// An activity task a step of this process runs itself: its place is reserved while the
/// step decides, and the task handed to the activity worker once the step commits.
#[derive(Debug)]
pub struct LocalTask {
    pub task: ActivityTask,
    /// The task's NATS message, published when this process cannot run or record it.
    pub message: OutboxMessage,
    pub place: Place,
}

/// Where a local task waits to run.
#[derive(Debug)]
pub enum Place {
    /// One of the activity worker's slots: it runs at once.
    Slot(OwnedSemaphorePermit),
    /// Its weight in the backlog's budget: it waits for a slot.
    Backlog(OwnedSemaphorePermit),
}

/// One task queue served here.
#[derive(Debug)]
struct Served {
    /// The activity worker's slots, shared with the tasks it takes from NATS.
    slots: Arc<Semaphore>,
    /// The backlog's budget, in KiB.
    backlog: Arc<Semaphore>,
    sender: mpsc::UnboundedSender<LocalTask>,
}

/// The task queues this process serves, each with its activity worker's slots, its
/// backlog, and the channel its local tasks go to.
#[derive(Debug)]
pub struct EagerDispatch {
    /// Who claims the attempts (this process).
    pub claimer: String,
    queues: BTreeMap<String, Served>,
}

impl EagerDispatch {
    pub fn new(claimer: String) -> Self {
        Self {
            claimer,
            queues: BTreeMap::new(),
        }
    }

    /// Serves `queue` here: local tasks of it go to the returned receiver and share
    /// `slots` with the tasks its activity worker takes from NATS; up to
    /// `backlog_bytes` of them may wait for a slot.
    pub fn serve(
        &mut self,
        queue: &str,
        slots: Arc<Semaphore>,
        backlog_bytes: usize,
    ) -> mpsc::UnboundedReceiver<LocalTask> {
        let (sender, receiver) = mpsc::unbounded_channel();
        let backlog = Arc::new(Semaphore::new(
            (backlog_bytes / 1024).min(Semaphore::MAX_PERMITS),
        ));
        self.queues.insert(
            queue.to_owned(),
            Served {
                slots,
                backlog,
                sender,
            },
        );
        receiver
    }

    /// A place for `message`'s task on `queue`, if this process serves it: a free slot,
    /// else room in the backlog.
    pub fn reserve(&self, queue: &str, message: &OutboxMessage) -> Option<Place> {
        let served = self.queues.get(queue)?;
        if served.sender.is_closed() {
            return None;
        }
        if let Ok(slot) = served.slots.clone().try_acquire_owned() {
            return Some(Place::Slot(slot));
        }
        let kib = (message.payload.len() + BACKLOG_ENTRY_OVERHEAD).div_ceil(1024);
        let kib = u32::try_from(kib).ok()?;
        served
            .backlog
            .clone()
            .try_acquire_many_owned(kib)
            .ok()
            .map(Place::Backlog)
    }

    /// Hands a committed task to its activity worker; gives it back when the worker is
    /// gone (shutting down), for the caller to publish instead.
    pub fn hand_over(&self, local: LocalTask) -> Result<(), Box<LocalTask>> {
        match self.queues.get(&local.task.options.task_queue) {
            Some(served) => served
                .sender
                .send(local)
                .map_err(|refused| Box::new(refused.0)),
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

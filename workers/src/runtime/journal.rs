//! The journal: appends to a history, with the messages the append causes written to
//! the outbox in the same transaction.
//!
//! One concept a file: appending is here; what a step decides is `decide.rs` (pure);
//! the messages are built in `outgoing.rs` (pure); publishing them after the commit,
//! and marking what NATS acknowledged, is `publish.rs`. A crash between commit and
//! publish leaves rows and events that the relay finds, and claims on the activities
//! this process was to run itself that the sweeper finds once they lapse.

use std::sync::{Arc, Mutex};

use async_nats::jetstream;
use hcpflow_engine::event::Event;
use hcpflow_engine::history::ActivityTask;
use hcpflow_engine::{Catalog, HistoryEvent, Seq, WorkflowId, WorkflowStatus};
use hcpflow_eventstore::{
    AppendBatch, Appended, AttemptClaim, ClaimedAttempts, EventStore, LedgerEntry, NewEvent,
    NewTimer, NewWorkflow, OutboxMessage, WorkflowSummary,
};
use hcpflow_protocol::subjects::Subjects;
use serde_json::Value;
use tokio::sync::Semaphore;

use crate::runtime::eager::{EagerDispatch, LocalTask, LOCAL_LEASE};
use crate::runtime::event_batches::EventBatches;
use crate::runtime::history_cache::{CachedHistory, HistoryCache};
use crate::runtime::metrics::Metrics;
use crate::runtime::outgoing::Outgoing;
use crate::runtime::publish::{Published, TakenMarks};
use crate::runtime::step::off_the_async_workers;
use crate::runtime::step_gate::StepGate;
use crate::runtime::witnessed::WitnessedHeads;

/// How many bytes of decoded histories a process keeps between steps (an estimate of
/// their memory; see `history_cache.rs`). A mid-flight `create_hosted_cluster` history
/// (~200 events) weighs ~250–400 KiB, so 256 MiB keeps about 700–1,000 of them, or tens
/// of thousands of short ones (a `noop_chain` history weighs a few KiB): more than the
/// workflows a process steps at once, and a fixed share of a server's memory whatever
/// the histories' lengths. The count bound it replaces (4,096 histories) let the same
/// cache reach 1–2 GiB on cluster histories and had no limit on longer ones.
const HISTORY_CACHE_BUDGET: u64 = 256 * 1024 * 1024;

/// What the starts publishing their messages after their answer may hold, in KiB of
/// messages (each holds them until NATS acknowledges, at most the publish timeout): a
/// thousand ordinary starts, or a few dozen at the API's largest input.
const BACKGROUND_PUBLISH_KIB: u32 = 64 * 1024;

/// What one append writes besides its events.
#[derive(Debug, Default)]
pub struct Write {
    pub events: Vec<Event>,
    pub status: Option<WorkflowStatus>,
    pub output: Option<Value>,
    pub error: Option<Value>,
    pub messages: Vec<OutboxMessage>,
    pub timers: Vec<NewTimer>,
    pub ledger: Vec<LedgerEntry>,
    /// The activity tasks among `messages`, by position: the journal may run them in
    /// this process after the commit (eager dispatch).
    pub activity_tasks: Vec<(usize, ActivityTask)>,
    /// The claim of the runner whose outcome this write records: the append ends it,
    /// and refuses the write if the runner lost it.
    pub attempt_claim: Option<AttemptClaim>,
}

#[derive(Debug)]
pub struct Journal {
    pub store: EventStore,
    pub js: jetstream::Context,
    /// The messages appends cause, for this process's subject prefix.
    pub outgoing: Outgoing,
    pub metrics: Arc<Metrics>,
    /// Set when this process runs workflow code: steps then run it in the same
    /// transaction as the inputs that wake it.
    pub catalog: Option<Arc<Catalog>>,
    /// Whether a history the code does not replay blocks its workflow here (true
    /// unless [`Journal::handing_divergence_over`]).
    pub blocks_divergent: bool,
    pub(super) published: Arc<Mutex<Published>>,
    /// Appended events waiting to go to the events stream together.
    pub events: Arc<EventBatches>,
    /// Histories of this process's last appends, for the next step (see `step.rs`).
    pub history_cache: HistoryCache,
    /// One step of a workflow at a time here, each starting from its predecessor's
    /// cached history (see `step_gate.rs`).
    pub(crate) step_gate: StepGate,
    /// Where this process serves task queues: activities it schedules run here at once.
    pub(super) eager: std::sync::OnceLock<EagerDispatch>,
    /// The heads this process committed on chains it wrote whole, which its
    /// checkpointer signs without reading them back (see `witnessed.rs`).
    pub witnessed: WitnessedHeads,
    /// Starts whose messages are still being published after they were answered.
    background_publishes: Arc<Semaphore>,
}

impl Journal {
    pub fn new(
        store: EventStore,
        js: jetstream::Context,
        subjects: Subjects,
        metrics: Arc<Metrics>,
        catalog: Option<Arc<Catalog>>,
    ) -> Self {
        let published = Arc::default();
        let events = EventBatches::new(js.clone(), Arc::clone(&metrics), Arc::clone(&published));
        Self {
            store,
            js,
            outgoing: Outgoing::new(subjects),
            metrics,
            catalog,
            blocks_divergent: true,
            published,
            events: Arc::new(events),
            history_cache: HistoryCache::new(HISTORY_CACHE_BUDGET),
            step_gate: StepGate::default(),
            eager: std::sync::OnceLock::new(),
            witnessed: WitnessedHeads::default(),
            background_publishes: Arc::new(Semaphore::new(BACKGROUND_PUBLISH_KIB as usize)),
        }
    }

    /// For a process without the workflow role that runs the code: a history the code
    /// does not replay is handed to a workflow worker (woken through NATS) instead of
    /// blocking the workflow — only the workflow role retries blocked workflows when new
    /// code starts.
    #[must_use]
    pub fn handing_divergence_over(mut self) -> Self {
        self.blocks_divergent = false;
        self
    }

    /// Runs the activities this process schedules on the queues `eager` serves here.
    pub fn enable_eager_dispatch(&self, eager: EagerDispatch) {
        if self.eager.set(eager).is_err() {
            tracing::warn!("eager dispatch was already enabled");
        }
    }

    /// Waits until the starts publishing after their answer are done, at most `wait`;
    /// whether they are. (What is left is the relay's and the sweeper's.)
    pub async fn background_publishes_done(&self, wait: std::time::Duration) -> bool {
        tokio::time::timeout(
            wait,
            self.background_publishes
                .acquire_many(BACKGROUND_PUBLISH_KIB),
        )
        .await
        .is_ok()
    }

    /// Who claims this process's eager tasks, when eager dispatch is enabled.
    pub fn eager_claimer(&self) -> Option<String> {
        self.eager.get().map(|dispatch| dispatch.claimer.clone())
    }

    /// The whole history, decoded for the engine (a long one off the async workers).
    pub async fn load(
        &self,
        id: &WorkflowId,
    ) -> Result<Vec<HistoryEvent>, hcpflow_eventstore::Error> {
        let stored = self.store.read_full_history(id).await?;
        off_the_async_workers(stored.len(), || {
            stored
                .iter()
                .map(|event| event.to_history_event())
                .collect()
        })
    }

    /// Creates a workflow with its first events; returns once they are committed (and
    /// queued for the events stream). Its outbox messages are published meanwhile, by a task of their own: a start is answered
    /// on its commit, not held until NATS acknowledges (seconds while a stream has no
    /// leader). Beyond `BACKGROUND_PUBLISH_KIB` of such messages, a start publishes
    /// before it returns, so that an outage slows starts rather than piling them up.
    pub async fn create(
        self: &Arc<Self>,
        workflow: &NewWorkflow,
        id: &WorkflowId,
        write: Write,
        recorded_at: chrono::DateTime<chrono::Utc>,
    ) -> Result<(), hcpflow_eventstore::Error> {
        // The start is the workflow's first step: a step that comes before its history is
        // cached (a short timer fired, under load) waits for it rather than read the
        // history and then have the start's older copy put over its own. (A duplicate
        // start waits behind the running workflow's steps, then finds its id taken.)
        // Entered before the batch, which reserves an activity slot and published marks.
        let turn = self.step_gate.enter(id).await;
        let (mut batch, eager, marks) = self.batch(id, Seq::FIRST, write);
        batch.recorded_at = Some(recorded_at);
        let in_flight = self.witnessed.step_in_flight(id);
        // A start that fails (a duplicate, an outage) gives its marks back as it returns.
        let appended = self.store.create_workflow(workflow, batch).await?;
        marks.committed();
        // Queued before the start is answered: any later append of the workflow queues
        // its events after these.
        self.events
            .queue(&self.outgoing, &appended.tenant, &appended.events);
        self.witnessed.record(id, &appended, true);
        drop(in_flight);
        self.keep_created(workflow, id, &appended, recorded_at);
        drop(turn);
        // The first activity starts before the start is answered (the answer waits on
        // NATS, the activity on nothing), with the history it will step on cached.
        let refused = self.hand_over_here(eager);
        // Its events wait in the batches, under their own bound: the task holds its rows.
        let bytes: usize = appended
            .outbox
            .iter()
            .map(|row| row.message.payload.len())
            .sum();
        let kib = u32::try_from(bytes / 1024 + 1).unwrap_or(u32::MAX);
        match Arc::clone(&self.background_publishes).try_acquire_many_owned(kib) {
            Ok(permit) => {
                let journal = Arc::clone(self);
                tokio::spawn(async move {
                    journal.publish_rest(&appended, refused).await;
                    drop(permit);
                });
            }
            Err(_) => self.publish_rest(&appended, refused).await,
        }
        Ok(())
    }

    /// Caches a new workflow's history for its first step, as a step caches the history
    /// it appended to: the first outcome then needs no read of what was just written.
    fn keep_created(
        &self,
        workflow: &NewWorkflow,
        id: &WorkflowId,
        appended: &Appended,
        created_at: chrono::DateTime<chrono::Utc>,
    ) {
        let Ok(history) = appended
            .events
            .iter()
            .map(|event| event.to_history_event())
            .collect::<Result<Vec<_>, _>>()
        else {
            return;
        };
        let summary = WorkflowSummary {
            workflow_id: id.clone(),
            workflow_type: workflow.workflow_type.clone(),
            status: appended.status.unwrap_or(workflow.status),
            concurrency_key: workflow.concurrency_key.clone(),
            parent_id: workflow.parent_id.clone(),
            next_seq: appended.next_seq,
            head_hash: appended.head_hash,
            created_at,
            updated_at: created_at,
            input_digest: workflow.input_digest.clone(),
            output: None,
            error: None,
            blocked_reason: None,
            tenant: appended.tenant.clone(),
        };
        let cached = CachedHistory {
            summary,
            history,
            witnessed: true,
        };
        self.keep_history(cached, appended);
    }

    /// The batch that appends `write`; the activity tasks this process runs itself once
    /// it commits: those on a task queue it serves with a free slot or room in its
    /// backlog (their messages leave the outbox: the batch claims their attempts
    /// instead); and what the batch marks published, to be given back unless it commits.
    pub(crate) fn batch(
        &self,
        id: &WorkflowId,
        expected: Seq,
        mut write: Write,
    ) -> (AppendBatch, Vec<LocalTask>, TakenMarks) {
        let mut eager = Vec::new();
        if let Some(dispatch) = self.eager.get() {
            let mut messages: Vec<Option<OutboxMessage>> = std::mem::take(&mut write.messages)
                .into_iter()
                .map(Some)
                .collect();
            for (position, task) in std::mem::take(&mut write.activity_tasks) {
                let Some(slot) = messages.get_mut(position).filter(|slot| slot.is_some()) else {
                    continue;
                };
                let place = slot
                    .as_ref()
                    .and_then(|message| dispatch.reserve(&task.options.task_queue, message));
                // The message leaves the outbox only for a task that has its place here.
                if let Some(place) = place {
                    if let Some(message) = slot.take() {
                        eager.push(LocalTask {
                            task,
                            message,
                            place,
                        });
                    }
                }
            }
            write.messages = messages.into_iter().flatten().collect();
        }
        let mut batch = AppendBatch::new(
            id.clone(),
            expected,
            write.events.iter().map(NewEvent::from).collect(),
        )
        .with_outbox(write.messages)
        .with_timers(write.timers)
        .with_ledger(write.ledger);
        batch.status = write.status;
        batch.output = write.output;
        batch.error = write.error;
        batch.attempt_claim = write.attempt_claim;
        let (marks, outbox_ids, run) = TakenMarks::take(&self.published, id);
        batch.mark_published = outbox_ids;
        batch.events_published = run;
        if let (Some(dispatch), false) = (self.eager.get(), eager.is_empty()) {
            batch.claimed_attempts = Some(ClaimedAttempts {
                runner: dispatch.claimer.clone(),
                lease: LOCAL_LEASE,
                attempts: eager
                    .iter()
                    .map(|local| (local.task.scheduled_seq, local.task.attempt))
                    .collect(),
            });
        }
        (batch, eager, marks)
    }
}

pub fn to_datetime(at: hcpflow_engine::Timestamp) -> chrono::DateTime<chrono::Utc> {
    let millis = i64::try_from(at.as_millis()).unwrap_or(i64::MAX);
    chrono::DateTime::from_timestamp_millis(millis).unwrap_or_else(chrono::Utc::now)
}

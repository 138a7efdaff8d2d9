//! The journal: appends to a history and dispatches what the append caused.
//!
//! Every append writes its NATS messages to the outbox in the same transaction, then
//! publishes them — and the appended events, to the events stream — right after the
//! commit (the fast path). What was published this way is marked in the next append's
//! transaction (outbox row ids, and the workflow's events-stream watermark), so marking
//! costs no commit of its own; a crash between commit and publish leaves rows and events
//! that the relay finds.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_nats::jetstream;
use async_nats::jetstream::message::PublishMessage;
use hcpflow_engine::event::{ActivityScheduled, Event};
use hcpflow_engine::{HistoryEvent, Seq, WorkflowId, WorkflowStatus};
use hcpflow_eventstore::{
    AppendBatch, Appended, EventStore, LedgerEntry, NewEvent, NewTimer, NewWorkflow, OutboxClaim,
    OutboxMessage, OutboxRow, PublishedRange, PublishedRuns, StoredEvent, TimerKind,
};
use serde_json::Value;

use crate::runtime::eager::{EagerDispatch, LocalTask, Reserved, LOCAL_LEASE};
use crate::runtime::history_cache::HistoryCache;
use crate::runtime::metrics::Metrics;
use hcpflow_engine::Catalog;
use hcpflow_protocol::subjects::Subjects;
use hcpflow_protocol::{ActivityTaskMessage, ChildDone, WorkflowTask};

/// How many workflows' histories a process keeps decoded between steps.
const HISTORY_CACHE_CAPACITY: usize = 4096;

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
    /// Activity tasks among `messages` that this process runs itself after the commit.
    pub eager: Vec<Reserved>,
}

#[derive(Debug)]
pub struct Journal {
    pub store: EventStore,
    pub js: jetstream::Context,
    pub subjects: Subjects,
    pub metrics: Arc<Metrics>,
    /// Set when this process runs workflow code: steps then run it in the same
    /// transaction as the inputs that wake it.
    pub catalog: Option<Arc<Catalog>>,
    published: Mutex<Published>,
    /// Histories of this process's last appends, for the next step (see `step.rs`).
    pub history_cache: HistoryCache,
    /// Where this process serves task queues: activities it schedules run here at once.
    eager: std::sync::OnceLock<EagerDispatch>,
}

/// What this process published and has not marked yet.
#[derive(Debug, Default)]
struct Published {
    outbox_ids: Vec<i64>,
    events: BTreeMap<WorkflowId, PublishedRuns>,
}

impl Published {
    /// The earliest unmarked run of `id`'s events (the only one that can move its mark).
    fn take_first_run(&mut self, id: &WorkflowId) -> Option<PublishedRange> {
        let runs = self.events.get_mut(id)?;
        let first = runs.take_first();
        if runs.is_empty() {
            self.events.remove(id);
        }
        first
    }
}

impl Journal {
    pub fn new(
        store: EventStore,
        js: jetstream::Context,
        subjects: Subjects,
        metrics: Arc<Metrics>,
        catalog: Option<Arc<Catalog>>,
    ) -> Self {
        Self {
            store,
            js,
            subjects,
            metrics,
            catalog,
            published: Mutex::new(Published::default()),
            history_cache: HistoryCache::new(HISTORY_CACHE_CAPACITY),
            eager: std::sync::OnceLock::new(),
        }
    }

    /// Runs the activities this process schedules on the queues `eager` serves here.
    pub fn enable_eager_dispatch(&self, eager: EagerDispatch) {
        if self.eager.set(eager).is_err() {
            tracing::warn!("eager dispatch was already enabled");
        }
    }

    /// Who claims this process's eager tasks, when eager dispatch is enabled.
    pub fn eager_claimer(&self) -> Option<String> {
        self.eager.get().map(|dispatch| dispatch.claimer.clone())
    }

    /// An outbox row this process dealt with itself (an eager task whose outcome is
    /// recorded): marked published with the next append, or by the periodic flush.
    pub fn mark_outbox_done(&self, id: i64) {
        self.return_published(vec![id], None);
    }

    /// The whole history, decoded for the engine.
    pub async fn load(
        &self,
        id: &WorkflowId,
    ) -> Result<Vec<HistoryEvent>, hcpflow_eventstore::Error> {
        self.store
            .read_full_history(id)
            .await?
            .iter()
            .map(|event| event.to_history_event())
            .collect()
    }

    /// Creates a workflow with its first events, then publishes.
    pub async fn create(
        &self,
        workflow: &NewWorkflow,
        id: &WorkflowId,
        write: Write,
        recorded_at: chrono::DateTime<chrono::Utc>,
    ) -> Result<Appended, hcpflow_eventstore::Error> {
        let (mut batch, eager) = self.batch(id, Seq::FIRST, write);
        batch.recorded_at = Some(recorded_at);
        let marks = batch.mark_published.clone();
        let appended = match self.store.create_workflow(workflow, batch).await {
            Ok(appended) => appended,
            Err(error) => {
                self.return_published(marks, None);
                return Err(error);
            }
        };
        self.publish_appended(&appended, eager).await;
        Ok(appended)
    }

    /// The batch that appends `write`, and the activity tasks this process runs itself
    /// once it commits.
    pub(crate) fn batch(
        &self,
        id: &WorkflowId,
        expected: Seq,
        mut write: Write,
    ) -> (AppendBatch, Vec<Reserved>) {
        let eager = std::mem::take(&mut write.eager);
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
        if let Ok(mut published) = self.published.lock() {
            batch.mark_published = std::mem::take(&mut published.outbox_ids);
            batch.events_published = published.take_first_run(id);
        }
        if let (Some(dispatch), false) = (self.eager.get(), eager.is_empty()) {
            batch.claimed_outbox = Some(OutboxClaim {
                claimer: dispatch.claimer.clone(),
                lease: LOCAL_LEASE,
                rows: eager.iter().map(|reserved| reserved.position).collect(),
            });
        }
        (batch, eager)
    }

    /// Hands the activity tasks this process claimed to its activity workers, then
    /// publishes what an append committed — its other outbox rows first (the work they
    /// start waits on them), then its events to the events stream — and remembers what
    /// NATS acknowledged. A failure is only logged: the relay publishes whatever is left.
    pub async fn publish_appended(&self, appended: &Appended, eager: Vec<Reserved>) {
        let mut local = vec![false; appended.outbox.len()];
        for reserved in eager {
            let Some(row) = appended.outbox.get(reserved.position) else {
                continue;
            };
            let task = LocalTask {
                outbox_id: row.id,
                task: reserved.task,
                permit: reserved.permit,
            };
            // A worker that is gone leaves the task to NATS, published below.
            let handed = self
                .eager
                .get()
                .is_some_and(|dispatch| dispatch.hand_over(task));
            if let Some(flag) = local.get_mut(reserved.position) {
                *flag = handed;
            }
        }
        let rows: Vec<&OutboxRow> = appended
            .outbox
            .iter()
            .zip(&local)
            .filter(|(_, local)| !**local)
            .map(|(row, _)| row)
            .collect();
        let messages: Vec<OutboxMessage> = rows
            .iter()
            .map(|row| row.message.clone())
            .chain(appended.events.iter().map(|event| {
                self.event_message(&self.subjects.events(event.workflow_id.as_str()), event)
            }))
            .collect();
        let acked = self.publish_all(&messages).await;
        let (rows_acked, events) = acked.split_at(rows.len());
        let outbox_ids: Vec<i64> = rows
            .iter()
            .zip(rows_acked)
            .filter(|(_, acked)| **acked)
            .map(|(row, _)| row.id)
            .collect();
        // The watermark may only move over a gap-free run from the first event.
        let run = events.iter().take_while(|acked| **acked).count();
        let range = match (appended.events.first(), run.checked_sub(1)) {
            (Some(first), Some(last)) => appended.events.get(last).map(|last| {
                let range = PublishedRange {
                    first: first.seq,
                    last: last.seq,
                };
                (first.workflow_id.clone(), range)
            }),
            _ => None,
        };
        self.return_published(outbox_ids, range);
        if let (Some(refused), Some(first)) =
            (appended.events_range_refused, appended.events.first())
        {
            self.return_published(Vec::new(), Some((first.workflow_id.clone(), refused)));
        }
    }

    /// Publishes messages with their `Nats-Msg-Id`, all sent before any acknowledgement
    /// is awaited; returns which ones JetStream acknowledged.
    pub async fn publish_all(&self, messages: &[OutboxMessage]) -> Vec<bool> {
        // One warning per batch, not per message: a NATS outage fails them all alike.
        let mut first_failure: Option<(String, String)> = None;
        let mut pending = Vec::with_capacity(messages.len());
        for message in messages {
            match self.send(message).await {
                Ok(ack) => pending.push(Some(ack)),
                Err(error) => {
                    first_failure.get_or_insert((message.subject.clone(), error.to_string()));
                    pending.push(None);
                }
            }
        }
        let mut acked = Vec::with_capacity(pending.len());
        for (ack, message) in pending.into_iter().zip(messages) {
            acked.push(match ack {
                Some(ack) => match ack.await {
                    Ok(_) => true,
                    Err(error) => {
                        first_failure.get_or_insert((message.subject.clone(), error.to_string()));
                        false
                    }
                },
                None => false,
            });
        }
        let published = acked.iter().filter(|acked| **acked).count();
        if let Some((subject, error)) = first_failure {
            let failed = acked.len() - published;
            tracing::warn!(failed, %subject, %error, "publishing failed; the relay will retry");
        }
        self.metrics.published.add(published as u64);
        acked
    }

    /// An appended event as the events stream carries it on `subject`: a history entry
    /// plus `workflow_id`, deduplicated by workflow and seq.
    pub fn event_message(&self, subject: &str, event: &StoredEvent) -> OutboxMessage {
        OutboxMessage {
            subject: subject.to_owned(),
            msg_id: format!("ev-{}-{}", event.workflow_id, event.seq),
            payload: hcpflow_eventstore::entry_bytes(event, true),
        }
    }

    /// Publishes one message now, outside any append (sweeper, timers, promotions).
    pub async fn publish(&self, message: &OutboxMessage) -> anyhow::Result<()> {
        self.send(message).await?.await?;
        Ok(())
    }

    async fn send(
        &self,
        message: &OutboxMessage,
    ) -> Result<jetstream::context::PublishAckFuture, jetstream::context::PublishError> {
        let publish = PublishMessage::build()
            .payload(message.payload.clone().into())
            .message_id(&message.msg_id);
        self.js.send_publish(message.subject.clone(), publish).await
    }

    pub(crate) fn return_published(
        &self,
        ids: Vec<i64>,
        events: Option<(WorkflowId, PublishedRange)>,
    ) {
        let Ok(mut published) = self.published.lock() else {
            return;
        };
        published.outbox_ids.extend(ids);
        if let Some((id, range)) = events {
            published.events.entry(id).or_default().add(range);
        }
    }

    /// Marks, twice a second, what this process published and no append of the same
    /// workflow marked (the last step of a workflow, or its next step ran elsewhere).
    pub async fn mark_published_until(
        self: Arc<Self>,
        mut shutdown: tokio::sync::watch::Receiver<bool>,
    ) -> anyhow::Result<()> {
        let mut tick = tokio::time::interval(std::time::Duration::from_millis(500));
        loop {
            tokio::select! {
                _ = shutdown.changed() => return Ok(()),
                _ = tick.tick() => self.flush_published().await,
            }
        }
    }

    /// Marks whatever was published but not yet marked (when no append came along).
    pub async fn flush_published(&self) {
        let (ids, events) = match self.published.lock() {
            Ok(mut published) => {
                let ids = std::mem::take(&mut published.outbox_ids);
                let workflows: Vec<WorkflowId> = published.events.keys().cloned().collect();
                let events: Vec<(WorkflowId, PublishedRange)> = workflows
                    .into_iter()
                    .filter_map(|id| published.take_first_run(&id).map(|run| (id, run)))
                    .collect();
                (ids, events)
            }
            Err(_) => return,
        };
        if !ids.is_empty() {
            if let Err(error) = self.store.mark_published_unclaimed(&ids).await {
                tracing::warn!(%error, "marking published outbox rows failed; will retry");
                self.return_published(ids, None);
            }
        }
        if !events.is_empty() {
            let ranges = events;
            let keep = match self.store.mark_events_published(&ranges).await {
                // Ranges ahead of a run still being published here: kept for next time.
                Ok(pending) => pending.into_iter().collect(),
                Err(error) => {
                    tracing::warn!(%error, "marking published events failed; will retry");
                    ranges.iter().map(|(id, _)| id.clone()).collect()
                }
            };
            let keep: std::collections::BTreeSet<WorkflowId> = keep;
            for range in ranges.into_iter().filter(|(id, _)| keep.contains(id)) {
                self.return_published(Vec::new(), Some(range));
            }
        }
    }

    // --- the messages appends cause ------------------------------------------------

    /// Wakes the workflow; `trigger` is the seq of the event that needs the wake.
    pub fn workflow_task(&self, id: &WorkflowId, trigger: Seq) -> OutboxMessage {
        self.workflow_task_message(
            format!("wt-{id}-{trigger}"),
            WorkflowTask {
                workflow_id: id.clone(),
                child: None,
            },
        )
    }

    /// Tells a parent that its child ended.
    pub fn child_done(
        &self,
        parent: &WorkflowId,
        child: &WorkflowId,
        started_seq: Seq,
    ) -> OutboxMessage {
        self.workflow_task_message(
            format!("wt-{parent}-child-{started_seq}"),
            WorkflowTask {
                workflow_id: parent.clone(),
                child: Some(ChildDone {
                    child_id: child.clone(),
                    started_seq,
                }),
            },
        )
    }

    fn workflow_task_message(&self, msg_id: String, task: WorkflowTask) -> OutboxMessage {
        OutboxMessage {
            subject: self.subjects.workflow_tasks(),
            msg_id,
            payload: serde_json::to_vec(&task).unwrap_or_default(),
        }
    }

    pub fn activity_task(
        &self,
        id: &WorkflowId,
        seq: Seq,
        attempt: u32,
        scheduled: &ActivityScheduled,
    ) -> OutboxMessage {
        self.activity_message(&self.activity_task_body(id, seq, attempt, scheduled))
    }

    fn activity_task_body(
        &self,
        id: &WorkflowId,
        seq: Seq,
        attempt: u32,
        scheduled: &ActivityScheduled,
    ) -> ActivityTaskMessage {
        ActivityTaskMessage {
            workflow_id: id.clone(),
            scheduled_seq: seq,
            attempt,
            activity_type: scheduled.activity_type.clone(),
            input: scheduled.input.clone(),
            options: scheduled.options.clone(),
        }
    }

    /// An activity task as its queue's subject carries it.
    pub fn activity_message(&self, task: &ActivityTaskMessage) -> OutboxMessage {
        OutboxMessage {
            subject: self.subjects.activity_tasks(&task.options.task_queue),
            msg_id: format!(
                "at-{}-{}-{}",
                task.workflow_id, task.scheduled_seq, task.attempt
            ),
            payload: serde_json::to_vec(task).unwrap_or_default(),
        }
    }

    /// The messages and timers new commands cause (activities to run, timers to arm).
    ///
    /// An activity on a task queue this process serves, with a free slot, is also
    /// reserved to run here right after the commit (eager dispatch).
    pub fn dispatch_commands(
        &self,
        id: &WorkflowId,
        first_seq: Seq,
        commands: &[Event],
        write: &mut Write,
    ) {
        for (offset, command) in commands.iter().enumerate() {
            let seq = first_seq.advance(offset as u64);
            match command {
                Event::ActivityScheduled(scheduled) => {
                    let task = self.activity_task_body(id, seq, 1, scheduled);
                    let message = self.activity_message(&task);
                    let slot = self
                        .eager
                        .get()
                        .and_then(|dispatch| dispatch.reserve(&scheduled.options.task_queue));
                    if let Some(permit) = slot {
                        write.eager.push(Reserved {
                            position: write.messages.len(),
                            task,
                            permit,
                        });
                    }
                    write.messages.push(message);
                }
                Event::TimerStarted(timer) => write.timers.push(NewTimer {
                    seq,
                    kind: TimerKind::Timer,
                    due_at: to_datetime(timer.fire_at),
                }),
                Event::ChildStarted(child) => write.messages.push(
                    crate::api::intake::child_start_message(&self.subjects, id, seq, child),
                ),
                _ => {}
            }
        }
    }
}

pub fn to_datetime(at: hcpflow_engine::Timestamp) -> chrono::DateTime<chrono::Utc> {
    let millis = i64::try_from(at.as_millis()).unwrap_or(i64::MAX);
    chrono::DateTime::from_timestamp_millis(millis).unwrap_or_else(chrono::Utc::now)
}

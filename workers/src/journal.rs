//! The journal: appends to a history and dispatches what the append caused.
//!
//! Every append writes its NATS messages to the outbox in the same transaction, then
//! publishes them right after the commit (the fast path). The ids of rows published
//! this way are marked in the next append's transaction, so marking costs no commit of
//! its own; a crash between commit and publish leaves rows that the relay finds.

use std::sync::{Arc, Mutex};

use async_nats::jetstream;
use async_nats::jetstream::message::PublishMessage;
use hcpflow_engine::event::{ActivityScheduled, Event};
use hcpflow_engine::{HistoryEvent, Seq, WorkflowId, WorkflowStatus};
use hcpflow_eventstore::{
    AppendBatch, Appended, EventStore, LedgerEntry, NewEvent, NewTimer, NewWorkflow, OutboxMessage,
    OutboxRow, TimerKind,
};
use serde_json::Value;

use crate::catalog::Catalog;
use crate::metrics::Metrics;
use crate::subjects::Subjects;
use crate::wire::{ActivityTaskMessage, ChildDone, WorkflowTask};

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
    published: Mutex<Vec<i64>>,
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
            published: Mutex::new(Vec::new()),
        }
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
        let mut batch = self.batch(id, Seq::FIRST, write);
        batch.recorded_at = Some(recorded_at);
        let marks = batch.mark_published.clone();
        let appended = match self.store.create_workflow(workflow, batch).await {
            Ok(appended) => appended,
            Err(error) => {
                self.return_published(marks);
                return Err(error);
            }
        };
        self.publish_rows(&appended.outbox).await;
        Ok(appended)
    }

    pub(crate) fn batch(&self, id: &WorkflowId, expected: Seq, write: Write) -> AppendBatch {
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
        batch.event_subject = Some(self.subjects.events(id.as_str()));
        batch.mark_published = self.take_published();
        batch
    }

    /// Publishes outbox rows and remembers the ones NATS acknowledged. A failure is
    /// only logged: the relay publishes whatever is left.
    pub async fn publish_rows(&self, rows: &[OutboxRow]) {
        let mut pending = Vec::with_capacity(rows.len());
        for row in rows {
            match self.send(&row.message).await {
                Ok(ack) => pending.push((row.id, ack)),
                Err(error) => {
                    tracing::warn!(%error, subject = %row.message.subject, "publish failed; the relay will retry")
                }
            }
        }
        let mut done = Vec::with_capacity(pending.len());
        for (id, ack) in pending {
            match ack.await {
                Ok(_) => done.push(id),
                Err(error) => {
                    tracing::warn!(%error, "publish not acknowledged; the relay will retry")
                }
            }
        }
        self.metrics.published.add(done.len() as u64);
        self.return_published(done);
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

    fn take_published(&self) -> Vec<i64> {
        self.published
            .lock()
            .map(|mut ids| std::mem::take(&mut *ids))
            .unwrap_or_default()
    }

    fn return_published(&self, ids: Vec<i64>) {
        if ids.is_empty() {
            return;
        }
        if let Ok(mut buffer) = self.published.lock() {
            buffer.extend(ids);
        }
    }

    /// Marks whatever was published but not yet marked (when no append came along).
    pub async fn flush_published(&self) {
        let ids = self.take_published();
        if ids.is_empty() {
            return;
        }
        if let Err(error) = self.store.mark_published_unclaimed(&ids).await {
            tracing::warn!(%error, "marking published outbox rows failed; will retry");
            self.return_published(ids);
        }
    }

    // --- the messages appends cause ------------------------------------------------

    /// Wakes the workflow; `trigger` is the seq of the event that needs the wake.
    pub fn workflow_task(&self, id: &WorkflowId, trigger: Seq) -> OutboxMessage {
        self.workflow_task_message(
            format!("wt-{id}-{trigger}"),
            WorkflowTask {
                workflow_id: id.to_string(),
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
                workflow_id: parent.to_string(),
                child: Some(ChildDone {
                    child_id: child.to_string(),
                    started_seq: started_seq.get(),
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
        self.activity_task_of(
            id,
            seq,
            attempt,
            &scheduled.activity_type,
            &scheduled.input,
            &scheduled.options,
        )
    }

    pub fn activity_task_of(
        &self,
        id: &WorkflowId,
        seq: Seq,
        attempt: u32,
        activity_type: &str,
        input: &Value,
        options: &hcpflow_engine::ActivityOptions,
    ) -> OutboxMessage {
        let task = ActivityTaskMessage {
            workflow_id: id.to_string(),
            scheduled_seq: seq.get(),
            attempt,
            activity_type: activity_type.to_owned(),
            input: input.clone(),
            options: options.clone(),
        };
        OutboxMessage {
            subject: self.subjects.activity_tasks(&options.task_queue),
            msg_id: format!("at-{id}-{seq}-{attempt}"),
            payload: serde_json::to_vec(&task).unwrap_or_default(),
        }
    }

    /// The messages and timers new commands cause (activities to run, timers to arm).
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
                    write
                        .messages
                        .push(self.activity_task(id, seq, 1, scheduled));
                }
                Event::TimerStarted(timer) => write.timers.push(NewTimer {
                    seq,
                    kind: TimerKind::Timer,
                    due_at: to_datetime(timer.fire_at),
                }),
                Event::ChildStarted(child) => write.messages.push(
                    crate::intake::child_start_message(&self.subjects, id, seq, child),
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

//! The messages an append causes, built as data: workflow wake-ups, activity tasks,
//! child starts, timers, and events as the events stream carries them. Pure — nothing
//! here publishes; the journal writes these to the outbox with the append and
//! publishes them after the commit.

use hcpflow_engine::event::{ActivityScheduled, ChildStarted, Event, ParentRef};
use hcpflow_engine::history::ActivityTask;
use hcpflow_engine::{IdempotencyKey, Seq, TenantId, WorkflowId};
use hcpflow_eventstore::{NewTimer, OutboxMessage, StoredEvent, TimerKind};
use hcpflow_protocol::subjects::Subjects;
use hcpflow_protocol::{ActivityTaskMessage, ChildDone, StartRequest, WorkflowTask};

use crate::runtime::journal::{to_datetime, Write};

/// Builds the messages of one subject prefix.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub subjects: Subjects,
}

impl Outgoing {
    pub fn new(subjects: Subjects) -> Self {
        Self { subjects }
    }

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

    /// An activity task on its queue's subject: the message names the attempt only.
    pub fn activity_message(&self, task: &ActivityTask) -> OutboxMessage {
        let message = ActivityTaskMessage {
            workflow_id: task.workflow_id.clone(),
            scheduled_seq: task.scheduled_seq,
            attempt: task.attempt,
        };
        OutboxMessage {
            subject: self.subjects.activity_tasks(&task.options.task_queue),
            msg_id: format!(
                "at-{}-{}-{}",
                task.workflow_id, task.scheduled_seq, task.attempt
            ),
            payload: serde_json::to_vec(&message).unwrap_or_default(),
        }
    }

    /// The message that starts a child, on the internal child-start subject (clients can
    /// neither send one nor take its message id); the parent's seq makes it idempotent.
    pub fn child_start(
        &self,
        parent: &WorkflowId,
        seq: Seq,
        child: &ChildStarted,
    ) -> OutboxMessage {
        let request = StartRequest {
            workflow_type: child.workflow_type.clone(),
            workflow_id: Some(child.child_id.clone()),
            input: child.input.clone(),
            parent: Some(ParentRef {
                workflow_id: parent.clone(),
                seq,
            }),
        };
        OutboxMessage {
            subject: self.subjects.child_starts(),
            msg_id: format!("child-{}", child.child_id),
            payload: serde_json::to_vec(&request).unwrap_or_default(),
        }
    }

    /// An appended event on its workflow's events subject (its tenant's).
    pub fn event_message(&self, tenant: &TenantId, event: &StoredEvent) -> OutboxMessage {
        event_on(
            &self.subjects.events(tenant, event.workflow_id.as_str()),
            event,
        )
    }

    /// The messages and timers new commands cause (activities to run, timers to arm,
    /// children to start), added to `write`; each activity task is also listed in
    /// `write.activity_tasks`, so that the journal may run it in this process.
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
                    let task = activity_task_body(id, seq, 1, scheduled);
                    write.messages.push(self.activity_message(&task));
                    write.activity_tasks.push((write.messages.len() - 1, task));
                }
                Event::TimerStarted(timer) => write.timers.push(NewTimer {
                    seq,
                    kind: TimerKind::Timer,
                    due_at: to_datetime(timer.fire_at),
                }),
                Event::ChildStarted(child) => write.messages.push(self.child_start(id, seq, child)),
                _ => {}
            }
        }
    }
}

/// An appended event as the events stream carries it on `subject`: a history entry
/// plus `workflow_id`, deduplicated by workflow and seq.
pub fn event_on(subject: &str, event: &StoredEvent) -> OutboxMessage {
    OutboxMessage {
        subject: subject.to_owned(),
        msg_id: format!("ev-{}-{}", event.workflow_id, event.seq),
        payload: hcpflow_eventstore::entry_bytes(event, true),
    }
}

fn activity_task_body(
    id: &WorkflowId,
    seq: Seq,
    attempt: u32,
    scheduled: &ActivityScheduled,
) -> ActivityTask {
    ActivityTask {
        workflow_id: id.clone(),
        scheduled_seq: seq,
        activity_type: scheduled.activity_type.clone(),
        input: scheduled.input.clone(),
        options: scheduled.options.clone(),
        attempt,
        idempotency_key: IdempotencyKey::for_activity(id, seq),
        not_before: None,
    }
}

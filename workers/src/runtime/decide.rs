//! What one step of a workflow decides, as a pure function: given its history, its
//! status and the inputs that arrived, run the workflow code (when this process runs
//! it) and produce the write — the inputs, the code's new commands, and the messages,
//! timers, status and result they cause. No I/O: the journal appends what this returns.

use hcpflow_engine::event::{Event, HistoryEvent};
use hcpflow_engine::{
    run_workflow_task, Entropy, ExecError, Seq, TaskOutcome, Timestamp, WorkflowId,
    WorkflowRegistry, WorkflowStatus,
};
use serde_json::{json, Value};

use crate::runtime::journal::Write;
use crate::runtime::outgoing::Outgoing;

/// A history and what the index says of it.
#[derive(Debug)]
pub struct Step<'a> {
    pub id: &'a WorkflowId,
    pub status: WorkflowStatus,
    /// The seq the first new event gets.
    pub next_seq: Seq,
    pub history: Vec<HistoryEvent>,
    /// When the new events are recorded (the store records this time too).
    pub recorded_at: Timestamp,
}

/// What a step decided.
#[derive(Debug)]
pub struct Decided {
    /// The inputs, then the new commands, with everything they cause; no events:
    /// nothing to append.
    pub write: Write,
    /// The workflow code diverged from its history: the workflow must be blocked.
    pub blocked: Option<ExecError>,
    /// A blocked workflow replayed cleanly: the status it returns to.
    pub unblocked: Option<WorkflowStatus>,
    /// The history with everything the write appends, as a fresh read would decode it;
    /// `None` when the workflow is blocked or unblocked (not worth keeping).
    pub history_after: Option<Vec<HistoryEvent>>,
}

/// Decides steps: with the workflow code (`registry`) when this process runs it, else
/// only waking the workflow through NATS when an input needs it.
#[derive(Debug, Clone, Copy)]
pub struct Decider<'a> {
    pub registry: Option<&'a WorkflowRegistry>,
    pub outgoing: &'a Outgoing,
    /// Whether code that diverges from the history blocks the workflow here. Only a
    /// process with the workflow role may: blocked workflows are retried when a workflow
    /// worker starts (new code deployed), so a process without it that runs the code
    /// (an activity worker) records the inputs and wakes a workflow worker instead.
    pub blocks: bool,
}

impl Decider<'_> {
    /// Records `write`'s inputs after `step.history` and, if the workflow can run, runs
    /// its code over the result.
    pub fn decide(&self, step: Step<'_>, mut write: Write, entropy: Box<dyn Entropy>) -> Decided {
        let Step {
            id,
            status,
            next_seq,
            history,
            recorded_at,
        } = step;
        let mut full = history;
        let stamp = |offset: usize| next_seq.advance(offset as u64);
        for (offset, event) in write.events.iter().enumerate() {
            full.push(HistoryEvent {
                seq: stamp(offset),
                recorded_at,
                event: event.clone(),
            });
        }
        let runnable = matches!(
            status,
            WorkflowStatus::Running | WorkflowStatus::Compensating | WorkflowStatus::Blocked
        ) && !full.iter().any(|e| e.event.is_terminal());
        let inputs_recorded = write.events.len();
        let mut blocked = None;
        let mut unblocked = None;
        match (self.registry, runnable) {
            (Some(registry), true) => match run_workflow_task(registry, id, &full, entropy) {
                Ok(outcome) => {
                    if !outcome.commands.is_empty() || status == WorkflowStatus::Blocked {
                        write.status = Some(outcome.status);
                    }
                    if status == WorkflowStatus::Blocked {
                        unblocked = Some(outcome.status);
                    }
                    add_commands(self.outgoing, id, &full, &outcome, &mut write);
                }
                Err(error) if self.blocks => blocked = Some(error),
                Err(error) => {
                    tracing::debug!(workflow_id = %id, %error, "the code here does not replay this history; a workflow worker decides");
                    if wakes(&write.events) {
                        let last = stamp(write.events.len().saturating_sub(1));
                        write.messages.push(self.outgoing.workflow_task(id, last));
                    }
                }
            },
            (None, true) if wakes(&write.events) => {
                let last = stamp(write.events.len().saturating_sub(1));
                write.messages.push(self.outgoing.workflow_task(id, last));
            }
            _ => {}
        }
        for (offset, command) in write.events.iter().enumerate().skip(inputs_recorded) {
            full.push(HistoryEvent {
                seq: stamp(offset),
                recorded_at,
                event: command.clone(),
            });
        }
        Decided {
            history_after: (blocked.is_none() && unblocked.is_none()).then_some(full),
            write,
            blocked,
            unblocked,
        }
    }
}

/// Adds the commands of a workflow task to `write`, with everything they cause: their
/// messages and timers, the result when one ends the workflow, and the parent's wake-up.
pub fn add_commands(
    outgoing: &Outgoing,
    id: &WorkflowId,
    history: &[HistoryEvent],
    outcome: &TaskOutcome,
    write: &mut Write,
) {
    write.events.extend(outcome.commands.iter().cloned());
    outgoing.dispatch_commands(id, outcome.first_seq, &outcome.commands, write);
    if let Some(terminal) = outcome.commands.iter().find(|c| c.is_terminal()) {
        let (output, error) = result_of(terminal);
        write.output = output;
        write.error = error;
        if let Some(Event::WorkflowStarted(started)) = history.first().map(|e| &e.event) {
            if let Some(parent) = &started.parent {
                write
                    .messages
                    .push(outgoing.child_done(&parent.workflow_id, id, parent.seq));
            }
        }
    }
}

/// Inputs the workflow reacts to (not intermediate failures or ledger entries).
fn wakes(events: &[Event]) -> bool {
    events.iter().any(|event| match event {
        Event::ActivityFailed(failed) => failed.retry_at.is_none(),
        Event::ResourceCreated(_) | Event::ResourceDeleted(_) | Event::ResourceObserved(_) => false,
        other => !other.is_command(),
    })
}

/// The index's output and error for a terminal event.
pub fn result_of(terminal: &Event) -> (Option<Value>, Option<Value>) {
    match terminal {
        Event::WorkflowCompleted(done) => (Some(done.output.clone()), None),
        Event::WorkflowFailed(failed) => (
            None,
            Some(
                json!({"kind": "failed", "message": failed.error.to_string(), "cause": failed.error, "left": failed.left}),
            ),
        ),
        Event::WorkflowCompensated(done) => (
            None,
            Some(
                json!({"kind": "compensated", "message": done.cause.to_string(), "cause": done.cause}),
            ),
        ),
        Event::WorkflowCancelled(cancelled) => (
            None,
            Some(
                json!({"kind": "cancelled", "message": cancelled.reason.clone().unwrap_or_else(|| "cancelled".into())}),
            ),
        ),
        _ => (None, None),
    }
}

#[cfg(test)]
mod tests {
    use hcpflow_engine::event::{ActivityScheduled, WorkflowStarted};
    use hcpflow_engine::{ActivityOptions, Catalog, SeededEntropy};
    use hcpflow_protocol::subjects::Subjects;

    use super::*;

    fn catalog() -> Catalog {
        let mut catalog = Catalog::new();
        crate::catalog::builtin::register_workflows(&mut catalog).unwrap();
        catalog
    }

    fn started(steps: u32) -> Event {
        WorkflowStarted {
            workflow_type: "noop_chain".into(),
            input: json!({"steps": steps}),
            concurrency_key: None,
            parent: None,
        }
        .into()
    }

    fn step(id: &WorkflowId, status: WorkflowStatus, history: Vec<HistoryEvent>) -> Step<'_> {
        Step {
            id,
            status,
            next_seq: Seq::FIRST.advance(history.len() as u64),
            history,
            recorded_at: Timestamp::from_millis(1_000),
        }
    }

    fn first_input(event: Event) -> Write {
        Write {
            events: vec![event],
            ..Write::default()
        }
    }

    /// An activity the built-in workflows never schedule.
    fn other_scheduled() -> Event {
        ActivityScheduled {
            activity_type: "something.else".into(),
            input: json!({}),
            input_digest: String::new(),
            options: ActivityOptions::default(),
            compensation_of: None,
        }
        .into()
    }

    fn entropy() -> Box<dyn Entropy> {
        Box::new(SeededEntropy::new(7))
    }

    #[test]
    fn a_start_schedules_the_first_activity_with_its_task_and_the_history_after() {
        let catalog = catalog();
        let outgoing = Outgoing::new(Subjects::new("t").unwrap());
        let decider = Decider {
            registry: Some(catalog.registry()),
            outgoing: &outgoing,
            blocks: true,
        };
        let id = WorkflowId::new("wf-1").unwrap();
        let decided = decider.decide(
            step(&id, WorkflowStatus::Running, Vec::new()),
            first_input(started(2)),
            entropy(),
        );
        assert!(decided.blocked.is_none());
        let kinds: Vec<&str> = decided.write.events.iter().map(Event::kind).collect();
        assert_eq!(kinds, ["WorkflowStarted", "ActivityScheduled"]);
        assert_eq!(decided.write.status, Some(WorkflowStatus::Running));
        assert_eq!(decided.write.messages.len(), 1);
        assert_eq!(decided.write.messages[0].subject, "t.task.activity.default");
        assert_eq!(decided.write.messages[0].msg_id, "at-wf-1-2-1");
        let (position, task) = &decided.write.activity_tasks[0];
        assert_eq!((*position, task.scheduled_seq.get()), (0, 2));
        let after = decided.history_after.unwrap();
        assert_eq!(after.len(), 2);
        assert_eq!(after[1].seq.get(), 2);
        assert_eq!(after[1].recorded_at, Timestamp::from_millis(1_000));
    }

    #[test]
    fn without_the_workflow_code_an_input_wakes_the_workflow_through_nats() {
        let outgoing = Outgoing::new(Subjects::new("t").unwrap());
        let decider = Decider {
            registry: None,
            outgoing: &outgoing,
            blocks: true,
        };
        let id = WorkflowId::new("wf-2").unwrap();
        let decided = decider.decide(
            step(&id, WorkflowStatus::Running, Vec::new()),
            first_input(started(1)),
            entropy(),
        );
        assert_eq!(decided.write.events.len(), 1, "only the input");
        assert_eq!(decided.write.messages.len(), 1);
        assert_eq!(decided.write.messages[0].subject, "t.task.workflow");
        assert_eq!(decided.write.messages[0].msg_id, "wt-wf-2-1");
    }

    #[test]
    fn a_history_the_code_no_longer_makes_blocks_and_an_ended_one_runs_nothing() {
        let catalog = catalog();
        let outgoing = Outgoing::new(Subjects::new("t").unwrap());
        let decider = Decider {
            registry: Some(catalog.registry()),
            outgoing: &outgoing,
            blocks: true,
        };
        let id = WorkflowId::new("wf-3").unwrap();
        let recorded = |seq: u64, event: Event| HistoryEvent {
            seq: Seq::new(seq).unwrap(),
            recorded_at: Timestamp::from_millis(1),
            event,
        };
        // The code schedules `noop.step`; the history recorded something else.
        let diverged = vec![recorded(1, started(1)), recorded(2, other_scheduled())];
        let decided = decider.decide(
            step(&id, WorkflowStatus::Running, diverged),
            Write::default(),
            entropy(),
        );
        assert!(decided.blocked.is_some());
        assert!(decided.history_after.is_none());
        assert!(decided.write.events.is_empty());

        // A process that may not block (no workflow role) records the inputs and wakes
        // a workflow worker, which decides with its own code.
        let handing_over = Decider {
            blocks: false,
            ..decider
        };
        let with_input = Write {
            events: vec![Event::from(hcpflow_engine::event::SignalReceived {
                name: "go".into(),
                payload: json!(null),
            })],
            ..Write::default()
        };
        let diverged = vec![recorded(1, started(1)), recorded(2, other_scheduled())];
        let decided = handing_over.decide(
            step(&id, WorkflowStatus::Running, diverged),
            with_input,
            entropy(),
        );
        assert!(decided.blocked.is_none());
        assert_eq!(decided.write.events.len(), 1, "only the input");
        assert_eq!(decided.write.messages[0].subject, "t.task.workflow");

        let ended = vec![recorded(1, started(1))];
        let decided = decider.decide(
            step(&id, WorkflowStatus::Completed, ended),
            Write::default(),
            entropy(),
        );
        assert!(decided.blocked.is_none());
        assert!(decided.write.events.is_empty() && decided.write.messages.is_empty());
    }
}

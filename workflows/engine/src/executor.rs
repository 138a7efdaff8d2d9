//! The deterministic executor: runs a workflow over its history and returns the new
//! commands.
//!
//! A history is cut into *activations*: a run of input events (results, timers,
//! signals, cancel) followed by the run of commands the workflow emitted in reaction.
//! For each activation the executor applies the inputs, then polls the workflow on this
//! thread until nothing moves, matching every command against the recorded run in
//! order. Only the last activation, if nothing has reacted to it yet, may emit new
//! commands. A live worker that replays the whole history therefore sees exactly the
//! batches any later replay sees: same history in, same commands out.
//!
//! Guarantees: never performs I/O; a panic in workflow code is caught; any divergence
//! from the history is an [`ExecError`] naming the seq, and nothing is emitted.

use std::cell::RefCell;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use serde_json::Value;

use crate::context::WorkflowContext;
use crate::entropy::Entropy;
use crate::error::ExecError;
use crate::event::{ActivityScheduled, ChildStarted, CompensationRegistered, Event, HistoryEvent};
use crate::ids::{Seq, WorkflowId};
use crate::registry::WorkflowRegistry;
use crate::saga;
use crate::state::{Shared, State};
use crate::status::WorkflowStatus;

/// Polls of one activation that keep moving before the workflow is declared runaway.
const MAX_POLLS_PER_ACTIVATION: u32 = 100_000;

/// What one workflow task decided.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskOutcome {
    /// New command events, to append from `first_seq` on.
    pub commands: Vec<Event>,
    pub first_seq: Seq,
    /// The workflow's status once the commands are appended.
    pub status: WorkflowStatus,
}

struct Activation<'h> {
    inputs: &'h [HistoryEvent],
    run: &'h [HistoryEvent],
}

/// Runs the workflow over `history` (which must start with `WorkflowStarted` at seq 1
/// and have no gaps) and returns the commands to append.
///
/// # Errors
/// [`ExecError::Nondeterminism`] when the code emits anything other than what the
/// history recorded, [`ExecError::Panic`] when workflow code panics,
/// [`ExecError::CorruptHistory`] for a history no workflow could have written,
/// [`ExecError::UnknownWorkflowType`] when the type is not registered.
pub fn run_workflow_task(
    registry: &WorkflowRegistry,
    workflow_id: &WorkflowId,
    history: &[HistoryEvent],
    entropy: Box<dyn Entropy>,
) -> Result<TaskOutcome, ExecError> {
    let started = validate(history)?;
    let next_seq = Seq::FIRST.advance(history.len() as u64);
    let state: Shared = Rc::new(RefCell::new(State::new(
        workflow_id.clone(),
        next_seq,
        entropy,
    )));
    let ctx = WorkflowContext::new(state.clone());
    let body = registry
        .start(&started.workflow_type, ctx.clone(), started.input.clone())
        .ok_or_else(|| ExecError::UnknownWorkflowType(started.workflow_type.clone()))?;
    let mut root: Pin<Box<dyn Future<Output = ()>>> = Box::pin(saga::run_to_end(ctx, body));

    let result = replay_activations(&mut root, &state, history);
    // Dropping the workflow future must not look like the workflow dropping its waits.
    state.borrow_mut().tearing_down = true;
    drop(root);
    result?;

    let state = state.borrow();
    let status = status_after(history, &state.new_commands, state.in_rollback);
    Ok(TaskOutcome {
        commands: state.new_commands.clone(),
        first_seq: next_seq,
        status,
    })
}

fn validate(history: &[HistoryEvent]) -> Result<&crate::event::WorkflowStarted, ExecError> {
    for (index, event) in history.iter().enumerate() {
        if event.seq.get() != index as u64 + 1 {
            return Err(ExecError::CorruptHistory {
                seq: event.seq,
                reason: format!("expected seq {}", index + 1),
            });
        }
    }
    match history.first().map(|e| &e.event) {
        Some(Event::WorkflowStarted(started)) => Ok(started),
        Some(other) => Err(ExecError::CorruptHistory {
            seq: Seq::FIRST,
            reason: format!(
                "a history starts with WorkflowStarted, not {}",
                other.kind()
            ),
        }),
        None => Err(ExecError::CorruptHistory {
            seq: Seq::FIRST,
            reason: "the history is empty".into(),
        }),
    }
}

fn activations(history: &[HistoryEvent]) -> Vec<Activation<'_>> {
    let mut result = Vec::new();
    let mut start = 0;
    while start < history.len() {
        let inputs_end = start
            + history[start..]
                .iter()
                .take_while(|e| !e.event.is_command())
                .count();
        let run_end = inputs_end
            + history[inputs_end..]
                .iter()
                .take_while(|e| e.event.is_command())
                .count();
        result.push(Activation {
            inputs: &history[start..inputs_end],
            run: &history[inputs_end..run_end],
        });
        start = run_end;
    }
    result
}

fn replay_activations(
    root: &mut Pin<Box<dyn Future<Output = ()>>>,
    state: &Shared,
    history: &[HistoryEvent],
) -> Result<(), ExecError> {
    let activations = activations(history);
    let mut finished = false;
    for (index, activation) in activations.iter().enumerate() {
        if finished {
            if let Some(extra) = activation.run.first() {
                return Err(ExecError::Nondeterminism {
                    seq: extra.seq,
                    recorded: extra.event.describe(),
                    new: "nothing (the workflow has already ended)".into(),
                });
            }
            continue;
        }
        {
            let mut state = state.borrow_mut();
            for input in activation.inputs {
                apply_input(&mut state, input);
            }
            if let Some(last) = activation.inputs.last() {
                state.now = last.recorded_at;
            }
            state.recorded_run = activation.run.iter().map(for_matching).collect();
            state.live = index + 1 == activations.len() && activation.run.is_empty();
            state.next_recorded = activations
                .get(index + 1)
                .and_then(|next| next.inputs.first())
                .cloned();
        }
        finished = poll_until_quiet(root, state)?;
        let mut state = state.borrow_mut();
        if let Some(error) = state.failure.take() {
            return Err(error);
        }
        if let Some(missing) = state.recorded_run.pop_front() {
            return Err(ExecError::Nondeterminism {
                seq: missing.seq,
                recorded: missing.event.describe(),
                new: "nothing (the workflow code no longer does this here)".into(),
            });
        }
    }
    Ok(())
}

/// A recorded command as the code's commands are matched against it: without the inputs
/// of activities, compensations and children, which matching compares by their digests
/// (`Event::same_command`) and nothing reads back — a replay copies every command of
/// the history, and the inputs are most of their bytes.
fn for_matching(recorded: &HistoryEvent) -> HistoryEvent {
    let event = match &recorded.event {
        Event::ActivityScheduled(scheduled) => ActivityScheduled {
            activity_type: scheduled.activity_type.clone(),
            input: Value::Null,
            input_digest: scheduled.input_digest.clone(),
            options: scheduled.options.clone(),
            compensation_of: scheduled.compensation_of,
        }
        .into(),
        Event::CompensationRegistered(registered) => CompensationRegistered {
            activity_type: registered.activity_type.clone(),
            input: Value::Null,
            input_digest: registered.input_digest.clone(),
            options: registered.options.clone(),
        }
        .into(),
        Event::ChildStarted(child) => ChildStarted {
            child_id: child.child_id.clone(),
            workflow_type: child.workflow_type.clone(),
            input: Value::Null,
            input_digest: child.input_digest.clone(),
        }
        .into(),
        other => other.clone(),
    };
    HistoryEvent {
        seq: recorded.seq,
        recorded_at: recorded.recorded_at,
        event,
    }
}

/// Applies one input event. A second outcome for the same activity, timer or child is
/// a duplicate delivery and is dropped: the first one recorded wins.
fn apply_input(state: &mut State, input: &HistoryEvent) {
    match &input.event {
        Event::ActivityCompleted(done) => {
            state
                .activity_outcomes
                .entry(done.scheduled_seq)
                .or_insert_with(|| Ok(done.result.clone()));
        }
        Event::ActivityFailed(failed) if failed.retry_at.is_none() => {
            state
                .activity_outcomes
                .entry(failed.scheduled_seq)
                .or_insert_with(|| Err(failed.failure.clone()));
        }
        Event::TimerFired(fired) => {
            state.timers_fired.insert(fired.started_seq);
        }
        Event::SignalReceived(signal) => {
            state
                .signals
                .entry(signal.name.clone())
                .or_default()
                .push_back(signal.payload.clone());
        }
        Event::ChildCompleted(child) => {
            state
                .child_outcomes
                .entry(child.started_seq)
                .or_insert_with(|| child.outcome.clone());
        }
        Event::CancelRequested(cancel) if state.cancel.is_none() => {
            state.cancel = Some(cancel.reason.clone());
        }
        // Intermediate failures (a retry follows), the ledger and the start itself
        // change nothing the workflow can observe.
        _ => {}
    }
}

/// Polls until a poll changes nothing. Returns whether the workflow ran to its end.
fn poll_until_quiet(
    root: &mut Pin<Box<dyn Future<Output = ()>>>,
    state: &Shared,
) -> Result<bool, ExecError> {
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..MAX_POLLS_PER_ACTIVATION {
        let before = state.borrow().progress;
        let polled = catch_unwind(AssertUnwindSafe(|| root.as_mut().poll(&mut cx)));
        match polled {
            Err(panic) => {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a non-string panic payload".to_owned());
                return Err(ExecError::Panic { message });
            }
            Ok(Poll::Ready(())) => return Ok(true),
            Ok(Poll::Pending) => {}
        }
        let state = state.borrow();
        if state.failure.is_some() || state.progress == before {
            return Ok(false);
        }
    }
    Err(ExecError::Runaway(MAX_POLLS_PER_ACTIVATION))
}

fn status_after(
    history: &[HistoryEvent],
    new_commands: &[Event],
    in_rollback: bool,
) -> WorkflowStatus {
    let terminal = history
        .iter()
        .map(|e| &e.event)
        .chain(new_commands)
        .find(|e| e.is_terminal());
    match terminal {
        Some(Event::WorkflowCompleted(_)) => WorkflowStatus::Completed,
        Some(Event::WorkflowCompensated(_)) => WorkflowStatus::Compensated,
        Some(Event::WorkflowCancelled(_)) => WorkflowStatus::Cancelled,
        Some(_) => WorkflowStatus::Failed,
        None if in_rollback => WorkflowStatus::Compensating,
        None => WorkflowStatus::Running,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::entropy::SeededEntropy;
    use crate::event::{ActivityCompleted, SignalReceived, WorkflowStarted};
    use crate::testing::HistoryBuilder;

    #[test]
    fn activations_pair_inputs_with_the_commands_that_answered_them() {
        let mut history = HistoryBuilder::start("t", json!(null));
        let a = history.push(crate::event::TimerStarted {
            duration_ms: 1,
            fire_at: crate::time::Timestamp::EPOCH,
        });
        history.push(SignalReceived {
            name: "x".into(),
            payload: json!(1),
        });
        history.push(ActivityCompleted {
            scheduled_seq: a,
            attempt: 1,
            result: json!(null),
        });
        let events = history.build();
        let cut: Vec<(usize, usize)> = activations(&events)
            .iter()
            .map(|a| (a.inputs.len(), a.run.len()))
            .collect();
        assert_eq!(cut, vec![(1, 1), (2, 0)]);
    }

    #[test]
    fn histories_no_workflow_could_write_are_refused() {
        let registry = WorkflowRegistry::new();
        let id = WorkflowId::new("w").unwrap();
        let entropy = || Box::new(SeededEntropy::new(1));
        assert!(matches!(
            run_workflow_task(&registry, &id, &[], entropy()),
            Err(ExecError::CorruptHistory { .. })
        ));
        let mut gap = HistoryBuilder::start("t", json!(null)).build();
        gap[0].seq = Seq::new(2).unwrap();
        assert!(matches!(
            run_workflow_task(&registry, &id, &gap, entropy()),
            Err(ExecError::CorruptHistory { .. })
        ));
        let mut not_started = HistoryBuilder::start("t", json!(null)).build();
        not_started[0].event = SignalReceived {
            name: "x".into(),
            payload: json!(1),
        }
        .into();
        assert!(matches!(
            run_workflow_task(&registry, &id, &not_started, entropy()),
            Err(ExecError::CorruptHistory { .. })
        ));
        let fine = HistoryBuilder::start("t", json!(null)).build();
        assert!(matches!(
            fine[0].event,
            Event::WorkflowStarted(WorkflowStarted { .. })
        ));
        assert_eq!(
            run_workflow_task(&registry, &id, &fine, entropy()),
            Err(ExecError::UnknownWorkflowType("t".into()))
        );
    }
}

//! Questions asked of a history by the workers, the sweeper, destroy and audit — pure
//! functions, so every component answers them the same way.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::event::{Event, HistoryEvent};
use crate::idempotency::IdempotencyKey;
use crate::ids::{Seq, WorkflowId};
use crate::retry::ActivityOptions;
use crate::status::WorkflowStatus;
use crate::time::Timestamp;

/// One activity execution to run, as a worker receives it.
#[derive(Debug, Clone, PartialEq)]
pub struct ActivityTask {
    pub workflow_id: WorkflowId,
    pub scheduled_seq: Seq,
    pub activity_type: String,
    pub input: Value,
    pub options: ActivityOptions,
    /// 1 for the first try.
    pub attempt: u32,
    pub idempotency_key: IdempotencyKey,
    /// Not before this instant (a retry's backoff); `None` means now.
    pub not_before: Option<Timestamp>,
}

/// A timer that has not fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingTimer {
    pub started_seq: Seq,
    pub fire_at: Timestamp,
}

/// A child the parent started that has not reported back.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingChild {
    pub started_seq: Seq,
    pub child_id: WorkflowId,
    pub workflow_type: String,
    pub input: Value,
}

/// Everything a history says still has to happen. Postgres is the truth: a sweeper
/// that finds work here with no task in flight re-enqueues it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PendingWork {
    /// Inputs arrived that the workflow has not reacted to.
    pub workflow_task: bool,
    pub activities: Vec<ActivityTask>,
    pub timers: Vec<PendingTimer>,
    pub children: Vec<PendingChild>,
}

impl PendingWork {
    pub fn is_empty(&self) -> bool {
        !self.workflow_task
            && self.activities.is_empty()
            && self.timers.is_empty()
            && self.children.is_empty()
    }
}

/// What happened to one registered compensation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompensationState {
    /// Never run: what a destroy workflow has to run.
    NotRun,
    /// Ran and succeeded.
    Undone,
    /// Ran and failed after its retries.
    Failed(String),
    /// Running now.
    Running,
}

/// A compensation registered in a history, and its fate.
#[derive(Debug, Clone, PartialEq)]
pub struct CompensationRecord {
    pub registered_seq: Seq,
    pub activity_type: String,
    pub input: Value,
    pub options: ActivityOptions,
    pub state: CompensationState,
}

/// The status a history implies (never `pending` or `blocked`: those live in the index).
pub fn status(history: &[HistoryEvent]) -> WorkflowStatus {
    let mut status = WorkflowStatus::Running;
    for event in history {
        status = match &event.event {
            Event::RollbackStarted(_) => WorkflowStatus::Compensating,
            Event::WorkflowCompleted(_) => return WorkflowStatus::Completed,
            Event::WorkflowCompensated(_) => return WorkflowStatus::Compensated,
            Event::WorkflowCancelled(_) => return WorkflowStatus::Cancelled,
            Event::WorkflowFailed(_) => return WorkflowStatus::Failed,
            _ => status,
        };
    }
    status
}

/// The final outcome of each activity: completed, or failed with no retry to follow.
fn final_outcomes(history: &[HistoryEvent]) -> BTreeSet<Seq> {
    history
        .iter()
        .filter_map(|e| match &e.event {
            Event::ActivityCompleted(done) => Some(done.scheduled_seq),
            Event::ActivityFailed(failed) if failed.retry_at.is_none() => {
                Some(failed.scheduled_seq)
            }
            _ => None,
        })
        .collect()
}

/// Whether an outcome of `attempt` for the activity at `scheduled_seq` should be
/// recorded. A second completion (a redelivered task, a worker that came back) is not:
/// at-least-once execution, exactly-once recording. Nor is one that arrives after the
/// workflow ended: a history ends at its end event (its signed head).
pub fn accepts_activity_outcome(
    history: &[HistoryEvent],
    scheduled_seq: Seq,
    attempt: u32,
) -> bool {
    if history.iter().any(|e| e.event.is_terminal()) {
        return false;
    }
    let scheduled = history
        .iter()
        .any(|e| e.seq == scheduled_seq && matches!(e.event, Event::ActivityScheduled(_)));
    if !scheduled || final_outcomes(history).contains(&scheduled_seq) {
        return false;
    }
    let failed_attempts = history
        .iter()
        .filter(
            |e| matches!(&e.event, Event::ActivityFailed(f) if f.scheduled_seq == scheduled_seq),
        )
        .count() as u32;
    attempt == failed_attempts + 1
}

/// Attempt `attempt` of the activity scheduled at `scheduled_seq`, as the history
/// recorded it — type, input and options from its `ActivityScheduled` — if the history
/// still waits for that attempt's outcome; `None` otherwise. A task message only names
/// the attempt: what runs is always what this returns.
pub fn awaited_attempt(
    workflow_id: &WorkflowId,
    history: &[HistoryEvent],
    scheduled_seq: Seq,
    attempt: u32,
) -> Option<ActivityTask> {
    if !accepts_activity_outcome(history, scheduled_seq, attempt) {
        return None;
    }
    let scheduled = history.iter().find_map(|e| match &e.event {
        Event::ActivityScheduled(scheduled) if e.seq == scheduled_seq => Some(scheduled),
        _ => None,
    })?;
    let not_before = history.iter().rev().find_map(|e| match &e.event {
        Event::ActivityFailed(failed) if failed.scheduled_seq == scheduled_seq => {
            Some(failed.retry_at)
        }
        _ => None,
    });
    Some(ActivityTask {
        workflow_id: workflow_id.clone(),
        scheduled_seq,
        activity_type: scheduled.activity_type.clone(),
        input: scheduled.input.clone(),
        options: scheduled.options.clone(),
        attempt,
        idempotency_key: IdempotencyKey::for_activity(workflow_id, scheduled_seq),
        not_before: not_before.flatten(),
    })
}

/// The attempt number the next execution of `scheduled_seq` has.
pub fn next_attempt(history: &[HistoryEvent], scheduled_seq: Seq) -> u32 {
    1 + history
        .iter()
        .filter(
            |e| matches!(&e.event, Event::ActivityFailed(f) if f.scheduled_seq == scheduled_seq),
        )
        .count() as u32
}

/// What is still to do for this history.
pub fn pending_work(workflow_id: &WorkflowId, history: &[HistoryEvent]) -> PendingWork {
    let mut work = PendingWork::default();
    if history.iter().any(|e| e.event.is_terminal()) {
        return work;
    }
    let last_command = history
        .iter()
        .rev()
        .find(|e| e.event.is_command())
        .map(|e| e.seq);
    work.workflow_task = history.iter().any(|e| {
        Some(e.seq) > last_command
            && match &e.event {
                Event::ResourceCreated(_)
                | Event::ResourceDeleted(_)
                | Event::ResourceObserved(_) => false,
                Event::ActivityFailed(failed) => failed.retry_at.is_none(),
                other => !other.is_command(),
            }
    });

    let finished = final_outcomes(history);
    let mut retry_at: BTreeMap<Seq, Option<Timestamp>> = BTreeMap::new();
    let mut fired = BTreeSet::new();
    let mut reported_children = BTreeSet::new();
    let mut cancelled = BTreeSet::new();
    for event in history {
        match &event.event {
            Event::ActivityFailed(failed) => {
                retry_at.insert(failed.scheduled_seq, failed.retry_at);
            }
            Event::ActivityCancelRequested(cancel) => {
                cancelled.insert(cancel.scheduled_seq);
            }
            Event::TimerFired(timer) => {
                fired.insert(timer.started_seq);
            }
            Event::TimerCancelled(timer) => {
                fired.insert(timer.started_seq);
            }
            Event::ChildCompleted(child) => {
                reported_children.insert(child.started_seq);
            }
            _ => {}
        }
    }
    for event in history {
        match &event.event {
            Event::ActivityScheduled(scheduled)
                if !finished.contains(&event.seq) && !cancelled.contains(&event.seq) =>
            {
                work.activities.push(ActivityTask {
                    workflow_id: workflow_id.clone(),
                    scheduled_seq: event.seq,
                    activity_type: scheduled.activity_type.clone(),
                    input: scheduled.input.clone(),
                    options: scheduled.options.clone(),
                    attempt: next_attempt(history, event.seq),
                    idempotency_key: IdempotencyKey::for_activity(workflow_id, event.seq),
                    not_before: retry_at.get(&event.seq).copied().flatten(),
                });
            }
            Event::TimerStarted(timer) if !fired.contains(&event.seq) => {
                work.timers.push(PendingTimer {
                    started_seq: event.seq,
                    fire_at: timer.fire_at,
                })
            }
            Event::ChildStarted(child) if !reported_children.contains(&event.seq) => {
                work.children.push(PendingChild {
                    started_seq: event.seq,
                    child_id: child.child_id.clone(),
                    workflow_type: child.workflow_type.clone(),
                    input: child.input.clone(),
                })
            }
            _ => {}
        }
    }
    work
}

/// Every compensation the history registered, in registration order, with what became
/// of it. A destroy workflow runs the `NotRun` and `Failed` ones, newest first.
pub fn registered_compensations(history: &[HistoryEvent]) -> Vec<CompensationRecord> {
    let mut runs: BTreeMap<Seq, Seq> = BTreeMap::new();
    for event in history {
        if let Event::ActivityScheduled(scheduled) = &event.event {
            if let Some(registered) = scheduled.compensation_of {
                runs.insert(registered, event.seq);
            }
        }
    }
    let mut outcomes: BTreeMap<Seq, CompensationState> = BTreeMap::new();
    for event in history {
        match &event.event {
            Event::ActivityCompleted(done) => {
                outcomes
                    .entry(done.scheduled_seq)
                    .or_insert(CompensationState::Undone);
            }
            Event::ActivityFailed(failed) if failed.retry_at.is_none() => {
                outcomes
                    .entry(failed.scheduled_seq)
                    .or_insert_with(|| CompensationState::Failed(failed.failure.to_string()));
            }
            _ => {}
        }
    }
    history
        .iter()
        .filter_map(|event| match &event.event {
            Event::CompensationRegistered(registered) => {
                let state = match runs.get(&event.seq) {
                    None => CompensationState::NotRun,
                    Some(run) => outcomes
                        .get(run)
                        .cloned()
                        .unwrap_or(CompensationState::Running),
                };
                Some(CompensationRecord {
                    registered_seq: event.seq,
                    activity_type: registered.activity_type.clone(),
                    input: registered.input.clone(),
                    options: registered.options.clone(),
                    state,
                })
            }
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::error::ActivityFailure;
    use crate::event::{
        ActivityCompleted, ActivityFailed, ActivityScheduled, CompensationRegistered, TimerStarted,
    };
    use crate::testing::HistoryBuilder;

    fn scheduled(activity_type: &str, compensation_of: Option<Seq>) -> ActivityScheduled {
        ActivityScheduled {
            activity_type: activity_type.into(),
            input: json!({}),
            input_digest: crate::event::digest(&json!({})),
            options: ActivityOptions::default(),
            compensation_of,
        }
    }

    #[test]
    fn the_awaited_attempt_is_the_recorded_command_and_only_the_next_one() {
        let id = WorkflowId::new("w").unwrap();
        let mut history = HistoryBuilder::start("t", json!(null));
        let a = history.push(ActivityScheduled {
            input: json!({"vpc": "vpc-1"}),
            ..scheduled("aws.create_subnet", None)
        });
        history.push(ActivityFailed {
            scheduled_seq: a,
            attempt: 1,
            failure: ActivityFailure::retryable("Throttling", "x"),
            retry_at: Some(Timestamp::from_millis(9)),
        });
        let history = history.build();
        let task = awaited_attempt(&id, &history, a, 2).expect("attempt 2 is awaited");
        assert_eq!(task.activity_type, "aws.create_subnet");
        assert_eq!(task.input, json!({"vpc": "vpc-1"}));
        assert_eq!(task.not_before, Some(Timestamp::from_millis(9)));
        assert_eq!(task.idempotency_key, IdempotencyKey::for_activity(&id, a));
        assert_eq!(awaited_attempt(&id, &history, a, 1), None, "an old attempt");
        assert_eq!(
            awaited_attempt(&id, &history, a, 3),
            None,
            "a future attempt"
        );
        let unscheduled = a.advance(1);
        assert_eq!(awaited_attempt(&id, &history, unscheduled, 1), None);
    }

    #[test]
    fn pending_work_lists_unfinished_activities_retries_and_timers() {
        let id = WorkflowId::new("w").unwrap();
        let mut history = HistoryBuilder::start("t", json!(null));
        let a = history.push(scheduled("a", None));
        let b = history.push(scheduled("b", None));
        let timer = history.push(TimerStarted {
            duration_ms: 5,
            fire_at: Timestamp::from_millis(5),
        });
        history.push(ActivityFailed {
            scheduled_seq: b,
            attempt: 1,
            failure: ActivityFailure::retryable("Throttling", "x"),
            retry_at: Some(Timestamp::from_millis(9)),
        });
        let work = pending_work(&id, &history.build());
        assert!(!work.workflow_task, "an intermediate failure wakes nobody");
        assert_eq!(work.activities.len(), 2);
        assert_eq!(
            (
                work.activities[0].scheduled_seq,
                work.activities[0].attempt,
                work.activities[0].not_before
            ),
            (a, 1, None)
        );
        assert_eq!(
            (
                work.activities[1].scheduled_seq,
                work.activities[1].attempt,
                work.activities[1].not_before
            ),
            (b, 2, Some(Timestamp::from_millis(9)))
        );
        assert_eq!(
            work.timers,
            vec![PendingTimer {
                started_seq: timer,
                fire_at: Timestamp::from_millis(5)
            }]
        );
    }

    #[test]
    fn a_completion_needs_a_workflow_task_and_is_accepted_once() {
        let id = WorkflowId::new("w").unwrap();
        let mut history = HistoryBuilder::start("t", json!(null));
        let a = history.push(scheduled("a", None));
        assert!(accepts_activity_outcome(&history.clone().build(), a, 1));
        assert!(
            !accepts_activity_outcome(&history.clone().build(), a, 2),
            "attempt 2 before attempt 1 failed"
        );
        history.push(ActivityCompleted {
            scheduled_seq: a,
            attempt: 1,
            result: json!(1),
        });
        let events = history.build();
        assert!(!accepts_activity_outcome(&events, a, 1));
        assert!(
            !accepts_activity_outcome(&events, Seq::new(99).unwrap(), 1),
            "no such activity"
        );
        let work = pending_work(&id, &events);
        assert!(work.workflow_task);
        assert!(work.activities.is_empty());
    }

    #[test]
    fn no_outcome_is_accepted_after_the_end() {
        let mut history = HistoryBuilder::start("t", json!(null));
        let a = history.push(scheduled("a", None));
        history.push(crate::event::WorkflowCancelled { reason: None });
        assert!(!accepts_activity_outcome(&history.build(), a, 1));
    }

    #[test]
    fn compensations_report_their_fate() {
        let mut history = HistoryBuilder::start("t", json!(null));
        let registered = |t: &str| CompensationRegistered {
            activity_type: t.into(),
            input: json!({}),
            input_digest: crate::event::digest(&json!({})),
            options: ActivityOptions::default(),
        };
        let first = history.push(registered("undo-1"));
        let second = history.push(registered("undo-2"));
        let third = history.push(registered("undo-3"));
        let run_third = history.push(scheduled("undo-3", Some(third)));
        let run_second = history.push(scheduled("undo-2", Some(second)));
        history.push(ActivityCompleted {
            scheduled_seq: run_third,
            attempt: 1,
            result: json!(null),
        });
        history.push(ActivityFailed {
            scheduled_seq: run_second,
            attempt: 1,
            failure: ActivityFailure::permanent("Denied", "no"),
            retry_at: None,
        });
        let records = registered_compensations(&history.build());
        let states: Vec<(Seq, CompensationState)> = records
            .into_iter()
            .map(|r| (r.registered_seq, r.state))
            .collect();
        assert_eq!(
            states,
            vec![
                (first, CompensationState::NotRun),
                (second, CompensationState::Failed("Denied: no".into())),
                (third, CompensationState::Undone),
            ]
        );
    }
}

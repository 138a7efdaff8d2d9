//! Test utilities (feature `test-util`): a history builder, an in-memory event store and
//! task queue, and [`TestEnv`], a driver that runs workflows to completion in-process
//! with fake activities, a virtual clock, crash and recovery.
//!
//! The driver does what the real workers do, in one thread and in a fixed order, so a
//! test can stop it at any step ("crash"), throw away everything not in the store, and
//! recover from the store alone the way the sweeper does.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;

use serde::Serialize;
use serde_json::Value;

use crate::entropy::SeededEntropy;
use crate::error::{ActivityFailure, ExecError, WorkflowError};
use crate::event::{
    ActivityCompleted, ActivityFailed, CancelRequested, ChildCompleted, Event, HistoryEvent,
    ParentRef, SignalReceived, TimerFired, WorkflowStarted,
};
use crate::executor::run_workflow_task;
use crate::history::{self, ActivityTask};
use crate::ids::{Seq, WorkflowId};
use crate::registry::WorkflowRegistry;
use crate::retry::RetryDecision;
use crate::status::WorkflowStatus;
use crate::time::Timestamp;

/// Builds histories by hand for unit tests: seqs and timestamps are filled in.
#[derive(Debug, Clone)]
pub struct HistoryBuilder {
    events: Vec<HistoryEvent>,
    now: Timestamp,
}

impl HistoryBuilder {
    /// A history that starts `workflow_type` with `input` at time 0.
    pub fn start(workflow_type: &str, input: impl Serialize) -> Self {
        let mut builder = Self {
            events: Vec::new(),
            now: Timestamp::EPOCH,
        };
        builder.push(WorkflowStarted {
            workflow_type: workflow_type.to_owned(),
            input: serde_json::to_value(input).unwrap_or(Value::Null),
            concurrency_key: None,
            parent: None,
        });
        builder
    }

    /// Appends an event at the next seq; returns that seq.
    pub fn push(&mut self, event: impl Into<Event>) -> Seq {
        let seq = Seq::FIRST.advance(self.events.len() as u64);
        self.events.push(HistoryEvent {
            seq,
            recorded_at: self.now,
            event: event.into(),
        });
        seq
    }

    /// Appends every event; chainable.
    #[must_use]
    pub fn with(mut self, events: impl IntoIterator<Item = Event>) -> Self {
        for event in events {
            self.push(event);
        }
        self
    }

    /// Moves the clock for the events pushed after this.
    #[must_use]
    pub fn at(mut self, now: Timestamp) -> Self {
        self.now = now;
        self
    }

    pub fn build(self) -> Vec<HistoryEvent> {
        self.events
    }
}

/// A conflict in the in-memory store: another append got there first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreConflict {
    pub expected: Seq,
    pub actual: Seq,
}

/// Histories in memory, with the event store's append semantics: a batch lands only at
/// the expected next seq.
#[derive(Debug, Clone, Default)]
pub struct InMemoryStore {
    histories: BTreeMap<WorkflowId, Vec<HistoryEvent>>,
}

impl InMemoryStore {
    pub fn history(&self, id: &WorkflowId) -> &[HistoryEvent] {
        self.histories.get(id).map(Vec::as_slice).unwrap_or(&[])
    }

    pub fn workflow_ids(&self) -> Vec<WorkflowId> {
        self.histories.keys().cloned().collect()
    }

    pub fn append(
        &mut self,
        id: &WorkflowId,
        expected: Seq,
        events: Vec<Event>,
        now: Timestamp,
    ) -> Result<Seq, StoreConflict> {
        let history = self.histories.entry(id.clone()).or_default();
        let actual = Seq::FIRST.advance(history.len() as u64);
        if actual != expected {
            return Err(StoreConflict { expected, actual });
        }
        let mut seq = actual;
        for event in events {
            history.push(HistoryEvent {
                seq,
                recorded_at: now,
                event,
            });
            seq = seq.next();
        }
        Ok(seq)
    }
}

/// A unit of work.
#[derive(Debug, Clone, PartialEq)]
pub enum Task {
    Workflow(WorkflowId),
    Activity(Box<ActivityTask>),
}

/// A FIFO task queue that coalesces workflow tasks: a workflow already queued is not
/// queued twice (many completions become one task).
#[derive(Debug, Clone, Default)]
pub struct InMemoryQueue {
    tasks: VecDeque<Task>,
}

impl InMemoryQueue {
    pub fn push(&mut self, task: Task) {
        if matches!(&task, Task::Workflow(_)) && self.tasks.contains(&task) {
            return;
        }
        self.tasks.push_back(task);
    }

    pub fn pop(&mut self) -> Option<Task> {
        self.tasks.pop_front()
    }

    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    pub fn clear(&mut self) {
        self.tasks.clear();
    }

    fn remove_activity(&mut self, id: &WorkflowId, seq: Seq) {
        self.tasks.retain(
            |t| !matches!(t, Task::Activity(a) if a.workflow_id == *id && a.scheduled_seq == seq),
        );
    }
}

type FakeActivity = Box<dyn FnMut(&ActivityTask) -> Result<Value, ActivityFailure>>;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum TimerKey {
    /// A workflow timer: fire `TimerFired`.
    Timer(WorkflowId, Seq),
    /// A retry backoff: run the next attempt.
    Retry(WorkflowId, Seq),
}

/// One append the driver made: where it started in that workflow's history, how many
/// events, and whether it was a workflow task's commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendRecord {
    pub workflow_id: WorkflowId,
    pub start: usize,
    pub len: usize,
    pub commands: bool,
}

/// Runs workflows in-process: the store, the queue, timers on a virtual clock, and fake
/// activities.
pub struct TestEnv {
    registry: WorkflowRegistry,
    activities: BTreeMap<String, FakeActivity>,
    pub store: InMemoryStore,
    pub queue: InMemoryQueue,
    timers: BTreeMap<(Timestamp, TimerKey), ()>,
    clock: Timestamp,
    blocked: BTreeMap<WorkflowId, ExecError>,
    /// Every activity execution, in order: (workflow, activity type, attempt).
    pub executions: Vec<(WorkflowId, String, u32)>,
    pub appends: Vec<AppendRecord>,
}

impl fmt::Debug for TestEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestEnv")
            .field("clock", &self.clock)
            .field("workflows", &self.store.workflow_ids())
            .finish_non_exhaustive()
    }
}

impl TestEnv {
    pub fn new(registry: WorkflowRegistry) -> Self {
        Self {
            registry,
            activities: BTreeMap::new(),
            store: InMemoryStore::default(),
            queue: InMemoryQueue::default(),
            timers: BTreeMap::new(),
            clock: Timestamp::from_millis(1_700_000_000_000),
            blocked: BTreeMap::new(),
            executions: Vec::new(),
            appends: Vec::new(),
        }
    }

    /// Registers a fake implementation of `activity_type`.
    pub fn activity(
        &mut self,
        activity_type: &str,
        fake: impl FnMut(&ActivityTask) -> Result<Value, ActivityFailure> + 'static,
    ) -> &mut Self {
        self.activities
            .insert(activity_type.to_owned(), Box::new(fake));
        self
    }

    pub fn now(&self) -> Timestamp {
        self.clock
    }

    pub fn history(&self, id: &WorkflowId) -> Vec<HistoryEvent> {
        self.store.history(id).to_vec()
    }

    /// `blocked` if the executor refused the history, else what the history says.
    pub fn status(&self, id: &WorkflowId) -> WorkflowStatus {
        if self.blocked.contains_key(id) {
            return WorkflowStatus::Blocked;
        }
        history::status(self.store.history(id))
    }

    pub fn blocked_reason(&self, id: &WorkflowId) -> Option<&ExecError> {
        self.blocked.get(id)
    }

    /// The terminal event, if the workflow ended.
    pub fn terminal(&self, id: &WorkflowId) -> Option<Event> {
        self.store
            .history(id)
            .iter()
            .find(|e| e.event.is_terminal())
            .map(|e| e.event.clone())
    }

    pub fn start(&mut self, id: &str, workflow_type: &str, input: impl Serialize) -> WorkflowId {
        let id = WorkflowId::new(id).unwrap_or_else(|e| panic!("test workflow id {id:?}: {e}"));
        let started = WorkflowStarted {
            workflow_type: workflow_type.to_owned(),
            input: serde_json::to_value(input).unwrap_or(Value::Null),
            concurrency_key: None,
            parent: None,
        };
        self.append(&id, vec![started.into()], false);
        self.queue.push(Task::Workflow(id.clone()));
        id
    }

    pub fn signal(&mut self, id: &WorkflowId, name: &str, payload: impl Serialize) {
        let event = SignalReceived {
            name: name.to_owned(),
            payload: serde_json::to_value(payload).unwrap_or(Value::Null),
        };
        self.append(id, vec![event.into()], false);
        self.queue.push(Task::Workflow(id.clone()));
    }

    pub fn cancel(&mut self, id: &WorkflowId, reason: &str) {
        let event = CancelRequested {
            reason: Some(reason.to_owned()),
        };
        self.append(id, vec![event.into()], false);
        self.queue.push(Task::Workflow(id.clone()));
    }

    /// Runs queued tasks and due timers until nothing is left.
    pub fn run_until_idle(&mut self) {
        while self.step() {}
    }

    /// Runs at most `steps` steps; returns how many ran.
    pub fn run_steps(&mut self, steps: usize) -> usize {
        (0..steps).take_while(|_| self.step()).count()
    }

    /// Runs one task, or fires the earliest timer (moving the clock) when no task is
    /// queued. Returns false when there was nothing to do.
    pub fn step(&mut self) -> bool {
        if let Some(task) = self.queue.pop() {
            match task {
                Task::Workflow(id) => self.workflow_task(&id),
                Task::Activity(activity) => self.activity_task(*activity),
            }
            return true;
        }
        let Some(((due, key), ())) = self.timers.pop_first() else {
            return false;
        };
        self.clock = self.clock.max(due);
        match key {
            TimerKey::Timer(id, seq) => self.fire_timer(&id, seq),
            TimerKey::Retry(id, seq) => self.enqueue_activity(&id, seq),
        }
        true
    }

    /// Loses everything that is not in the store: queued tasks and armed timers.
    pub fn crash(&mut self) {
        self.queue.clear();
        self.timers.clear();
        self.blocked.clear();
    }

    /// Rebuilds queued work and timers from the store alone, as the sweeper does.
    pub fn recover(&mut self) {
        for id in self.store.workflow_ids() {
            let history = self.history(&id);
            self.notify_parent(&id, &history);
            let work = history::pending_work(&id, &history);
            if work.workflow_task {
                self.queue.push(Task::Workflow(id.clone()));
            }
            for activity in work.activities {
                match activity.not_before {
                    Some(at) => {
                        self.timers.insert(
                            (at, TimerKey::Retry(id.clone(), activity.scheduled_seq)),
                            (),
                        );
                    }
                    None => self.queue.push(Task::Activity(Box::new(activity))),
                }
            }
            for timer in work.timers {
                self.timers.insert(
                    (
                        timer.fire_at,
                        TimerKey::Timer(id.clone(), timer.started_seq),
                    ),
                    (),
                );
            }
            for child in work.children {
                if self.store.history(&child.child_id).is_empty() {
                    self.start_child(
                        &id,
                        child.started_seq,
                        &child.child_id,
                        &child.workflow_type,
                        child.input,
                    );
                }
            }
        }
    }

    fn append(&mut self, id: &WorkflowId, events: Vec<Event>, commands: bool) {
        let start = self.store.history(id).len();
        let expected = Seq::FIRST.advance(start as u64);
        let len = events.len();
        if let Err(conflict) = self.store.append(id, expected, events, self.clock) {
            panic!("the single-threaded driver cannot conflict: {conflict:?}");
        }
        self.appends.push(AppendRecord {
            workflow_id: id.clone(),
            start,
            len,
            commands,
        });
    }

    fn workflow_task(&mut self, id: &WorkflowId) {
        let history = self.history(id);
        if history.iter().any(|e| e.event.is_terminal()) {
            return;
        }
        match run_workflow_task(
            &self.registry,
            id,
            &history,
            task_entropy(id, history.len()),
        ) {
            Err(error) => {
                self.blocked.insert(id.clone(), error);
            }
            Ok(outcome) if outcome.commands.is_empty() => {}
            Ok(outcome) => {
                let first = outcome.first_seq;
                self.append(id, outcome.commands.clone(), true);
                for (offset, command) in outcome.commands.iter().enumerate() {
                    self.dispatch(id, first.advance(offset as u64), command);
                }
            }
        }
    }

    fn dispatch(&mut self, id: &WorkflowId, seq: Seq, command: &Event) {
        match command {
            Event::ActivityScheduled(_) => self.enqueue_activity(id, seq),
            Event::ActivityCancelRequested(cancel) => {
                self.queue.remove_activity(id, cancel.scheduled_seq)
            }
            Event::TimerStarted(timer) => {
                self.timers
                    .insert((timer.fire_at, TimerKey::Timer(id.clone(), seq)), ());
            }
            Event::TimerCancelled(timer) => {
                self.timers
                    .retain(|(_, key), ()| *key != TimerKey::Timer(id.clone(), timer.started_seq));
            }
            Event::ChildStarted(child) => {
                self.start_child(
                    id,
                    seq,
                    &child.child_id,
                    &child.workflow_type,
                    child.input.clone(),
                );
            }
            event if event.is_terminal() => {
                let history = self.history(id);
                self.notify_parent(id, &history);
            }
            _ => {}
        }
    }

    fn start_child(
        &mut self,
        parent: &WorkflowId,
        seq: Seq,
        child: &WorkflowId,
        workflow_type: &str,
        input: Value,
    ) {
        let started = WorkflowStarted {
            workflow_type: workflow_type.to_owned(),
            input,
            concurrency_key: None,
            parent: Some(ParentRef {
                workflow_id: parent.clone(),
                seq,
            }),
        };
        self.append(child, vec![started.into()], false);
        self.queue.push(Task::Workflow(child.clone()));
    }

    /// Reports a finished child to its parent, once.
    fn notify_parent(&mut self, id: &WorkflowId, history: &[HistoryEvent]) {
        let Some(Event::WorkflowStarted(started)) = history.first().map(|e| &e.event) else {
            return;
        };
        let (Some(parent), Some(terminal)) = (
            &started.parent,
            history.iter().find(|e| e.event.is_terminal()),
        ) else {
            return;
        };
        let already = self.store.history(&parent.workflow_id).iter().any(
            |e| matches!(&e.event, Event::ChildCompleted(done) if done.started_seq == parent.seq),
        );
        if already {
            return;
        }
        let outcome = match &terminal.event {
            Event::WorkflowCompleted(done) => Ok(done.output.clone()),
            other => Err(WorkflowError::Child {
                child_id: id.to_string(),
                message: format!("ended with {}", other.kind()),
            }),
        };
        let parent_id = parent.workflow_id.clone();
        let event = ChildCompleted {
            started_seq: parent.seq,
            outcome,
        };
        self.append(&parent_id, vec![event.into()], false);
        self.queue.push(Task::Workflow(parent_id));
    }

    fn enqueue_activity(&mut self, id: &WorkflowId, seq: Seq) {
        let history = self.history(id);
        let work = history::pending_work(id, &history);
        if let Some(task) = work.activities.into_iter().find(|a| a.scheduled_seq == seq) {
            self.queue.push(Task::Activity(Box::new(task)));
        }
    }

    fn fire_timer(&mut self, id: &WorkflowId, seq: Seq) {
        let history = self.history(id);
        let pending = history::pending_work(id, &history);
        if pending.timers.iter().any(|t| t.started_seq == seq) {
            self.append(id, vec![TimerFired { started_seq: seq }.into()], false);
            self.queue.push(Task::Workflow(id.clone()));
        }
    }

    fn activity_task(&mut self, task: ActivityTask) {
        let id = task.workflow_id.clone();
        let outcome = match self.activities.get_mut(&task.activity_type) {
            Some(fake) => fake(&task),
            None => Err(ActivityFailure::permanent(
                "UnknownActivity",
                format!("no fake for activity {}", task.activity_type),
            )),
        };
        self.executions
            .push((id.clone(), task.activity_type.clone(), task.attempt));
        let history = self.history(&id);
        if !history::accepts_activity_outcome(&history, task.scheduled_seq, task.attempt) {
            return; // a duplicate execution: its result is dropped
        }
        match outcome {
            Ok(result) => {
                let event = ActivityCompleted {
                    scheduled_seq: task.scheduled_seq,
                    attempt: task.attempt,
                    result,
                };
                self.append(&id, vec![event.into()], false);
                self.queue.push(Task::Workflow(id));
            }
            Err(failure) => {
                let retry_at = match task.options.retry.decide(task.attempt, &failure) {
                    RetryDecision::RetryAfter(delay) => Some(self.clock.after(delay)),
                    RetryDecision::GiveUp => None,
                };
                let event = ActivityFailed {
                    scheduled_seq: task.scheduled_seq,
                    attempt: task.attempt,
                    failure,
                    retry_at,
                };
                self.append(&id, vec![event.into()], false);
                match retry_at {
                    Some(at) => {
                        self.timers
                            .insert((at, TimerKey::Retry(id, task.scheduled_seq)), ());
                    }
                    None => self.queue.push(Task::Workflow(id)),
                }
            }
        }
    }
}

/// The entropy the driver gives a workflow task over a history of `len` events: the same
/// for the same workflow and history, so a replay of a prefix can reproduce a live run.
pub fn task_entropy(id: &WorkflowId, len: usize) -> Box<SeededEntropy> {
    Box::new(SeededEntropy::new(
        (len as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ fnv(id.as_str()),
    ))
}

fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

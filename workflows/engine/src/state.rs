//! The executor's per-task state, shared by the context and the futures it hands out.
//!
//! Workflow code runs on one thread, so the state is an `Rc<RefCell<_>>`; every borrow
//! is short and never held across a poll of user code.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::rc::Rc;

use serde_json::Value;

use crate::entropy::Entropy;
use crate::error::{ActivityFailure, ExecError, WorkflowError};
use crate::event::{Event, HistoryEvent};
use crate::ids::{Seq, WorkflowId};
use crate::retry::ActivityOptions;
use crate::time::Timestamp;

pub(crate) type Shared = Rc<RefCell<State>>;

/// A compensation registered by `on_rollback`, in registration order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Registered {
    pub(crate) seq: Seq,
    pub(crate) activity_type: String,
    pub(crate) input: Value,
    pub(crate) options: ActivityOptions,
}

pub(crate) struct State {
    pub(crate) workflow_id: WorkflowId,
    pub(crate) now: Timestamp,

    /// Recorded commands of the current activation not yet matched, in order.
    pub(crate) recorded_run: VecDeque<HistoryEvent>,
    /// New commands may be emitted (the activation is the last and has no recorded run).
    pub(crate) live: bool,
    /// The event that follows the current activation's run, for nondeterminism reports.
    pub(crate) next_recorded: Option<HistoryEvent>,
    pub(crate) next_seq: Seq,
    pub(crate) new_commands: Vec<Event>,
    /// The first nondeterminism found; the task fails with it.
    pub(crate) failure: Option<ExecError>,
    /// Bumped whenever a command is emitted or an input consumed: "something moved".
    pub(crate) progress: u64,

    pub(crate) activity_outcomes: BTreeMap<Seq, Result<Value, ActivityFailure>>,
    pub(crate) timers_fired: BTreeSet<Seq>,
    pub(crate) child_outcomes: BTreeMap<Seq, Result<Value, WorkflowError>>,
    pub(crate) signals: BTreeMap<String, VecDeque<Value>>,
    /// `Some(reason)` once cancellation was requested.
    pub(crate) cancel: Option<Option<String>>,

    pub(crate) compensations: Vec<Registered>,
    pub(crate) keep_on_failure: bool,
    pub(crate) in_rollback: bool,
    pub(crate) patches: BTreeMap<String, bool>,
    pub(crate) entropy: Box<dyn Entropy>,
    /// Set while the executor drops the workflow future: drops then emit nothing.
    pub(crate) tearing_down: bool,
}

/// What `emit` found: the seq the command has, and the recorded event it matched (as
/// the executor keeps it for matching: without the inputs of activities, compensations
/// and children).
pub(crate) struct Emitted {
    pub(crate) seq: Seq,
    pub(crate) recorded: Option<Event>,
}

impl State {
    pub(crate) fn new(workflow_id: WorkflowId, next_seq: Seq, entropy: Box<dyn Entropy>) -> Self {
        Self {
            workflow_id,
            now: Timestamp::EPOCH,
            recorded_run: VecDeque::new(),
            live: false,
            next_recorded: None,
            next_seq,
            new_commands: Vec::new(),
            failure: None,
            progress: 0,
            activity_outcomes: BTreeMap::new(),
            timers_fired: BTreeSet::new(),
            child_outcomes: BTreeMap::new(),
            signals: BTreeMap::new(),
            cancel: None,
            compensations: Vec::new(),
            keep_on_failure: false,
            in_rollback: false,
            patches: BTreeMap::new(),
            entropy,
            tearing_down: false,
        }
    }

    /// Emits a command: matches it against the next recorded command, or appends it as
    /// new when the history has nothing more to say.
    pub(crate) fn emit(&mut self, command: Event) -> Emitted {
        self.progress += 1;
        if let Some(recorded) = self.recorded_run.pop_front() {
            if !recorded.event.same_command(&command) {
                self.fail(ExecError::Nondeterminism {
                    seq: recorded.seq,
                    recorded: recorded.event.describe(),
                    new: command.describe(),
                });
            }
            return Emitted {
                seq: recorded.seq,
                recorded: Some(recorded.event),
            };
        }
        if !self.live {
            let (seq, recorded) = match &self.next_recorded {
                Some(next) => (
                    next.seq,
                    format!(
                        "no further command here (the history continues with {})",
                        next.event.kind()
                    ),
                ),
                None => (self.next_seq, "no further command here".to_owned()),
            };
            self.fail(ExecError::Nondeterminism {
                seq,
                recorded,
                new: command.describe(),
            });
            return Emitted {
                seq,
                recorded: None,
            };
        }
        let seq = self.next_seq;
        self.next_seq = seq.next();
        self.new_commands.push(command);
        Emitted {
            seq,
            recorded: None,
        }
    }

    pub(crate) fn fail(&mut self, error: ExecError) {
        if self.failure.is_none() {
            self.failure = Some(error);
        }
    }

    /// Cancellation applies to waits that are not part of a rollback.
    pub(crate) fn cancelled_for(&self, non_cancellable: bool) -> bool {
        self.cancel.is_some() && !non_cancellable
    }
}

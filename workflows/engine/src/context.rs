//! `WorkflowContext`: the only door from workflow code to the world.
//!
//! Every method either emits a command (matched against history on replay) or reads
//! something recorded (time, signals, results). Nothing here performs I/O.

mod activity;
mod child;
mod join;
mod signal;
mod timer;

use std::fmt;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

pub use activity::{Activity, ActivityCall};
pub use child::{child_id, ChildCall};
pub use join::JoinAll;
pub use signal::{Cancelled, SignalWait};
pub use timer::Sleep;

use crate::event::{
    digest, CompensationRegistered, PatchMarked, SideEffectKind, SideEffectRecorded,
};
use crate::ids::WorkflowId;
use crate::retry::ActivityOptions;
use crate::state::{Registered, Shared};
use crate::time::Timestamp;

/// Handed to every workflow function. Cheap to clone; all clones share one run.
#[derive(Clone)]
pub struct WorkflowContext {
    pub(crate) state: Shared,
}

impl fmt::Debug for WorkflowContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "WorkflowContext({})", self.state.borrow().workflow_id)
    }
}

impl WorkflowContext {
    pub(crate) fn new(state: Shared) -> Self {
        Self { state }
    }

    pub fn workflow_id(&self) -> WorkflowId {
        self.state.borrow().workflow_id.clone()
    }

    /// The time the events that woke the workflow were recorded. Never the wall clock.
    pub fn now(&self) -> Timestamp {
        self.state.borrow().now
    }

    /// Schedules a typed activity; `.await` it for its output.
    pub fn activity<A: Activity>(&self, request: A) -> ActivityCall<A::Output> {
        let options = request.options();
        let call = ActivityCall::new(
            self.clone(),
            A::TYPE.to_owned(),
            to_value(&request),
            options,
        );
        if A::FINISHES_ON_CANCEL {
            call.finishing_on_cancel()
        } else {
            call
        }
    }

    /// Schedules an activity by type name with a JSON input and default options.
    pub fn activity_raw(&self, activity_type: &str, input: Value) -> ActivityCall<Value> {
        ActivityCall::new(
            self.clone(),
            activity_type.to_owned(),
            input,
            ActivityOptions::default(),
        )
    }

    /// A durable timer.
    pub fn sleep(&self, duration: Duration) -> Sleep {
        Sleep::new(self.clone(), duration)
    }

    /// Waits for the next signal `name` and decodes its payload.
    pub fn signal<T: DeserializeOwned>(&self, name: &str) -> SignalWait<T> {
        SignalWait::new(self.clone(), name)
    }

    /// Starts a child workflow and waits for its output.
    pub fn child<I: Serialize>(&self, workflow_type: &str, input: &I) -> ChildCall {
        ChildCall::new(self.clone(), workflow_type.to_owned(), to_value(input))
    }

    /// Runs futures concurrently and returns their outputs in order. Unlike
    /// `futures::join_all`, it polls every unfinished future in index order on every
    /// poll, at any width, so commands get the same seqs in every run.
    pub fn join_all<F: std::future::Future>(
        &self,
        futures: impl IntoIterator<Item = F>,
    ) -> JoinAll<F> {
        JoinAll::new(futures)
    }

    /// A random UUID (version 4), recorded so a replay sees the same one.
    pub fn uuid(&self) -> String {
        let value = self.side_effect(SideEffectKind::Uuid, |bytes| {
            let mut raw = [0u8; 16];
            raw.copy_from_slice(&bytes[..16]);
            raw[6] = (raw[6] & 0x0f) | 0x40;
            raw[8] = (raw[8] & 0x3f) | 0x80;
            let hex = hex::encode(raw);
            Value::from(format!(
                "{}-{}-{}-{}-{}",
                &hex[0..8],
                &hex[8..12],
                &hex[12..16],
                &hex[16..20],
                &hex[20..32]
            ))
        });
        value.as_str().unwrap_or_default().to_owned()
    }

    /// A random number, recorded so a replay sees the same one.
    pub fn random(&self) -> u64 {
        let value = self.side_effect(SideEffectKind::Random, |bytes| {
            let mut raw = [0u8; 8];
            raw.copy_from_slice(&bytes[..8]);
            Value::from(u64::from_le_bytes(raw))
        });
        value.as_u64().unwrap_or_default()
    }

    fn side_effect(&self, kind: SideEffectKind, make: impl FnOnce(&[u8; 16]) -> Value) -> Value {
        let mut state = self.state.borrow_mut();
        let mut bytes = [0u8; 16];
        state.entropy.fill(&mut bytes);
        let fresh = make(&bytes);
        let emitted = state.emit(
            SideEffectRecorded {
                kind,
                value: fresh.clone(),
            }
            .into(),
        );
        match emitted.recorded {
            Some(crate::event::Event::SideEffectRecorded(recorded)) => recorded.value,
            _ => fresh,
        }
    }

    /// Registers the activity that undoes what the workflow just did. If the workflow
    /// fails or is cancelled, registered compensations run newest first; a destroy
    /// workflow can read them from the finished history and run them later.
    pub fn on_rollback<A: Activity>(&self, compensation: A) {
        let input = to_value(&compensation);
        let options = compensation.options();
        let mut state = self.state.borrow_mut();
        let emitted = state.emit(
            CompensationRegistered {
                activity_type: A::TYPE.to_owned(),
                input_digest: digest(&input),
                input: input.clone(),
                options: options.clone(),
            }
            .into(),
        );
        state.compensations.push(Registered {
            seq: emitted.seq,
            activity_type: A::TYPE.to_owned(),
            input,
            options,
        });
    }

    /// With `true`, a failure leaves what was created in place (status `failed`, the
    /// history lists what was kept) instead of rolling back. A cancel still rolls back.
    pub fn keep_on_failure(&self, keep: bool) {
        self.state.borrow_mut().keep_on_failure = keep;
    }

    /// True once cancellation was requested.
    pub fn is_cancelled(&self) -> bool {
        self.state.borrow().cancel.is_some()
    }

    /// Resolves when cancellation is requested.
    pub fn cancelled(&self) -> Cancelled {
        Cancelled::new(self.clone())
    }

    /// Versioning: `true` in runs that reached this point with the new code (a marker is
    /// recorded), `false` when replaying a history written before the change.
    pub fn patched(&self, patch_id: &str) -> bool {
        let mut state = self.state.borrow_mut();
        if let Some(known) = state.patches.get(patch_id) {
            return *known;
        }
        let marked = matches!(
            state.recorded_run.front().map(|e| &e.event),
            Some(crate::event::Event::PatchMarked(p)) if p.patch_id == patch_id
        );
        let value = if marked || (state.live && state.recorded_run.is_empty()) {
            state.emit(
                PatchMarked {
                    patch_id: patch_id.to_owned(),
                }
                .into(),
            );
            true
        } else {
            false
        };
        state.patches.insert(patch_id.to_owned(), value);
        value
    }
}

/// Requests and inputs are plain data; a value that cannot become JSON is a bug in the
/// request type, and shows up as `null` (and a changed digest) rather than a panic.
fn to_value<T: Serialize + ?Sized>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

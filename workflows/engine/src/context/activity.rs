//! Activities as workflow code calls them.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use super::WorkflowContext;
use crate::error::{ActivityFailure, WorkflowError};
use crate::event::{digest, ActivityCancelRequested, ActivityScheduled};
use crate::ids::Seq;
use crate::retry::ActivityOptions;

/// A typed activity request: its stable type name, its output, and default options.
pub trait Activity: Serialize {
    /// The name activity workers register the implementation under.
    const TYPE: &'static str;
    type Output: DeserializeOwned;

    fn options(&self) -> ActivityOptions {
        ActivityOptions::default()
    }

    /// True for calls that create something. A cancel that arrives while such a call
    /// runs waits for its outcome instead of abandoning it, so the workflow registers
    /// the compensation of what it made; the cancel takes effect at the next call.
    /// (An abandoned create could finish after the rollback and leave its resource.)
    const FINISHES_ON_CANCEL: bool = false;
}

enum Phase {
    NotStarted,
    Waiting(Seq),
    Done,
}

/// An activity call: schedules on first poll (that is when its seq is taken), then
/// waits for the final outcome. Dropping it while it waits requests cancellation.
#[must_use = "an activity runs only when awaited"]
pub struct ActivityCall<O> {
    ctx: WorkflowContext,
    activity_type: String,
    input: Value,
    options: ActivityOptions,
    compensation_of: Option<Seq>,
    /// A cancel never stops it (a compensation).
    non_cancellable: bool,
    /// A cancel does not start it, but once running it is waited for.
    finish_on_cancel: bool,
    phase: Phase,
    _output: PhantomData<fn() -> O>,
}

impl<O> ActivityCall<O> {
    pub(crate) fn new(
        ctx: WorkflowContext,
        activity_type: String,
        input: Value,
        options: ActivityOptions,
    ) -> Self {
        let non_cancellable = ctx.state.borrow().in_rollback;
        Self {
            ctx,
            activity_type,
            input,
            options,
            compensation_of: None,
            non_cancellable,
            finish_on_cancel: false,
            phase: Phase::NotStarted,
            _output: PhantomData,
        }
    }

    /// A cancel waits for this call's outcome (see [`Activity::FINISHES_ON_CANCEL`]).
    pub(crate) fn finishing_on_cancel(mut self) -> Self {
        self.finish_on_cancel = true;
        self
    }

    pub(crate) fn compensating(mut self, registered_seq: Seq) -> Self {
        self.compensation_of = Some(registered_seq);
        self.non_cancellable = true;
        self
    }

    /// Overrides the options of this call (retry policy, timeouts, task queue).
    pub fn with_options(mut self, options: ActivityOptions) -> Self {
        self.options = options;
        self
    }

    fn failure(&self, seq: Seq, failure: ActivityFailure) -> WorkflowError {
        WorkflowError::Activity {
            activity_type: self.activity_type.clone(),
            seq,
            failure,
        }
    }
}

impl<O> Unpin for ActivityCall<O> {}

impl<O: DeserializeOwned> Future for ActivityCall<O> {
    type Output = Result<O, WorkflowError>;

    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if let Phase::NotStarted = this.phase {
            let mut state = this.ctx.state.borrow_mut();
            if state.cancelled_for(this.non_cancellable) {
                this.phase = Phase::Done;
                return Poll::Ready(Err(WorkflowError::Cancelled));
            }
            // The call needs neither its input nor its options again: they move into
            // the command (a replay matches thousands of them).
            let input = std::mem::take(&mut this.input);
            let emitted = state.emit(
                ActivityScheduled {
                    activity_type: this.activity_type.clone(),
                    input_digest: digest(&input),
                    input,
                    options: std::mem::take(&mut this.options),
                    compensation_of: this.compensation_of,
                }
                .into(),
            );
            this.phase = Phase::Waiting(emitted.seq);
        }
        let Phase::Waiting(seq) = this.phase else {
            return Poll::Pending;
        };
        let mut state = this.ctx.state.borrow_mut();
        // Decoded from the recorded result in place, not from a copy of it.
        let outcome = state
            .activity_outcomes
            .get(&seq)
            .map(|outcome| match outcome {
                Ok(result) => O::deserialize(result).map_err(|error| {
                    ActivityFailure::permanent("InvalidResult", error.to_string())
                }),
                Err(failure) => Err(failure.clone()),
            });
        if let Some(outcome) = outcome {
            state.progress += 1;
            drop(state);
            this.phase = Phase::Done;
            return Poll::Ready(outcome.map_err(|failure| this.failure(seq, failure)));
        }
        if state.cancelled_for(this.non_cancellable || this.finish_on_cancel) {
            state.emit(ActivityCancelRequested { scheduled_seq: seq }.into());
            this.phase = Phase::Done;
            return Poll::Ready(Err(WorkflowError::Cancelled));
        }
        Poll::Pending
    }
}

impl<O> Drop for ActivityCall<O> {
    fn drop(&mut self) {
        if let Phase::Waiting(seq) = self.phase {
            if let Ok(mut state) = self.ctx.state.try_borrow_mut() {
                if !state.tearing_down {
                    state.emit(ActivityCancelRequested { scheduled_seq: seq }.into());
                }
            }
        }
    }
}

impl<O> std::fmt::Debug for ActivityCall<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ActivityCall({})", self.activity_type)
    }
}

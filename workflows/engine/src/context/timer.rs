//! Durable timers.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use super::WorkflowContext;
use crate::error::WorkflowError;
use crate::event::{TimerCancelled, TimerStarted};
use crate::ids::Seq;

enum Phase {
    NotStarted,
    Waiting(Seq),
    Done,
}

/// `ctx.sleep(d)`: starts a durable timer on first poll. Dropping it while it waits
/// cancels the timer.
#[must_use = "a timer starts only when awaited"]
pub struct Sleep {
    ctx: WorkflowContext,
    duration: Duration,
    non_cancellable: bool,
    phase: Phase,
}

impl Sleep {
    pub(crate) fn new(ctx: WorkflowContext, duration: Duration) -> Self {
        let non_cancellable = ctx.state.borrow().in_rollback;
        Self {
            ctx,
            duration,
            non_cancellable,
            phase: Phase::NotStarted,
        }
    }
}

impl Future for Sleep {
    type Output = Result<(), WorkflowError>;

    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let mut state = this.ctx.state.borrow_mut();
        if let Phase::NotStarted = this.phase {
            if state.cancelled_for(this.non_cancellable) {
                this.phase = Phase::Done;
                return Poll::Ready(Err(WorkflowError::Cancelled));
            }
            let duration_ms = u64::try_from(this.duration.as_millis()).unwrap_or(u64::MAX);
            let fire_at = state.now.after(this.duration);
            let emitted = state.emit(
                TimerStarted {
                    duration_ms,
                    fire_at,
                }
                .into(),
            );
            this.phase = Phase::Waiting(emitted.seq);
        }
        let Phase::Waiting(seq) = this.phase else {
            return Poll::Pending;
        };
        if state.timers_fired.contains(&seq) {
            state.progress += 1;
            this.phase = Phase::Done;
            return Poll::Ready(Ok(()));
        }
        if state.cancelled_for(this.non_cancellable) {
            state.emit(TimerCancelled { started_seq: seq }.into());
            this.phase = Phase::Done;
            return Poll::Ready(Err(WorkflowError::Cancelled));
        }
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Phase::Waiting(seq) = self.phase {
            if let Ok(mut state) = self.ctx.state.try_borrow_mut() {
                if !state.tearing_down {
                    state.emit(TimerCancelled { started_seq: seq }.into());
                }
            }
        }
    }
}

impl std::fmt::Debug for Sleep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Sleep({:?})", self.duration)
    }
}

//! Waiting for signals and for cancellation.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use serde::de::DeserializeOwned;

use super::WorkflowContext;
use crate::error::WorkflowError;

/// `ctx.signal::<T>(name)`: the next signal of that name not yet taken. Signals that
/// arrive before anyone waits are buffered in arrival order.
#[must_use = "a signal is taken only when awaited"]
pub struct SignalWait<T> {
    ctx: WorkflowContext,
    name: String,
    non_cancellable: bool,
    _payload: PhantomData<fn() -> T>,
}

impl<T> SignalWait<T> {
    pub(crate) fn new(ctx: WorkflowContext, name: &str) -> Self {
        let non_cancellable = ctx.state.borrow().in_rollback;
        Self {
            ctx,
            name: name.to_owned(),
            non_cancellable,
            _payload: PhantomData,
        }
    }
}

impl<T> Unpin for SignalWait<T> {}

impl<T: DeserializeOwned> Future for SignalWait<T> {
    type Output = Result<T, WorkflowError>;

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.ctx.state.borrow_mut();
        if let Some(payload) = state
            .signals
            .get_mut(&self.name)
            .and_then(|queue| queue.pop_front())
        {
            state.progress += 1;
            return Poll::Ready(serde_json::from_value(payload).map_err(|error| {
                WorkflowError::invalid_input(format!("signal {}: {error}", self.name))
            }));
        }
        if state.cancelled_for(self.non_cancellable) {
            return Poll::Ready(Err(WorkflowError::Cancelled));
        }
        Poll::Pending
    }
}

/// `ctx.cancelled()`: resolves once cancellation is requested, with its reason.
#[must_use = "does nothing unless awaited"]
pub struct Cancelled {
    ctx: WorkflowContext,
}

impl Cancelled {
    pub(crate) fn new(ctx: WorkflowContext) -> Self {
        Self { ctx }
    }
}

impl Future for Cancelled {
    type Output = Option<String>;

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        match &self.ctx.state.borrow().cancel {
            Some(reason) => Poll::Ready(reason.clone()),
            None => Poll::Pending,
        }
    }
}

impl<T> std::fmt::Debug for SignalWait<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SignalWait({})", self.name)
    }
}

impl std::fmt::Debug for Cancelled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Cancelled")
    }
}

//! The saga: what happens after the workflow function returns.
//!
//! Success records `WorkflowCompleted`. A failure or a cancel runs the registered
//! compensations newest first, each a retried activity that cancellation cannot stop,
//! and ends the workflow as the status table of DESIGN.md §2 says:
//!
//! | outcome of the body | compensations | end |
//! |---|---|---|
//! | error, none registered (or `keep_on_failure`) | — | `WorkflowFailed` (kept ones listed) |
//! | error | all succeed | `WorkflowCompensated` |
//! | cancelled | all succeed (or none) | `WorkflowCancelled` |
//! | error or cancelled | some fail after retries | `WorkflowFailed` listing exactly those |

use serde_json::Value;

use crate::context::{ActivityCall, WorkflowContext};
use crate::error::WorkflowError;
use crate::event::{
    Event, LeftBehind, RollbackStarted, WorkflowCancelled, WorkflowCompensated, WorkflowCompleted,
    WorkflowFailed,
};

/// Runs the workflow body, then the saga, then records the terminal event.
pub(crate) async fn run_to_end(ctx: WorkflowContext, body: crate::registry::WorkflowFuture) {
    let result = body.await;
    let terminal = match result {
        Ok(output) => WorkflowCompleted { output }.into(),
        Err(error) => roll_back(&ctx, error).await,
    };
    ctx.state.borrow_mut().emit(terminal);
}

async fn roll_back(ctx: &WorkflowContext, error: WorkflowError) -> Event {
    let (cancel, keep, registered) = {
        let state = ctx.state.borrow();
        (
            state.cancel.clone(),
            state.keep_on_failure,
            state.compensations.clone(),
        )
    };
    let error = if cancel.is_some() {
        WorkflowError::Cancelled
    } else {
        error
    };
    let newest_first: Vec<_> = registered.into_iter().rev().collect();

    if newest_first.is_empty() {
        return match cancel {
            Some(reason) => WorkflowCancelled { reason }.into(),
            None => WorkflowFailed {
                error,
                left: Vec::new(),
            }
            .into(),
        };
    }
    if keep && cancel.is_none() {
        let left = newest_first
            .into_iter()
            .map(|c| LeftBehind {
                registered_seq: c.seq,
                activity_type: c.activity_type,
                input: c.input,
                reason: "kept (keep_on_failure)".into(),
            })
            .collect();
        return WorkflowFailed { error, left }.into();
    }

    {
        let mut state = ctx.state.borrow_mut();
        state.in_rollback = true;
        let compensations = u32::try_from(newest_first.len()).unwrap_or(u32::MAX);
        state.emit(
            RollbackStarted {
                cause: error.clone(),
                compensations,
            }
            .into(),
        );
    }
    let mut left = Vec::new();
    for compensation in newest_first {
        let call: ActivityCall<Value> = ActivityCall::new(
            ctx.clone(),
            compensation.activity_type.clone(),
            compensation.input.clone(),
            compensation.options.clone(),
        )
        .compensating(compensation.seq);
        if let Err(failure) = call.await {
            left.push(LeftBehind {
                registered_seq: compensation.seq,
                activity_type: compensation.activity_type,
                input: compensation.input,
                reason: failure.to_string(),
            });
        }
    }
    match (left.is_empty(), cancel) {
        (true, Some(reason)) => WorkflowCancelled { reason }.into(),
        (true, None) => WorkflowCompensated { cause: error }.into(),
        (false, _) => WorkflowFailed { error, left }.into(),
    }
}

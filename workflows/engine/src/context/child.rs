//! Child workflows.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::WorkflowContext;
use crate::error::WorkflowError;
use crate::event::{digest, ChildStarted, Event};
use crate::ids::{Seq, WorkflowId};

enum Phase {
    NotStarted,
    Waiting(Seq),
    Done,
}

/// `ctx.child(type, input)`: starts the child on first poll and waits for its output.
/// Cancelling the parent stops the wait; the child itself runs on.
#[must_use = "a child starts only when awaited"]
pub struct ChildCall {
    ctx: WorkflowContext,
    workflow_type: String,
    input: Value,
    non_cancellable: bool,
    phase: Phase,
}

impl ChildCall {
    pub(crate) fn new(ctx: WorkflowContext, workflow_type: String, input: Value) -> Self {
        let non_cancellable = ctx.state.borrow().in_rollback;
        Self {
            ctx,
            workflow_type,
            input,
            non_cancellable,
            phase: Phase::NotStarted,
        }
    }
}

/// `<parent>-c<seq>`, or a hashed prefix when the parent id is too long for that.
pub fn child_id(parent: &WorkflowId, seq: Seq) -> WorkflowId {
    let suffix = format!("-c{seq}");
    let plain = format!("{parent}{suffix}");
    let id = if plain.len() <= WorkflowId::MAX_LEN {
        plain
    } else {
        let hash = crate::lower_hex::lower_hex(&Sha256::digest(parent.as_str().as_bytes()));
        format!("{}-{}{suffix}", &parent.as_str()[..64], &hash[..16])
    };
    WorkflowId::new(id).unwrap_or_else(|_| parent.clone())
}

impl Future for ChildCall {
    type Output = Result<Value, WorkflowError>;

    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let mut state = this.ctx.state.borrow_mut();
        if let Phase::NotStarted = this.phase {
            if state.cancelled_for(this.non_cancellable) {
                this.phase = Phase::Done;
                return Poll::Ready(Err(WorkflowError::Cancelled));
            }
            let planned = child_id(&state.workflow_id, state.next_seq);
            let emitted = state.emit(Event::from(ChildStarted {
                child_id: planned,
                workflow_type: this.workflow_type.clone(),
                input_digest: digest(&this.input),
                input: this.input.clone(),
            }));
            this.phase = Phase::Waiting(emitted.seq);
        }
        let Phase::Waiting(seq) = this.phase else {
            return Poll::Pending;
        };
        if let Some(outcome) = state.child_outcomes.get(&seq).cloned() {
            state.progress += 1;
            this.phase = Phase::Done;
            return Poll::Ready(outcome);
        }
        if state.cancelled_for(this.non_cancellable) {
            this.phase = Phase::Done;
            return Poll::Ready(Err(WorkflowError::Cancelled));
        }
        Poll::Pending
    }
}

impl std::fmt::Debug for ChildCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ChildCall({})", self.workflow_type)
    }
}

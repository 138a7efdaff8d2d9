//! Deterministic fan-out.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Polls every unfinished future in index order on each poll and yields all outputs in
/// order. Wakers are not consulted, so the order commands are emitted in — and the seqs
/// they get — is the same in every run, at any width.
#[must_use = "futures do nothing unless awaited"]
pub struct JoinAll<F: Future> {
    slots: Vec<Slot<F>>,
}

enum Slot<F: Future> {
    Running(Pin<Box<F>>),
    Done(Option<F::Output>),
}

impl<F: Future> JoinAll<F> {
    pub(crate) fn new(futures: impl IntoIterator<Item = F>) -> Self {
        Self {
            slots: futures
                .into_iter()
                .map(|f| Slot::Running(Box::pin(f)))
                .collect(),
        }
    }
}

impl<F: Future> Unpin for JoinAll<F> {}

impl<F: Future> Future for JoinAll<F> {
    type Output = Vec<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut all_done = true;
        for slot in &mut self.slots {
            if let Slot::Running(future) = slot {
                match future.as_mut().poll(cx) {
                    Poll::Ready(output) => *slot = Slot::Done(Some(output)),
                    Poll::Pending => all_done = false,
                }
            }
        }
        if !all_done {
            return Poll::Pending;
        }
        Poll::Ready(
            self.slots
                .iter_mut()
                .filter_map(|slot| match slot {
                    Slot::Done(output) => output.take(),
                    Slot::Running(_) => None,
                })
                .collect(),
        )
    }
}

impl<F: Future> std::fmt::Debug for JoinAll<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "JoinAll({} futures)", self.slots.len())
    }
}

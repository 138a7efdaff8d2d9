//! One step of a workflow at a time in this process.
//!
//! The inputs of one workflow often arrive together: the ten outcomes of a fan-out land
//! within milliseconds. Stepped side by side, only the first finds the history in the
//! cache; the others read it from the database, lose the race to append, and run again
//! holding the workflow's row lock — a re-read and a queue inside Postgres per outcome
//! (measured in the soak: ~160 conflicts a second, lock waits of 24–39 ms). Queued here
//! instead, each step starts from the history its predecessor cached and appends
//! without reading: one statement, no conflict.
//!
//! Steps of other processes still race through the store's optimistic check; this only
//! keeps a process from racing itself.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use hcpflow_engine::WorkflowId;
use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

/// The workflows being stepped in this process, each with its queue of waiting steps
/// (a fair mutex: steps go in the order they arrived). An entry lives as long as a step
/// holds or waits for it, so the map holds no more than the steps in flight.
#[derive(Debug, Default)]
pub struct StepGate {
    turns: Mutex<HashMap<WorkflowId, Arc<AsyncMutex<()>>>>,
}

/// A step's turn: the workflow's next step waits until it is dropped.
#[derive(Debug)]
pub struct StepTurn<'a> {
    gate: &'a StepGate,
    id: WorkflowId,
    turn: Option<OwnedMutexGuard<()>>,
}

impl StepGate {
    /// Waits for the steps of `id` that came before, then holds the workflow's turn.
    pub async fn enter(&self, id: &WorkflowId) -> StepTurn<'_> {
        let queue = {
            let mut turns = self
                .turns
                .lock()
                .unwrap_or_else(|poison| poison.into_inner());
            turns.entry(id.clone()).or_default().clone()
        };
        // Made before waiting, so that a step given up while it waits (its future
        // dropped) still removes an entry nobody else holds.
        let mut turn = StepTurn {
            gate: self,
            id: id.clone(),
            turn: None,
        };
        turn.turn = Some(queue.lock_owned().await);
        turn
    }

    /// Workflows with a step running or waiting here.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.turns.lock().map_or(0, |turns| turns.len())
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Drop for StepTurn<'_> {
    fn drop(&mut self) {
        let mut turns = self
            .gate
            .turns
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        drop(self.turn.take());
        // Every other holder of the queue cloned it under this lock: a count of one is
        // the map's own, and nobody can be about to wait on it.
        if turns
            .get(&self.id)
            .is_some_and(|queue| Arc::strong_count(queue) == 1)
        {
            turns.remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    fn id(name: &str) -> WorkflowId {
        WorkflowId::new(name).unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn steps_of_one_workflow_take_turns_and_leave_nothing_behind() {
        let gate = Arc::new(StepGate::default());
        let inside = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let steps: Vec<_> = (0..20)
            .map(|_| {
                let (gate, inside, most) = (gate.clone(), inside.clone(), most.clone());
                tokio::spawn(async move {
                    let _turn = gate.enter(&id("wf-a")).await;
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    inside.fetch_sub(1, Ordering::SeqCst);
                })
            })
            .collect();
        for step in steps {
            step.await.unwrap();
        }
        assert_eq!(most.load(Ordering::SeqCst), 1);
        assert!(gate.is_empty());
    }

    #[tokio::test]
    async fn steps_of_different_workflows_do_not_wait_for_each_other() {
        let gate = StepGate::default();
        let a = gate.enter(&id("wf-a")).await;
        let b = tokio::time::timeout(Duration::from_secs(1), gate.enter(&id("wf-b")))
            .await
            .expect("another workflow's step waited");
        assert_eq!(gate.len(), 2);
        drop(a);
        assert_eq!(gate.len(), 1);
        drop(b);
        assert!(gate.is_empty());
    }

    #[tokio::test]
    async fn a_step_given_up_while_waiting_leaves_the_queue_usable() {
        let gate = StepGate::default();
        let first = gate.enter(&id("wf-a")).await;
        let waited = tokio::time::timeout(Duration::from_millis(20), gate.enter(&id("wf-a"))).await;
        assert!(waited.is_err());
        drop(first);
        // Queued behind a holder that leaves, then given up before it ran.
        let a = id("wf-a");
        let holder = gate.enter(&a).await;
        let mut queued = Box::pin(gate.enter(&a));
        assert!(tokio::time::timeout(Duration::ZERO, &mut queued)
            .await
            .is_err());
        drop(holder);
        drop(queued);
        assert!(gate.is_empty(), "a given-up step left its workflow's entry");
        let again = tokio::time::timeout(Duration::from_secs(1), gate.enter(&id("wf-a")))
            .await
            .expect("the queue stayed blocked");
        drop(again);
        assert!(gate.is_empty());
    }
}

//! Heads this process computed itself: for a workflow whose every event was appended
//! here (created here, each step decided on the history this process cached from its
//! own appends, or on a fresh read that found exactly the head this process cached),
//! the journal remembers the head it committed — the seq, the chain hash
//! it computed over the bytes it wrote, and whether that event ends the workflow.
//!
//! The checkpointer signs such a head without reading the history back: what it signs
//! is the hash of the bytes this process wrote, so an event changed in the database
//! meanwhile is not signed over — `audit verify` names it against the signed head. It
//! vouches only for the exact head the index row shows; any other (an append by another
//! process, a history this process read from the database with a head it had not
//! cached as its own, an index row moved behind the engine's back) is verified in full.
//!
//! Bounded: at most [`CAPACITY`] heads, roughly the oldest evicted first (an evicted
//! head costs one verification). Recording is off until the process's
//! checkpointer turns it on, so a process without one keeps nothing.

use std::sync::atomic::{AtomicBool, Ordering};

use hcpflow_engine::{ChainHash, Seq, WorkflowId};
use hcpflow_eventstore::{Appended, UnsignedHead};
use quick_cache::sync::Cache;

/// Heads remembered at most: the workflows in flight and those ended in the last
/// seconds, awaiting their signature, with room to spare.
const CAPACITY: usize = 65_536;

/// A head appended by this process on a chain it wrote whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Witnessed {
    seq: Seq,
    hash: ChainHash,
    /// Whether the event at `seq` ends the workflow.
    ends: bool,
}

#[derive(Debug)]
pub struct WitnessedHeads {
    enabled: AtomicBool,
    heads: Cache<WorkflowId, Witnessed>,
}

impl Default for WitnessedHeads {
    fn default() -> Self {
        Self::with_capacity(CAPACITY)
    }
}

impl WitnessedHeads {
    fn with_capacity(capacity: usize) -> Self {
        Self {
            enabled: AtomicBool::new(false),
            heads: Cache::new(capacity),
        }
    }

    /// Starts recording (the checkpointer of this process is running).
    pub fn enable(&self) {
        self.enabled.store(true, Ordering::Relaxed);
    }

    /// Records the head `appended` committed: `whole_chain` says whether this process
    /// wrote every event before it too. A head on a chain it did not write whole is
    /// forgotten instead.
    pub fn record(&self, id: &WorkflowId, appended: &Appended, whole_chain: bool) {
        if !self.enabled.load(Ordering::Relaxed) {
            return;
        }
        let last = appended.events.last();
        match (whole_chain, last) {
            (true, Some(last)) => self.heads.insert(
                id.clone(),
                Witnessed {
                    seq: last.seq,
                    hash: appended.head_hash,
                    ends: hcpflow_engine::Event::is_terminal_kind(&last.event_type),
                },
            ),
            _ => self.forget(id),
        }
    }

    pub fn forget(&self, id: &WorkflowId) {
        self.heads.remove(id);
    }

    /// Whether `head` is exactly the head this process wrote, its chain whole, and —
    /// for an ended workflow — its end event.
    pub fn vouches_for(&self, head: &UnsignedHead) -> bool {
        self.heads.get(&head.workflow_id).is_some_and(|witnessed| {
            witnessed.seq == head.seq
                && witnessed.hash == head.head_hash
                && (witnessed.ends || !head.status.is_terminal())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hcpflow_engine::WorkflowStatus;
    use hcpflow_eventstore::StoredEvent;

    fn id(name: &str) -> WorkflowId {
        WorkflowId::new(name).unwrap()
    }

    /// An append whose last event, of `kind`, is `seq` with chain hash `hash`.
    fn appended(workflow: &WorkflowId, seq: u64, kind: &str, hash: ChainHash) -> Appended {
        let event = StoredEvent {
            workflow_id: workflow.clone(),
            seq: Seq::new(seq).unwrap(),
            event_type: kind.into(),
            recorded_at: chrono::Utc::now(),
            body: b"{}".to_vec(),
            prev_hash: ChainHash::GENESIS,
            hash,
        };
        Appended {
            events: vec![event],
            next_seq: Seq::new(seq + 1).unwrap(),
            head_hash: hash,
            outbox: Vec::new(),
            status: None,
            promoted: None,
            events_range_refused: None,
            tenant: hcpflow_engine::TenantId::default_tenant(),
        }
    }

    fn head(
        workflow: &WorkflowId,
        seq: u64,
        hash: ChainHash,
        status: WorkflowStatus,
    ) -> UnsignedHead {
        UnsignedHead {
            workflow_id: workflow.clone(),
            seq: Seq::new(seq).unwrap(),
            head_hash: hash,
            status,
        }
    }

    #[test]
    fn only_the_exact_head_written_here_is_vouched_for() {
        let heads = WitnessedHeads::default();
        heads.enable();
        let w = id("w1");
        let hash = ChainHash::GENESIS.next(b"x");
        heads.record(&w, &appended(&w, 5, "WorkflowCompleted", hash), true);
        assert!(heads.vouches_for(&head(&w, 5, hash, WorkflowStatus::Completed)));
        // Another seq, another hash, another workflow: verified in full.
        assert!(!heads.vouches_for(&head(&w, 4, hash, WorkflowStatus::Completed)));
        let other = ChainHash::GENESIS.next(b"y");
        assert!(!heads.vouches_for(&head(&w, 5, other, WorkflowStatus::Completed)));
        assert!(!heads.vouches_for(&head(&id("w2"), 5, hash, WorkflowStatus::Completed)));
        heads.forget(&w);
        assert!(!heads.vouches_for(&head(&w, 5, hash, WorkflowStatus::Completed)));
    }

    #[test]
    fn an_ended_workflow_is_vouched_for_only_at_its_end_event() {
        let heads = WitnessedHeads::default();
        heads.enable();
        let w = id("w1");
        let hash = ChainHash::GENESIS.next(b"x");
        heads.record(&w, &appended(&w, 3, "ActivityScheduled", hash), true);
        assert!(heads.vouches_for(&head(&w, 3, hash, WorkflowStatus::Running)));
        assert!(!heads.vouches_for(&head(&w, 3, hash, WorkflowStatus::Completed)));
    }

    #[test]
    fn a_chain_not_written_whole_here_forgets_the_head() {
        let heads = WitnessedHeads::default();
        heads.enable();
        let w = id("w1");
        let first = ChainHash::GENESIS.next(b"x");
        heads.record(&w, &appended(&w, 3, "ActivityScheduled", first), true);
        let second = first.next(b"y");
        heads.record(&w, &appended(&w, 4, "ActivityCompleted", second), false);
        assert!(!heads.vouches_for(&head(&w, 3, first, WorkflowStatus::Running)));
        assert!(!heads.vouches_for(&head(&w, 4, second, WorkflowStatus::Running)));
    }

    #[test]
    fn nothing_is_kept_until_enabled_and_the_count_is_bounded() {
        let heads = WitnessedHeads::with_capacity(8);
        let w = id("w0");
        let hash = ChainHash::GENESIS.next(b"x");
        heads.record(&w, &appended(&w, 1, "ActivityScheduled", hash), true);
        assert!(!heads.vouches_for(&head(&w, 1, hash, WorkflowStatus::Running)));
        heads.enable();
        for n in 0..100 {
            let w = id(&format!("w{n}"));
            heads.record(&w, &appended(&w, 1, "ActivityScheduled", hash), true);
        }
        assert!(heads.heads.len() <= 8, "{} kept", heads.heads.len());
    }
}

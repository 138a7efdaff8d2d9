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
//! A step of a workflow (a start too) is marked *in flight* from before it reads or
//! appends until the head it appended is recorded ([`WitnessedHeads::step_in_flight`]). Its
//! commit is visible to the checkpointer's scan a moment before the step records the
//! head; a head found in that moment is left for the next scan
//! ([`Vouch::StepInFlight`]) rather than read back and, on a history changed behind
//! the engine's back, refused for good. A head recorded here is signed whatever runs.
//!
//! Bounded: at most [`CAPACITY`] heads, roughly the oldest evicted first (an evicted
//! head costs one verification). Recording is off unless the process runs a
//! checkpointer (the server turns it on before any role starts), so a process without
//! one keeps nothing.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

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

/// What this process can say of a head the checkpointer found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vouch {
    /// This process wrote it, on a chain it wrote whole: signed without a read.
    Witnessed,
    /// A step of the workflow is in flight here: the head may be one it appended and
    /// has not recorded yet. The next scan decides.
    StepInFlight,
    /// Nothing known: the chain is read back and verified.
    Unknown,
}

#[derive(Debug)]
pub struct WitnessedHeads {
    enabled: AtomicBool,
    heads: Cache<WorkflowId, Witnessed>,
    /// Steps (starts too) in flight, by workflow: a count, though the step gate keeps
    /// a workflow's steps in this process from overlapping, so that nothing here relies
    /// on it.
    in_flight: Mutex<HashMap<WorkflowId, u32>>,
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
            in_flight: Mutex::new(HashMap::new()),
        }
    }

    /// Starts recording (this process runs a checkpointer).
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

    /// Marks a step of `id` in flight until the returned guard drops: hold it from
    /// before the step reads or appends until the head it appended is recorded. Marked
    /// whether or not recording is on yet, so that a step that began before the
    /// checkpointer started is covered too.
    pub fn step_in_flight<'a>(&'a self, id: &WorkflowId) -> InFlight<'a> {
        let mut in_flight = self.in_flight();
        match in_flight.get_mut(id) {
            Some(count) => *count += 1,
            None => {
                in_flight.insert(id.clone(), 1);
            }
        }
        InFlight {
            heads: self,
            id: id.clone(),
        }
    }

    /// Whether `head` is exactly the head this process wrote, its chain whole, and —
    /// for an ended workflow — its end event; or may be one it has yet to record.
    pub fn vouch(&self, head: &UnsignedHead) -> Vouch {
        // Both looked at under the mark's lock. A step records its head before its
        // mark ends, so a head committed before this scan read it is either recorded
        // here or still marked; and an exact match is safe to sign whatever runs now.
        let in_flight = self.in_flight();
        let witnessed = self.heads.get(&head.workflow_id).is_some_and(|witnessed| {
            witnessed.seq == head.seq
                && witnessed.hash == head.head_hash
                && (witnessed.ends || !head.status.is_terminal())
        });
        if witnessed {
            Vouch::Witnessed
        } else if in_flight.contains_key(&head.workflow_id) {
            Vouch::StepInFlight
        } else {
            Vouch::Unknown
        }
    }

    fn in_flight(&self) -> std::sync::MutexGuard<'_, HashMap<WorkflowId, u32>> {
        // The map is consistent at every unlock: a panic elsewhere cannot tear it.
        self.in_flight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A step in flight (see [`WitnessedHeads::step_in_flight`]). Dropping it ends the
/// mark whatever became of the step: one whose append failed leaves the head it found,
/// which the index row still shows, or — its commit unknown — a head the checkpointer
/// reads back.
#[derive(Debug)]
pub struct InFlight<'a> {
    heads: &'a WitnessedHeads,
    id: WorkflowId,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut in_flight = self.heads.in_flight();
        if let Some(count) = in_flight.get_mut(&self.id) {
            *count -= 1;
            if *count == 0 {
                in_flight.remove(&self.id);
            }
        }
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

    /// Heads recorded, with workflow `w1`'s head at seq 3 (its hash returned).
    fn recording_with_head_at_3() -> (WitnessedHeads, WorkflowId, ChainHash) {
        let heads = WitnessedHeads::default();
        heads.enable();
        let w = id("w1");
        let first = ChainHash::GENESIS.next(b"x");
        heads.record(&w, &appended(&w, 3, "ActivityScheduled", first), true);
        (heads, w, first)
    }

    fn vouched(heads: &WitnessedHeads, head: &UnsignedHead) -> bool {
        heads.vouch(head) == Vouch::Witnessed
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
        assert!(vouched(
            &heads,
            &head(&w, 5, hash, WorkflowStatus::Completed)
        ));
        // Another seq, another hash, another workflow: verified in full.
        assert!(!vouched(
            &heads,
            &head(&w, 4, hash, WorkflowStatus::Completed)
        ));
        let other = ChainHash::GENESIS.next(b"y");
        assert!(!vouched(
            &heads,
            &head(&w, 5, other, WorkflowStatus::Completed)
        ));
        assert!(!vouched(
            &heads,
            &head(&id("w2"), 5, hash, WorkflowStatus::Completed)
        ));
        heads.forget(&w);
        assert!(!vouched(
            &heads,
            &head(&w, 5, hash, WorkflowStatus::Completed)
        ));
    }

    #[test]
    fn an_ended_workflow_is_vouched_for_only_at_its_end_event() {
        let heads = WitnessedHeads::default();
        heads.enable();
        let w = id("w1");
        let hash = ChainHash::GENESIS.next(b"x");
        heads.record(&w, &appended(&w, 3, "ActivityScheduled", hash), true);
        assert!(vouched(&heads, &head(&w, 3, hash, WorkflowStatus::Running)));
        assert!(!vouched(
            &heads,
            &head(&w, 3, hash, WorkflowStatus::Completed)
        ));
    }

    #[test]
    fn a_chain_not_written_whole_here_forgets_the_head() {
        let (heads, w, first) = recording_with_head_at_3();
        let second = first.next(b"y");
        heads.record(&w, &appended(&w, 4, "ActivityCompleted", second), false);
        assert!(!vouched(
            &heads,
            &head(&w, 3, first, WorkflowStatus::Running)
        ));
        assert!(!vouched(
            &heads,
            &head(&w, 4, second, WorkflowStatus::Running)
        ));
    }

    #[test]
    fn nothing_is_kept_until_enabled_and_the_count_is_bounded() {
        let heads = WitnessedHeads::with_capacity(8);
        let w = id("w0");
        let hash = ChainHash::GENESIS.next(b"x");
        heads.record(&w, &appended(&w, 1, "ActivityScheduled", hash), true);
        assert!(!vouched(
            &heads,
            &head(&w, 1, hash, WorkflowStatus::Running)
        ));
        heads.enable();
        for n in 0..100 {
            let w = id(&format!("w{n}"));
            heads.record(&w, &appended(&w, 1, "ActivityScheduled", hash), true);
        }
        assert!(heads.heads.len() <= 8, "{} kept", heads.heads.len());
    }

    #[test]
    fn a_head_found_while_its_append_is_in_flight_waits_for_the_next_scan() {
        let (heads, w, first) = recording_with_head_at_3();
        let second = first.next(b"y");
        let committed = head(&w, 4, second, WorkflowStatus::Completed);
        let stepping = heads.step_in_flight(&w);
        // Committed, not recorded yet: neither read back nor vouched for.
        assert_eq!(heads.vouch(&committed), Vouch::StepInFlight);
        assert_eq!(
            heads.vouch(&head(&id("w2"), 4, second, WorkflowStatus::Running)),
            Vouch::Unknown
        );
        // Recorded: exactly its head is signed, whatever of the workflow runs now.
        heads.record(&w, &appended(&w, 4, "WorkflowCompleted", second), true);
        assert_eq!(heads.vouch(&committed), Vouch::Witnessed);
        drop(stepping);
        assert_eq!(heads.vouch(&committed), Vouch::Witnessed);
        // An append that failed leaves the head it found.
        let failed = heads.step_in_flight(&w);
        drop(failed);
        assert_eq!(heads.vouch(&committed), Vouch::Witnessed);
        assert!(heads.in_flight().is_empty());
    }

    #[test]
    fn a_step_begun_before_recording_is_on_is_marked_too() {
        let heads = WitnessedHeads::default();
        let w = id("w1");
        let stepping = heads.step_in_flight(&w);
        heads.enable();
        let hash = ChainHash::GENESIS.next(b"x");
        let found = head(&w, 1, hash, WorkflowStatus::Running);
        assert_eq!(heads.vouch(&found), Vouch::StepInFlight);
        heads.record(&w, &appended(&w, 1, "ActivityScheduled", hash), true);
        drop(stepping);
        assert_eq!(heads.vouch(&found), Vouch::Witnessed);
    }
}

//! Histories this process stepped last, kept decoded so that the next step of the
//! same workflow neither reads nor decodes its history: it decides on the cached copy
//! and appends with [`hcpflow_eventstore::EventStore::append_known`], whose optimistic
//! check turns a stale copy into a conflict (and a fresh read), never a wrong append.
//!
//! A step takes its workflow's entry out ([`HistoryCache::take`]: one step uses it at a
//! time, and a miss only means "read the history from the database") and puts the
//! extended history back after its append commits, or the history it found when it
//! had nothing to append ([`HistoryCache::put`], which replaces whatever is there).
//!
//! # Bound: bytes, not histories
//!
//! The cache holds at most a budget of bytes (an estimate of the memory its entries
//! take), not a number of histories: a 3,000-event history costs what it weighs, not
//! what a 3-event one does, so long histories cannot take the process's memory with
//! them. When a put goes over the budget, others are evicted, roughly in the order they
//! were put ([`quick_cache`]'s CLOCK-Pro-like policy, which also prefers a workflow put
//! again soon after its eviction to those not seen since). A history heavier than its
//! share of the budget is not kept at all: its next step reads it.
//!
//! An entry's weight is computed once, when it is put, and stored with it:
//!
//! - the index row, key and bookkeeping: `ENTRY_OVERHEAD`;
//! - the events themselves: the `Vec`'s capacity times `size_of::<HistoryEvent>()`
//!   (216 bytes);
//! - what the events point to (strings, JSON payloads such as inputs and results):
//!   `DECODED_BYTES_PER_JSON_BYTE` times the size of the events' JSON (as stored).
//!
//! Counting an event's JSON (serialised into a counter, never built) is still a pass
//! over all of it, long for big payloads, so a put measures only the events it adds:
//! `take` remembers what the history it hands out measured, and the `put` that brings
//! it back extended adds its new events to that.

use std::fmt;
use std::mem::size_of;

use hcpflow_engine::{HistoryEvent, Seq, Timestamp, WorkflowId};
use hcpflow_eventstore::WorkflowSummary;
use quick_cache::sync::{Cache, DefaultLifecycle};
use quick_cache::{DefaultHashBuilder, OptionsBuilder, Weighter};

/// What an entry weighs besides its events: the index row (`WorkflowSummary` is 280
/// bytes inline, plus its strings), the key and the cache's own slot for it.
const ENTRY_OVERHEAD: u64 = 1024;

/// Bytes of memory a decoded event's strings and JSON values take per byte of its JSON.
/// Measured on the golden histories (`replay-tests/histories`), holding thousands of
/// decoded copies and reading the resident set: 2.0–2.7 for `create_hosted_cluster`
/// (~400 JSON bytes an event), 3.8–3.9 for `destroy_hosted_cluster`, 7.5–7.7 for
/// `scale_node_pool` (few events, big JSON inputs: a `serde_json` object costs a B-tree
/// node of ~640 bytes however few its keys). 4 is about their geometric mean, so an
/// estimate is within a factor of two of the truth either way.
const DECODED_BYTES_PER_JSON_BYTE: u64 = 4;

/// What a typical entry weighs (a short workflow ~10–50 KiB, a cluster's create
/// ~250–400 KiB): only sizes the cache's bookkeeping, never bounds it.
const TYPICAL_WEIGHT: u64 = 64 * 1024;

/// The cache is split into this many independently locked shards, each bounded by an
/// equal share of the budget: a history weighing more than that share (32 MiB of the
/// default 256 MiB, some 20,000 events) is not kept. Few, since a step locks a shard
/// only twice, for microseconds.
const SHARDS: usize = 8;

/// How many taken entries' weights are remembered until their history is put back:
/// as many as there are steps in flight, far fewer than this.
const TAKEN_CAPACITY: usize = 4096;

/// A workflow's index row and whole history as of this process's last step of it.
#[derive(Debug, Clone)]
pub struct CachedHistory {
    pub summary: WorkflowSummary,
    pub history: Vec<HistoryEvent>,
    /// Every event of it was appended by this process: its head is one this process
    /// computed (see `witnessed.rs`). A history read from the database keeps this only
    /// when the head read is the one this process cached as witnessed.
    pub witnessed: bool,
}

/// An entry with its weight, computed once when it is put.
#[derive(Debug, Clone)]
struct Kept {
    cached: CachedHistory,
    /// The size of the history's events as JSON.
    json_bytes: u64,
    /// What the cache counts against its budget; never 0 (a weightless entry is never
    /// evicted).
    weight: u64,
}

/// The events of a taken history, measured: what its put need not measure again.
#[derive(Debug, Clone, Copy)]
struct Measured {
    events: usize,
    /// The last of them, to check that the history put back still starts with them.
    last: (Seq, Timestamp),
    json_bytes: u64,
}

#[derive(Debug, Clone, Copy)]
struct ByWeight;

impl Weighter<WorkflowId, Kept> for ByWeight {
    fn weight(&self, _id: &WorkflowId, kept: &Kept) -> u64 {
        kept.weight
    }
}

pub struct HistoryCache {
    kept: Cache<WorkflowId, Kept, ByWeight>,
    /// Entries out with a step, by workflow.
    taken: Cache<WorkflowId, Measured>,
}

impl fmt::Debug for HistoryCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HistoryCache")
            .field("entries", &self.kept.len())
            .field("weight", &self.kept.weight())
            .field("budget", &self.kept.capacity())
            .finish_non_exhaustive()
    }
}

impl HistoryCache {
    /// A cache holding at most `budget` bytes (estimated; see the module's doc).
    pub fn new(budget: u64) -> Self {
        Self::with_shards(budget, SHARDS)
    }

    fn with_shards(budget: u64, shards: usize) -> Self {
        let estimated_items = usize::try_from(budget / TYPICAL_WEIGHT).unwrap_or(usize::MAX);
        let options = OptionsBuilder::new()
            .shards(shards)
            .weight_capacity(budget)
            .estimated_items_capacity(estimated_items)
            .build()
            .expect("both capacities are set");
        Self {
            kept: Cache::with_options(
                options,
                ByWeight,
                DefaultHashBuilder::default(),
                DefaultLifecycle::default(),
            ),
            taken: Cache::new(TAKEN_CAPACITY),
        }
    }

    /// Takes a workflow's entry out: one step uses it at a time.
    pub fn take(&self, id: &WorkflowId) -> Option<CachedHistory> {
        let (id, kept) = self.kept.remove(id)?;
        if let Some(last) = kept.cached.history.last() {
            let measured = Measured {
                events: kept.cached.history.len(),
                last: (last.seq, last.recorded_at),
                json_bytes: kept.json_bytes,
            };
            self.taken.insert(id, measured);
        }
        Some(kept.cached)
    }

    /// Keeps `cached` in place of the workflow's entry, evicting others when over the
    /// budget; a history heavier than its share of the budget is not kept (and the
    /// workflow's previous entry, if any, goes).
    pub fn put(&self, cached: CachedHistory) {
        let id = cached.summary.workflow_id.clone();
        let measured = self.taken.remove(&id).map(|(_, measured)| measured);
        let json_bytes = json_bytes(&cached.history, measured);
        let weight = weight(&cached, json_bytes);
        self.kept.insert(
            id,
            Kept {
                cached,
                json_bytes,
                weight,
            },
        );
    }
}

/// What an entry counts against the budget.
fn weight(cached: &CachedHistory, json_bytes: u64) -> u64 {
    let events = bytes(
        cached
            .history
            .capacity()
            .saturating_mul(size_of::<HistoryEvent>()),
    );
    ENTRY_OVERHEAD
        .saturating_add(events)
        .saturating_add(json_bytes.saturating_mul(DECODED_BYTES_PER_JSON_BYTE))
}

/// The size of `history`'s events as JSON, measuring only those after the `measured`
/// ones when `history` still starts with them.
fn json_bytes(history: &[HistoryEvent], measured: Option<Measured>) -> u64 {
    let (start, known) = match measured {
        Some(measured)
            if measured.events > 0
                && history
                    .get(measured.events - 1)
                    .is_some_and(|event| (event.seq, event.recorded_at) == measured.last) =>
        {
            (measured.events, measured.json_bytes)
        }
        _ => (0, 0),
    };
    history[start..]
        .iter()
        .map(event_json_bytes)
        .fold(known, u64::saturating_add)
}

/// The size of an event as stored: its kind and its data as JSON.
fn event_json_bytes(event: &HistoryEvent) -> u64 {
    bytes(event.event.kind().len()).saturating_add(event.event.record_data_len())
}

fn bytes(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use hcpflow_engine::event::{Event, SignalReceived};
    use hcpflow_engine::{ChainHash, Seq, WorkflowStatus};

    use super::*;

    const KIB: u64 = 1024;

    /// A history of `events` signals, each with a payload of `payload` bytes.
    fn cached(id: &str, events: u64, payload: usize) -> CachedHistory {
        let history = (1..=events)
            .map(|seq| HistoryEvent {
                seq: Seq::new(seq).unwrap(),
                recorded_at: Timestamp::from_millis(seq),
                event: Event::from(SignalReceived {
                    name: "poke".into(),
                    payload: "x".repeat(payload).into(),
                }),
            })
            .collect();
        CachedHistory {
            summary: WorkflowSummary {
                workflow_id: WorkflowId::new(id).unwrap(),
                workflow_type: "noop_chain".into(),
                status: WorkflowStatus::Running,
                concurrency_key: None,
                parent_id: None,
                next_seq: Seq::new(events + 1).unwrap(),
                head_hash: ChainHash::GENESIS,
                created_at: chrono::Utc::now(),
                updated_at: chrono::Utc::now(),
                input_digest: None,
                output: None,
                error: None,
                blocked_reason: None,
                tenant: hcpflow_engine::TenantId::default_tenant(),
            },
            history,
            witnessed: false,
        }
    }

    fn id(id: &str) -> WorkflowId {
        WorkflowId::new(id).unwrap()
    }

    /// One shard, so that the whole budget is one LRU-like pool and the tests are exact.
    fn cache(budget: u64) -> HistoryCache {
        HistoryCache::with_shards(budget, 1)
    }

    fn full_weight(cached: &CachedHistory) -> u64 {
        weight(cached, json_bytes(&cached.history, None))
    }

    #[test]
    fn take_removes_the_entry() {
        let cache = cache(MIB);
        cache.put(cached("a", 3, 10));
        let taken = cache.take(&id("a")).unwrap();
        assert_eq!(taken.history.len(), 3);
        assert!(cache.take(&id("a")).is_none());
        assert_eq!(cache.kept.weight(), 0);
    }

    #[test]
    fn put_replaces_the_entry() {
        let cache = cache(MIB);
        cache.put(cached("a", 3, 10));
        cache.put(cached("a", 5, 10));
        assert_eq!(cache.kept.len(), 1);
        assert_eq!(cache.kept.weight(), full_weight(&cached("a", 5, 10)));
        assert_eq!(cache.take(&id("a")).unwrap().history.len(), 5);
    }

    #[test]
    fn a_byte_budget_evicts_big_histories_before_it_holds_them_all() {
        let budget = MIB;
        let cache = cache(budget);
        let big = |name: &str| cached(name, 100, 1000); // ~400 KiB each, estimated
        let one = full_weight(&big("w-0"));
        assert!(one > budget / 4 && one < budget / 2, "{one}");
        for n in 0..10 {
            cache.put(big(&format!("w-{n}")));
            assert!(cache.kept.weight() <= budget);
        }
        let kept: Vec<_> = (0..10)
            .filter(|n| cache.take(&id(&format!("w-{n}"))).is_some())
            .collect();
        assert!(kept.len() < 10 && !kept.is_empty(), "{kept:?}");
        assert!(kept.contains(&9), "the last put is kept: {kept:?}");
        // Small histories under the same budget: a count bound would hold as many of
        // these as of the big ones; bytes hold hundreds.
        for n in 0..200 {
            cache.put(cached(&format!("s-{n}"), 3, 10));
        }
        assert_eq!(cache.kept.len(), 200);
    }

    #[test]
    fn a_history_heavier_than_the_budget_is_not_kept() {
        let cache = cache(64 * KIB);
        cache.put(cached("a", 3, 10));
        let huge = cached("a", 100, 1000);
        assert!(full_weight(&huge) > 64 * KIB);
        cache.put(huge);
        // Nor is the smaller, older copy of the same workflow left behind.
        assert!(cache.take(&id("a")).is_none());
        assert_eq!(cache.kept.weight(), 0);
        cache.put(cached("b", 3, 10));
        assert!(cache.take(&id("b")).is_some());
    }

    #[test]
    fn a_zero_budget_keeps_nothing() {
        let cache = cache(0);
        cache.put(cached("a", 0, 0));
        cache.put(cached("b", 3, 10));
        assert!(cache.take(&id("a")).is_none());
        assert!(cache.take(&id("b")).is_none());
    }

    #[test]
    fn every_entry_weighs_something() {
        assert!(full_weight(&cached("a", 0, 0)) >= ENTRY_OVERHEAD);
    }

    #[test]
    fn a_history_put_back_extended_weighs_what_a_fresh_one_does() {
        let cache = cache(MIB);
        cache.put(cached("a", 3, 500));
        let mut taken = cache.take(&id("a")).unwrap();
        assert!(cache.taken.peek(&id("a")).is_some());
        let extended = cached("a", 6, 500);
        taken.history.extend(extended.history[3..].iter().cloned());
        taken.history.shrink_to_fit();
        cache.put(taken);
        assert!(cache.taken.peek(&id("a")).is_none());
        let kept = cache.kept.peek(&id("a")).unwrap();
        assert_eq!(kept.json_bytes, json_bytes(&extended.history, None));
        assert_eq!(kept.weight, full_weight(&kept.cached));
    }

    #[test]
    fn a_history_that_does_not_start_with_the_taken_one_is_measured_whole() {
        let cache = cache(MIB);
        cache.put(cached("a", 3, 500));
        cache.take(&id("a")).unwrap();
        // Put back with other events at the same seqs (a recreated workflow): the
        // taken history's measure does not apply.
        let mut other = cached("a", 4, 10);
        other.history[2].recorded_at = Timestamp::from_millis(99);
        cache.put(other.clone());
        let kept = cache.kept.peek(&id("a")).unwrap();
        assert_eq!(kept.json_bytes, json_bytes(&other.history, None));
    }

    #[test]
    fn the_json_size_is_the_stored_size() {
        let history = cached("a", 2, 10).history;
        let expected: usize = history
            .iter()
            .map(|event| {
                let (kind, data) = event.event.to_record();
                kind.len() + serde_json::to_vec(&data).unwrap().len()
            })
            .sum();
        assert_eq!(json_bytes(&history, None), bytes(expected));
    }

    const MIB: u64 = 1024 * KIB;
}

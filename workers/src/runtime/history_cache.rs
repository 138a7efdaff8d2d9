//! Histories this process appended to last, kept decoded so that the next step of the
//! same workflow neither reads nor decodes its history: it decides on the cached copy
//! and appends with [`hcpflow_eventstore::EventStore::append_known`], whose optimistic
//! check turns a stale copy into a conflict (and a fresh read), never a wrong append.

use std::collections::BTreeMap;
use std::sync::Mutex;

use hcpflow_engine::{HistoryEvent, WorkflowId};
use hcpflow_eventstore::WorkflowSummary;

/// A workflow's index row and whole history as of this process's last append.
#[derive(Debug, Clone)]
pub struct CachedHistory {
    pub summary: WorkflowSummary,
    pub history: Vec<HistoryEvent>,
}

#[derive(Debug)]
pub struct HistoryCache {
    capacity: usize,
    inner: Mutex<Entries>,
}

#[derive(Debug, Default)]
struct Entries {
    /// Each entry with the tick of its last `put`.
    by_id: BTreeMap<WorkflowId, (u64, CachedHistory)>,
    tick: u64,
}

impl HistoryCache {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            inner: Mutex::new(Entries::default()),
        }
    }

    /// Takes a workflow's entry out: one step uses it at a time.
    pub fn take(&self, id: &WorkflowId) -> Option<CachedHistory> {
        let mut entries = self.inner.lock().ok()?;
        entries.by_id.remove(id).map(|(_, cached)| cached)
    }

    /// Keeps `cached`, evicting the least recently kept entry when full.
    pub fn put(&self, cached: CachedHistory) {
        if self.capacity == 0 {
            return;
        }
        let Ok(mut entries) = self.inner.lock() else {
            return;
        };
        if entries.by_id.len() >= self.capacity
            && !entries.by_id.contains_key(&cached.summary.workflow_id)
        {
            let oldest = entries
                .by_id
                .iter()
                .min_by_key(|(_, (tick, _))| *tick)
                .map(|(id, _)| id.clone());
            if let Some(oldest) = oldest {
                entries.by_id.remove(&oldest);
            }
        }
        entries.tick += 1;
        let tick = entries.tick;
        entries
            .by_id
            .insert(cached.summary.workflow_id.clone(), (tick, cached));
    }
}

#[cfg(test)]
mod tests {
    use hcpflow_engine::{ChainHash, Seq, WorkflowStatus};

    use super::*;

    fn cached(id: &str) -> CachedHistory {
        CachedHistory {
            summary: WorkflowSummary {
                workflow_id: WorkflowId::new(id).unwrap(),
                workflow_type: "noop_chain".into(),
                status: WorkflowStatus::Running,
                concurrency_key: None,
                parent_id: None,
                next_seq: Seq::FIRST,
                head_hash: ChainHash::GENESIS,
                created_at: chrono::Utc::now(),
                updated_at: chrono::Utc::now(),
                input_digest: None,
                output: None,
                error: None,
                blocked_reason: None,
            },
            history: Vec::new(),
        }
    }

    fn id(id: &str) -> WorkflowId {
        WorkflowId::new(id).unwrap()
    }

    #[test]
    fn take_removes_the_entry() {
        let cache = HistoryCache::new(4);
        cache.put(cached("a"));
        assert!(cache.take(&id("a")).is_some());
        assert!(cache.take(&id("a")).is_none());
    }

    #[test]
    fn a_full_cache_evicts_the_least_recently_kept() {
        let cache = HistoryCache::new(2);
        cache.put(cached("a"));
        cache.put(cached("b"));
        cache.put(cached("a")); // a is now newer than b
        cache.put(cached("c"));
        assert!(cache.take(&id("b")).is_none());
        assert!(cache.take(&id("a")).is_some());
        assert!(cache.take(&id("c")).is_some());
    }

    #[test]
    fn capacity_zero_keeps_nothing() {
        let cache = HistoryCache::new(0);
        cache.put(cached("a"));
        assert!(cache.take(&id("a")).is_none());
    }
}

//! The resource ledger of one activity attempt: the objects it created or deleted, in
//! order, recorded with its outcome (as `ResourceCreated` / `ResourceDeleted` events and
//! ledger rows). Activity implementations note into it; clones share it.

use std::sync::{Arc, Mutex};

use crate::event::ResourceRef;

#[derive(Debug, Clone, Default)]
pub struct Ledger {
    entries: Arc<Mutex<Vec<(bool, ResourceRef)>>>,
}

impl Ledger {
    pub fn created(&self, resource: ResourceRef) {
        self.push(true, resource);
    }

    pub fn deleted(&self, resource: ResourceRef) {
        self.push(false, resource);
    }

    fn push(&self, created: bool, resource: ResourceRef) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.push((created, resource));
        }
    }

    /// `(created?, resource)` in the order noted; the ledger is empty afterwards.
    pub fn take(&self) -> Vec<(bool, ResourceRef)> {
        self.entries
            .lock()
            .map(|mut e| std::mem::take(&mut *e))
            .unwrap_or_default()
    }
}

//! The resource ledger of one activity attempt: the objects it created or deleted, and
//! those it observed made by another owner, in order, recorded with its outcome (as
//! `ResourceCreated` / `ResourceDeleted` / `ResourceObserved` events and ledger rows).
//! Activity implementations note into it; clones share it.

use std::sync::{Arc, Mutex};

use crate::event::ResourceRef;

/// One note of the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Noted {
    Created(ResourceRef),
    Deleted(ResourceRef),
    /// Made and deleted by `owner`, not by this activity.
    Observed {
        resource: ResourceRef,
        owner: String,
    },
}

impl Noted {
    pub fn resource(&self) -> &ResourceRef {
        match self {
            Noted::Created(resource)
            | Noted::Deleted(resource)
            | Noted::Observed { resource, .. } => resource,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct Ledger {
    entries: Arc<Mutex<Vec<Noted>>>,
}

impl Ledger {
    pub fn created(&self, resource: ResourceRef) {
        self.push(Noted::Created(resource));
    }

    pub fn deleted(&self, resource: ResourceRef) {
        self.push(Noted::Deleted(resource));
    }

    /// `resource` exists and belongs to `owner`, who deletes it.
    pub fn observed(&self, resource: ResourceRef, owner: &str) {
        self.push(Noted::Observed {
            resource,
            owner: owner.to_owned(),
        });
    }

    fn push(&self, noted: Noted) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.push(noted);
        }
    }

    /// The notes in the order made; the ledger is empty afterwards.
    pub fn take(&self) -> Vec<Noted> {
        self.entries
            .lock()
            .map(|mut e| std::mem::take(&mut *e))
            .unwrap_or_default()
    }
}

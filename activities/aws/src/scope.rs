//! What an AWS activity is handed besides its request: the idempotency key of the
//! attempt, and where to note the resources it creates or deletes (the resource ledger).

use hcpflow_engine::event::ResourceRef;

/// Where an activity notes what it created or deleted. The worker's ledger implements
/// it; the notes are recorded with the activity's outcome.
pub trait ResourceLog: Send + Sync + std::fmt::Debug {
    fn created(&self, resource: ResourceRef);
    fn deleted(&self, resource: ResourceRef);
}

/// One attempt of an AWS activity.
#[derive(Debug)]
pub struct Scope<'a> {
    /// Stable across attempts, crashes and replays: passed as ClientToken or
    /// CallerReference where the API has one, and set as the `hcpflow.io/idempotency-key`
    /// tag, by which a later attempt finds what an earlier one made.
    pub idempotency_key: &'a str,
    pub region: &'a str,
    /// The cluster (infra id) the resources belong to, for the ledger.
    pub cluster: Option<&'a str>,
    pub log: &'a dyn ResourceLog,
}

impl Scope<'_> {
    /// A resource of kind `kind` (`ec2:vpc`, ...) with this scope's region and cluster.
    pub fn resource(&self, kind: &str, id: &str) -> ResourceRef {
        ResourceRef {
            provider: "aws".into(),
            kind: kind.into(),
            id: id.into(),
            region: Some(self.region.to_owned()),
            cluster: self.cluster.map(str::to_owned),
        }
    }
}

/// A log that keeps what it is told, in order: `(created?, resource)`.
#[derive(Debug, Default)]
pub struct MemoryLog {
    entries: std::sync::Mutex<Vec<(bool, ResourceRef)>>,
}

impl MemoryLog {
    pub fn take(&self) -> Vec<(bool, ResourceRef)> {
        self.entries
            .lock()
            .map(|mut entries| std::mem::take(&mut *entries))
            .unwrap_or_default()
    }
}

impl ResourceLog for MemoryLog {
    fn created(&self, resource: ResourceRef) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.push((true, resource));
        }
    }

    fn deleted(&self, resource: ResourceRef) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.push((false, resource));
        }
    }
}

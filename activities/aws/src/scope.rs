//! What an AWS activity is handed besides its request: the idempotency key of the
//! attempt, and where to note the resources it creates or deletes (the resource ledger).

use hcpflow_engine::event::ResourceRef;
use hcpflow_engine::{Ledger, WorkflowId};

/// One attempt of an AWS activity.
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    /// The workflow the attempt runs for: what it seals is bound to it.
    pub workflow_id: &'a WorkflowId,
    /// Stable across attempts, crashes and replays: passed as ClientToken or
    /// CallerReference where the API has one, and set as the `hcpflow.io/idempotency-key`
    /// tag, by which a later attempt finds what an earlier one made.
    pub idempotency_key: &'a str,
    /// The region the attempt's calls go to (its target's, or the process's own).
    pub region: &'a str,
    /// The cluster (infra id) the resources belong to, for the ledger.
    pub cluster: Option<&'a str>,
    /// The attempt's resource ledger.
    pub log: &'a Ledger,
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

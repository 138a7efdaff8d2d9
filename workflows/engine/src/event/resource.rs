//! The resource ledger in history: objects an activity created or deleted.

use serde::{Deserialize, Serialize};

use crate::ids::Seq;

/// One cloud or Kubernetes object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceRef {
    /// `aws` or `kubernetes`.
    pub provider: String,
    /// `ec2:vpc`, `iam:role`, `hypershift:hostedcluster`, ...
    pub kind: String,
    /// The id or ARN.
    pub id: String,
    pub region: Option<String>,
    pub cluster: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceCreated {
    pub activity_seq: Seq,
    pub attempt: u32,
    pub resource: ResourceRef,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceDeleted {
    pub activity_seq: Seq,
    pub attempt: u32,
    pub resource: ResourceRef,
}

//! The resource ledger in history: objects an activity created or deleted, and objects
//! it found made by someone else (the HyperShift operators) and answers for only as
//! their observer.

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

/// An object another owner made, seen by the activity (say the interface endpoint the
/// control-plane-operator created): recorded so an audit knows it existed and whose
/// it is; its owner deletes it, and a destroy checks it is gone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceObserved {
    pub activity_seq: Seq,
    pub attempt: u32,
    pub resource: ResourceRef,
    /// Who made it and deletes it (`hypershift`).
    pub owner: String,
}

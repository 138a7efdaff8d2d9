//! NodePools: applied (replicas kept as they are once it exists), scaled through the
//! scale subresource, waited on until their nodes are ready, deleted.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::kube::{kube_activity, Delete, ObjectRef};

/// Server-side applies the NodePool. `replicas` is the count of a new pool; an existing
/// pool keeps its count (scaling is [`ScaleNodePool`]'s job).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApplyNodePool {
    pub infra_id: String,
    /// The HostedCluster's name.
    pub cluster: String,
    pub namespace: String,
    pub name: String,
    pub release_image: String,
    pub zone: String,
    /// The private subnet of the zone.
    pub subnet_id: String,
    pub instance_type: String,
    /// As the input gave it; absent, the instance type's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<String>,
    pub instance_profile: String,
    pub replicas: i32,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodePool {
    pub object: ObjectRef,
}

/// Reads a NodePool's desired and ready counts (a scale records the count it reverts to).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetNodePool {
    pub namespace: String,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodePoolReplicas {
    /// `spec.replicas`.
    pub desired: i32,
    /// `status.replicas`: the nodes available.
    pub ready: i32,
}

/// Sets `spec.replicas` through the scale subresource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScaleNodePool {
    pub namespace: String,
    pub name: String,
    pub replicas: i32,
}

/// Waits until `status.replicas` is `replicas` and the pool is Ready; fails with the
/// Ready condition's reason and message after `timeout_secs`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitNodePoolReady {
    pub namespace: String,
    pub name: String,
    pub replicas: i32,
    pub timeout_secs: u64,
}

kube_activity!(ApplyNodePool => NodePool, "kube.apply_node_pool", creates);
kube_activity!(GetNodePool => NodePoolReplicas, "kube.get_node_pool");
kube_activity!(ScaleNodePool => NodePoolReplicas, "kube.scale_node_pool");
kube_activity!(WaitNodePoolReady => NodePoolReplicas, "kube.wait_node_pool_ready");
kube_activity!(Delete<NodePool> => (), "kube.delete_node_pool");

//! What the guest cluster made in AWS — the load balancers of its LoadBalancer Services
//! (classic and v2, their target groups and security groups), the volumes of its
//! PersistentVolumes, its image-registry bucket, its public `*.apps` record — and what
//! the control-plane-operator made for it (`<infra>-default-sg`). The operator removes
//! them when the HostedCluster is deleted with `cleanup-cloud-resources`; what is still
//! there afterwards is deleted by the cluster tag, as `hypershift destroy infra` does,
//! before the network it sits in.

use crate::aws::aws_activity;
use hcpflow_engine::Activity;
use serde::{Deserialize, Serialize};

/// Registered just before the HostedCluster, so it runs right after its delete (and
/// before the network's): deletes by the cluster tag what the guest left, and every
/// security group of the VPC but `default`, then checks nothing of it is left; fails
/// naming what is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteGuestResources {
    pub infra_id: String,
    /// The guest VPC (its security groups).
    pub vpc_id: String,
    /// The public zone and the guest's wildcard record there
    /// (`*.apps.<name>.<base_domain>`).
    pub public_zone_id: String,
    pub apps_record: String,
}

/// What was deleted, as `<kind> <id>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuestResourcesDeleted {
    pub deleted: Vec<String>,
}

aws_activity!(DeleteGuestResources => GuestResourcesDeleted, "aws.delete_guest_resources");

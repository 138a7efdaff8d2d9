//! PrivateLink as the HyperShift operators build it (hypershift-aws.md §5; openshift/
//! hypershift `control-plane-operator/controllers/awsprivatelink`): the hypershift-
//! operator makes the endpoint services in the management account, the control-plane-
//! operator the endpoint security groups, one interface endpoint per service with a
//! subnet in each NodePool zone, and the `api` / `*.apps` CNAMEs in the local zone.
//! hcpflow makes none of it: it checks beforehand what only it can (the management
//! cluster covers every guest zone, by zone id), then observes — per zone — that the
//! operators' work arrived, and on the way out that it is gone.

use serde::{Deserialize, Serialize};

use crate::aws::aws_activity;
use hcpflow_engine::Activity;

/// The services the control-plane-operator makes an endpoint for (the API server is
/// published by LoadBalancer, so it has its own), with their ports.
pub const ENDPOINT_SERVICES: [(&str, u16); 2] =
    [("private-router", 443), ("kube-apiserver-private", 6443)];

/// The tag the control-plane-operator puts on its endpoints: the service's name.
pub const ENDPOINT_SERVICE_TAG: &str = "AWSEndpointService";

/// Who owns what this module observes, in the resource ledger.
pub const OWNER: &str = "hypershift";

/// Before the control plane: the management cluster has a subnet in `zone`, compared
/// by zone id (names are per-account aliases), so the endpoint service behind its load
/// balancers is offered where the guest's endpoint needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckZoneCoverage {
    /// The guest zone, by this account's name (`us-east-1a`).
    pub zone: String,
    pub management_subnet_ids: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZoneCoverage {
    pub zone: String,
    pub zone_id: String,
    pub management_subnet_id: String,
}

/// Waits until each of the operator's interface endpoints in `vpc_id` has an available
/// network interface in this zone's subnet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitPrivateLinkZone {
    pub infra_id: String,
    pub vpc_id: String,
    pub zone: String,
    /// The zone's NodePool subnet (the operator puts the endpoint there).
    pub subnet_id: String,
    pub timeout_secs: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrivateLinkZone {
    pub zone: String,
    pub endpoints: Vec<ObservedEndpoint>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObservedEndpoint {
    /// `private-router` or `kube-apiserver-private`.
    pub service: String,
    pub vpc_endpoint_id: String,
    /// Its interface in the zone's subnet.
    pub network_interface_id: String,
}

/// Waits until `api.<cluster>.hypershift.local` and `*.apps.<cluster>.hypershift.local`
/// in the local zone are CNAMEs of the operator's endpoints (kube-apiserver-private and
/// private-router).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitPrivateLinkRecords {
    pub infra_id: String,
    pub vpc_id: String,
    pub local_zone_id: String,
    pub local_zone_name: String,
    pub timeout_secs: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrivateLinkRecords {
    /// `(record name, target)`.
    pub records: Vec<(String, String)>,
}

/// The compensation of the observation, run after the HostedCluster is deleted: waits
/// until the operators removed their endpoints, endpoint security groups, records and
/// endpoint services; fails naming what is still there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AwaitPrivateLinkRemoved {
    pub infra_id: String,
    pub vpc_id: String,
    pub local_zone_id: String,
    pub local_zone_name: String,
    pub timeout_secs: u64,
}

aws_activity!(CheckZoneCoverage => ZoneCoverage, "aws.check_zone_coverage");
aws_activity!(WaitPrivateLinkZone => PrivateLinkZone, "aws.wait_privatelink_zone");
aws_activity!(WaitPrivateLinkRecords => PrivateLinkRecords, "aws.wait_privatelink_records");
aws_activity!(AwaitPrivateLinkRemoved => (), "aws.await_privatelink_removed");

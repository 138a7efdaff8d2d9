//! The HostedCluster: created (never force-applied — the operator edits its spec),
//! waited on until Available, deleted once its finalizer lets go.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::kube::secrets::Secrets;
use crate::kube::{kube_activity, Delete, ObjectRef};
use crate::resource_tags::ResourceTags;

/// Creates the HostedCluster, or adopts the one an earlier attempt made (it carries
/// this infra id's label); one made for anything else is an error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateHostedCluster {
    pub infra_id: String,
    pub name: String,
    pub namespace: String,
    pub release_image: String,
    pub region: String,
    /// `Public`, `PublicAndPrivate` or `Private`.
    pub endpoint_access: String,
    pub base_domain: String,
    pub public_zone_id: String,
    pub private_zone_id: String,
    pub issuer_url: String,
    pub vpc_id: String,
    pub vpc_cidr: String,
    /// The first zone and its private subnet, for the cloud provider configuration.
    pub zone: String,
    pub subnet_id: String,
    /// The operator roles' ARNs by their `spec.platform.aws.rolesRef` field
    /// (`ingressARN`, `controlPlaneOperatorARN`, ...): all seven.
    pub roles_ref: BTreeMap<String, String>,
    pub secrets: Secrets,
    /// Copied into `spec.platform.aws.resourceTags` (at most 25 with the owned tag).
    #[serde(default)]
    pub resource_tags: ResourceTags,
    /// Extra annotations (the emulator's failure injection, for one).
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// `SingleReplica` or `HighlyAvailable`, for the control plane and the guest's
    /// infrastructure; absent, `SingleReplica`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability_policy: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostedCluster {
    pub object: ObjectRef,
    pub uid: String,
}

/// Waits until the HostedCluster is Available; fails with the blocking condition's
/// reason and message when it is Degraded or `timeout_secs` pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitHostedClusterAvailable {
    pub namespace: String,
    pub name: String,
    pub timeout_secs: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostedClusterAvailable {
    /// The Secret with the admin kubeconfig (`status.kubeconfig.name`).
    pub kubeconfig_secret: String,
    /// The release image the cluster reports, once its version history says so.
    pub version_image: Option<String>,
}

/// Waits until one of the operators' conditions on the HostedCluster is True (say
/// `AWSEndpointAvailable`, which the control-plane-operator sets once the PrivateLink
/// endpoint and its records exist); fails with the condition's reason and message when
/// `timeout_secs` pass, or at once when the operator refuses the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitHostedClusterCondition {
    pub namespace: String,
    pub name: String,
    pub condition: String,
    pub timeout_secs: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostedClusterCondition {
    pub condition: String,
    pub reason: String,
    pub message: String,
}

kube_activity!(CreateHostedCluster => HostedCluster, "kube.create_hosted_cluster", creates);
kube_activity!(WaitHostedClusterCondition => HostedClusterCondition, "kube.wait_hosted_cluster_condition");
kube_activity!(WaitHostedClusterAvailable => HostedClusterAvailable, "kube.wait_hosted_cluster_available");
kube_activity!(Delete<HostedCluster> => (), "kube.delete_hosted_cluster");

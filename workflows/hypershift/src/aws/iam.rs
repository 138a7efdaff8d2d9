//! IAM activities: the OIDC provider, the seven operator roles and the worker role and
//! instance profile.

use crate::aws::aws_activity;
use crate::aws::Delete;
use crate::resource_tags::ResourceTags;
use hcpflow_engine::Activity;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateOidcProvider {
    pub infra_id: String,
    /// `https://<bucket>.s3.<region>.amazonaws.com/<infra-id>`.
    pub issuer_url: String,
    /// The user's tags (`resource_tags`), besides hcpflow's own.
    #[serde(default, skip_serializing_if = "ResourceTags::is_empty")]
    pub resource_tags: ResourceTags,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OidcProvider {
    pub arn: String,
    /// The issuer without `https://`: the prefix of the trust policies' condition keys.
    pub issuer: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateOperatorRole {
    pub infra_id: String,
    /// Which of the seven roles: its suffix (`control-plane-operator`, ...).
    pub role: String,
    pub provider_arn: String,
    /// The issuer without `https://`.
    pub issuer: String,
    pub public_zone_id: String,
    pub private_zone_id: String,
    pub local_zone_id: String,
    /// The user's tags (`resource_tags`), besides hcpflow's own.
    #[serde(default, skip_serializing_if = "ResourceTags::is_empty")]
    pub resource_tags: ResourceTags,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Role {
    pub name: String,
    pub arn: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateWorkerProfile {
    pub infra_id: String,
    /// The user's tags (`resource_tags`), besides hcpflow's own.
    #[serde(default, skip_serializing_if = "ResourceTags::is_empty")]
    pub resource_tags: ResourceTags,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerProfile {
    pub role: Role,
    pub instance_profile_name: String,
    pub instance_profile_arn: String,
}

/// The seven operator roles: the suffix of the role's name (`<infra-id>-<suffix>`) and
/// the HostedCluster's `spec.platform.aws.rolesRef` field that takes its ARN, in the
/// order they are created.
pub const OPERATOR_ROLES: [(&str, &str); 7] = [
    ("openshift-ingress", "ingressARN"),
    ("openshift-image-registry", "imageRegistryARN"),
    ("aws-ebs-csi-driver-controller", "storageARN"),
    ("cloud-controller", "kubeCloudControllerARN"),
    ("node-pool", "nodePoolManagementARN"),
    ("control-plane-operator", "controlPlaneOperatorARN"),
    ("cloud-network-config-controller", "networkARN"),
];

aws_activity!(CreateOidcProvider => OidcProvider, "aws.create_oidc_provider", creates);
aws_activity!(Delete<OidcProvider> => (), "aws.delete_oidc_provider");
aws_activity!(CreateOperatorRole => Role, "aws.create_operator_role", creates);
aws_activity!(Delete<Role> => (), "aws.delete_role");
aws_activity!(CreateWorkerProfile => WorkerProfile, "aws.create_worker_profile", creates);
aws_activity!(Delete<WorkerProfile> => (), "aws.delete_worker_profile");

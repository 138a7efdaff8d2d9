//! Before a PublicAndPrivate or Private cluster: is the hypershift-operator installed
//! for the private platform (`hypershift install --private-platform AWS
//! --aws-private-region <region> …`)? Without it the operator refuses the cluster
//! (`SupportedHostedCluster=False`) only after everything else was made.

use serde::{Deserialize, Serialize};

use crate::kube::kube_activity;

/// Checks the operator's Deployment (`hypershift/operator`): started with
/// `--private-platform=AWS`, `AWS_REGION` equal to `region`, and AWS credentials.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckPrivatePlatform {
    pub region: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrivatePlatform {
    /// The region the operator serves private clusters in.
    pub region: String,
}

kube_activity!(CheckPrivatePlatform => PrivatePlatform, "kube.check_private_platform");

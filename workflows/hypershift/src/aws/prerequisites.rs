//! The prerequisites a create checks before it makes anything: the cluster's region is
//! the one the AWS activities call, the OIDC bucket and, unless the endpoint access is
//! Public, the management VPC and its subnets. (The public
//! zone is found by `aws.find_public_zone`.)

use crate::aws::aws_activity;
use hcpflow_engine::Activity;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckPrerequisites {
    pub oidc_bucket: String,
    /// The management VPC and subnets, when PrivateLink needs them.
    pub management_vpc_id: Option<String>,
    #[serde(default)]
    pub management_subnet_ids: Vec<String>,
    /// The cluster's region, which must be the one the AWS activities call (absent in
    /// histories from before the check).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
}

/// What was found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prerequisites {
    /// The bucket's region (part of the issuer URL).
    pub oidc_bucket_region: String,
}

aws_activity!(CheckPrerequisites => Prerequisites, "aws.check_prerequisites");

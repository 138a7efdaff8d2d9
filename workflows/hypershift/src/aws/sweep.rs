//! The tag sweep: everything AWS still holds of an infra id.

use crate::aws::aws_activity;
use hcpflow_engine::Activity;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FindLeftovers {
    pub infra_id: String,
    /// The OIDC bucket, to search `<infra-id>/` in; `None` skips S3.
    pub oidc_bucket: Option<String>,
}

/// One object still there.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Leftover {
    /// The ledger kind (`ec2:vpc`, `iam:role`, ...).
    pub kind: String,
    pub id: String,
}

impl std::fmt::Display for Leftover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind, self.id)
    }
}

aws_activity!(FindLeftovers => Vec<Leftover>, "aws.find_leftovers");

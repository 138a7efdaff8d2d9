//! IAM activities (hypershift-aws.md §2): the cluster's OIDC provider, the seven
//! operator roles with web-identity trust on it, and the worker role and instance
//! profile. IAM names are deterministic (`<infra-id>-...`), so a create finds an earlier
//! attempt's object by name; every object carries the cluster's tags.

pub mod oidc_provider;
pub mod operator_role;
pub mod policy_document;
pub mod role;
pub mod worker;

use aws_sdk_iam::types::Tag;
use hcpflow_engine::ActivityFailure;

use crate::error::AwsError;
use crate::naming;

/// A create that failed. `EntityAlreadyExists` means a concurrent attempt made the
/// object meanwhile: retryable, and the next attempt finds and adopts it.
pub(crate) fn create_failed(error: AwsError) -> ActivityFailure {
    if error.code == "EntityAlreadyExists" {
        ActivityFailure::retryable(error.code, error.message)
    } else {
        error.into()
    }
}

/// The tags of a new IAM object.
pub(crate) fn tags(infra_id: &str, name: &str, idempotency_key: &str) -> Vec<Tag> {
    naming::tags(infra_id, Some(name), idempotency_key)
        .into_iter()
        .filter_map(|(key, value)| Tag::builder().key(key).value(value).build().ok())
        .collect()
}

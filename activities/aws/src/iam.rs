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
use hcpflow_hypershift::resource_tags::ResourceTags;

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

/// Whose a new IAM object is: the cluster, and the tags its user asked for.
#[derive(Clone, Copy)]
pub(crate) struct Owner<'a> {
    pub infra_id: &'a str,
    pub resource_tags: &'a ResourceTags,
}

/// The tags of a new IAM object.
pub(crate) fn tags(owner: Owner<'_>, name: &str, idempotency_key: &str) -> Vec<Tag> {
    naming::tags(
        owner.infra_id,
        Some(name),
        idempotency_key,
        owner.resource_tags,
    )
    .into_iter()
    .filter_map(|(key, value)| Tag::builder().key(key).value(value).build().ok())
    .collect()
}

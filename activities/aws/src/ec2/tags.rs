//! EC2 tags and tag filters.

use aws_sdk_ec2::types::{Filter, ResourceType, Tag, TagSpecification};

use crate::naming;
use hcpflow_hypershift::resource_tags::ResourceTags;

/// The tags of a new resource (hcpflow's and the user's), as a tag specification for
/// its create call.
pub fn specification(
    resource_type: ResourceType,
    infra_id: &str,
    name: Option<&str>,
    idempotency_key: &str,
    user: &ResourceTags,
) -> TagSpecification {
    specification_with(resource_type, infra_id, name, idempotency_key, user, &[])
}

/// [`specification`] plus tags of the resource's own (a subnet's load-balancer role).
pub fn specification_with(
    resource_type: ResourceType,
    infra_id: &str,
    name: Option<&str>,
    idempotency_key: &str,
    user: &ResourceTags,
    extra: &[(&str, &str)],
) -> TagSpecification {
    let extra = extra
        .iter()
        .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()));
    let tags = naming::tags(infra_id, name, idempotency_key, user)
        .into_iter()
        .chain(extra)
        .map(|(key, value)| Tag::builder().key(key).value(value).build());
    TagSpecification::builder()
        .resource_type(resource_type)
        .set_tags(Some(tags.collect()))
        .build()
}

/// Resources an attempt with `idempotency_key` created.
pub fn made_by(idempotency_key: &str) -> Filter {
    Filter::builder()
        .name(format!("tag:{}", naming::IDEMPOTENCY_TAG))
        .values(idempotency_key)
        .build()
}

/// Resources of the cluster `infra_id`.
pub fn owned_by(infra_id: &str) -> Filter {
    Filter::builder()
        .name(format!("tag:{}", naming::cluster_tag_key(infra_id)))
        .values(naming::CLUSTER_TAG_VALUE)
        .build()
}

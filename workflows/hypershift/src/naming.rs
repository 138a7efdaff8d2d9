//! Names and tags of the AWS resources of a cluster (hypershift-aws.md §1): the tags
//! are how a create finds an earlier attempt's resource, and how the sweep finds leaks.

use crate::resource_tags::ResourceTags;

/// `kubernetes.io/cluster/<infra-id>` = `owned`: the main key for lookup and destroy.
pub fn cluster_tag_key(infra_id: &str) -> String {
    format!("kubernetes.io/cluster/{infra_id}")
}

pub const CLUSTER_TAG_VALUE: &str = "owned";
pub const INFRA_ID_TAG: &str = "hypershift.openshift.io/infra-id";
pub const IDEMPOTENCY_TAG: &str = "hcpflow.io/idempotency-key";
pub const NAME_TAG: &str = "Name";

/// The tags every created resource carries: the user's, the cluster tag, the infra id,
/// the idempotency key of the activity that made it, and its `Name` when it has one.
pub fn tags(
    infra_id: &str,
    name: Option<&str>,
    idempotency_key: &str,
    user: &ResourceTags,
) -> Vec<(String, String)> {
    let mut tags: Vec<(String, String)> = user
        .iter()
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .collect();
    tags.extend([
        (cluster_tag_key(infra_id), CLUSTER_TAG_VALUE.to_owned()),
        (INFRA_ID_TAG.to_owned(), infra_id.to_owned()),
        (IDEMPOTENCY_TAG.to_owned(), idempotency_key.to_owned()),
    ]);
    if let Some(name) = name {
        tags.push((NAME_TAG.to_owned(), name.to_owned()));
    }
    tags
}

pub fn vpc(infra_id: &str) -> String {
    format!("{infra_id}-vpc")
}

pub fn internet_gateway(infra_id: &str) -> String {
    format!("{infra_id}-igw")
}

pub fn private_subnet(infra_id: &str, zone: &str) -> String {
    format!("{infra_id}-private-{zone}")
}

pub fn public_subnet(infra_id: &str, zone: &str) -> String {
    format!("{infra_id}-public-{zone}")
}

pub fn elastic_ip(infra_id: &str, zone: &str) -> String {
    format!("{infra_id}-eip-{zone}")
}

pub fn nat_gateway(infra_id: &str, zone: &str) -> String {
    format!("{infra_id}-nat-{zone}")
}

/// The private route table of a zone (named like its subnet).
pub fn private_route_table(infra_id: &str, zone: &str) -> String {
    private_subnet(infra_id, zone)
}

pub fn public_route_table(infra_id: &str) -> String {
    format!("{infra_id}-public")
}

pub fn s3_endpoint(infra_id: &str) -> String {
    format!("{infra_id}-vpce-s3")
}

/// The internal NLB in the management VPC that PrivateLink exposes (at most 32
/// characters: the infra id has at most 27).
pub fn load_balancer(infra_id: &str) -> String {
    format!("{infra_id}-pl")
}

/// The NLB's target group (the API server port).
pub fn target_group(infra_id: &str) -> String {
    format!("{infra_id}-kas")
}

/// The security group of the interface endpoint in the guest VPC.
pub fn endpoint_security_group(infra_id: &str) -> String {
    format!("{infra_id}-vpce-private-router")
}

/// The interface endpoint in the guest VPC.
pub fn interface_endpoint(infra_id: &str) -> String {
    format!("{infra_id}-vpce-private-router")
}

/// The endpoint service in the management account.
pub fn endpoint_service(infra_id: &str) -> String {
    format!("{infra_id}-private-router")
}

/// `<name>.<base_domain>`.
pub fn private_zone(name: &str, base_domain: &str) -> String {
    format!("{name}.{}", base_domain.trim_end_matches('.'))
}

/// `<name>.hypershift.local`.
pub fn local_zone(name: &str) -> String {
    format!("{name}.hypershift.local")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_tags_follow_hypershift() {
        assert_eq!(
            private_subnet("demo-x7k2p", "us-east-1a"),
            "demo-x7k2p-private-us-east-1a"
        );
        assert_eq!(private_zone("demo", "example.com."), "demo.example.com");
        assert_eq!(local_zone("demo"), "demo.hypershift.local");
        let user = ResourceTags([("team".to_owned(), "platform".to_owned())].into());
        let tags = tags("demo-x7k2p", Some("demo-x7k2p-vpc"), "hf-abc-2", &user);
        assert!(tags.contains(&("team".into(), "platform".into())));
        assert!(tags.contains(&("kubernetes.io/cluster/demo-x7k2p".into(), "owned".into())));
        assert!(tags.contains(&("hcpflow.io/idempotency-key".into(), "hf-abc-2".into())));
        assert!(tags.contains(&("Name".into(), "demo-x7k2p-vpc".into())));
    }
}

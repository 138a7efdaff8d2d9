//! What a guest cluster leaves in AWS, deleted by the cluster tag after its
//! HostedCluster: made here in moto as the guest's cloud provider, CSI driver,
//! image-registry and ingress operators make it, then found by the sweep, deleted (twice:
//! the second run finds nothing), and checked gone with direct calls.

use aws_sdk_ec2::types::{
    IpPermission, ResourceType, Tag, TagSpecification, UserIdGroupPair, VolumeType,
};
use aws_sdk_route53::types::{
    Change, ChangeAction, ChangeBatch, ResourceRecord, ResourceRecordSet, RrType,
};
use hcpflow_aws::guest::{delete_guest_resources, DeleteGuestResources};
use hcpflow_aws::sweep::{find_leftovers, FindLeftovers};
use hcpflow_engine::{Ledger, Noted};

use crate::support::{stack, unique, Stack};

fn owned(infra_id: &str, resource: ResourceType) -> TagSpecification {
    TagSpecification::builder()
        .resource_type(resource)
        .tags(
            Tag::builder()
                .key(format!("kubernetes.io/cluster/{infra_id}"))
                .value("owned")
                .build(),
        )
        .build()
}

/// The guest's objects, as its controllers make them; returns the public zone id.
async fn guest_leaves(stack: &Stack, infra_id: &str, vpc_id: &str, subnet_id: &str) -> String {
    let moto = &stack.moto;
    let cluster_tag = format!("kubernetes.io/cluster/{infra_id}");
    let instance = moto
        .ec2
        .run_instances()
        .image_id("ami-12c6146b")
        .min_count(1)
        .max_count(1)
        .subnet_id(subnet_id)
        .tag_specifications(owned(infra_id, ResourceType::Instance))
        .send()
        .await
        .unwrap();
    assert_eq!(instance.instances().len(), 1);
    moto.ec2
        .create_volume()
        .availability_zone("us-east-1a")
        .size(10)
        .volume_type(VolumeType::Gp3)
        .tag_specifications(owned(infra_id, ResourceType::Volume))
        .send()
        .await
        .unwrap();
    let lb_group = moto
        .ec2
        .create_security_group()
        .group_name(format!("k8s-elb-{infra_id}"))
        .description("guest load balancer")
        .vpc_id(vpc_id)
        .tag_specifications(owned(infra_id, ResourceType::SecurityGroup))
        .send()
        .await
        .unwrap();
    let node_group = moto
        .ec2
        .create_security_group()
        .group_name(format!("{infra_id}-default-sg"))
        .description("default worker security group")
        .vpc_id(vpc_id)
        .tag_specifications(owned(infra_id, ResourceType::SecurityGroup))
        .send()
        .await
        .unwrap();
    // The two groups refer to each other.
    moto.ec2
        .authorize_security_group_ingress()
        .group_id(node_group.group_id().unwrap())
        .ip_permissions(
            IpPermission::builder()
                .ip_protocol("tcp")
                .from_port(30000)
                .to_port(32767)
                .user_id_group_pairs(
                    UserIdGroupPair::builder()
                        .group_id(lb_group.group_id().unwrap())
                        .build(),
                )
                .build(),
        )
        .send()
        .await
        .unwrap();
    let elb = format!("a{}", infra_id.replace('-', ""))
        .chars()
        .take(32)
        .collect::<String>();
    moto.elb
        .create_load_balancer()
        .load_balancer_name(&elb)
        .subnets(subnet_id)
        .security_groups(lb_group.group_id().unwrap())
        .listeners(
            aws_sdk_elasticloadbalancing::types::Listener::builder()
                .protocol("TCP")
                .load_balancer_port(443)
                .instance_protocol("TCP")
                .instance_port(31443)
                .build()
                .unwrap(),
        )
        .tags(
            aws_sdk_elasticloadbalancing::types::Tag::builder()
                .key(&cluster_tag)
                .value("owned")
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    let nlb = moto
        .elbv2
        .create_load_balancer()
        .name(format!("n{}", &elb[1..]))
        .r#type(aws_sdk_elasticloadbalancingv2::types::LoadBalancerTypeEnum::Network)
        .subnets(subnet_id)
        .tags(
            aws_sdk_elasticloadbalancingv2::types::Tag::builder()
                .key(&cluster_tag)
                .value("owned")
                .build(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(nlb.load_balancers().len(), 1);
    moto.elbv2
        .create_target_group()
        .name(format!("k8s-{}", &elb[1..]))
        .protocol(aws_sdk_elasticloadbalancingv2::types::ProtocolEnum::Tcp)
        .port(30080)
        .vpc_id(vpc_id)
        .tags(
            aws_sdk_elasticloadbalancingv2::types::Tag::builder()
                .key(&cluster_tag)
                .value("owned")
                .build(),
        )
        .send()
        .await
        .unwrap();
    let bucket = format!("{infra_id}-image-registry-us-east-1-abcdef");
    moto.s3
        .create_bucket()
        .bucket(&bucket)
        .send()
        .await
        .unwrap();
    moto.s3
        .put_object()
        .bucket(&bucket)
        .key("docker/registry/v2/blobs/x")
        .body(b"layer".to_vec().into())
        .send()
        .await
        .unwrap();
    let zone = moto
        .route53
        .create_hosted_zone()
        .name(format!("{infra_id}.example.com"))
        .caller_reference(format!("guest-{infra_id}"))
        .send()
        .await
        .unwrap();
    let zone_id = zone
        .hosted_zone()
        .unwrap()
        .id()
        .rsplit('/')
        .next()
        .unwrap()
        .to_owned();
    moto.route53
        .change_resource_record_sets()
        .hosted_zone_id(&zone_id)
        .change_batch(
            ChangeBatch::builder()
                .changes(
                    Change::builder()
                        .action(ChangeAction::Upsert)
                        .resource_record_set(
                            ResourceRecordSet::builder()
                                .name(format!("*.apps.demo.{infra_id}.example.com"))
                                .r#type(RrType::Cname)
                                .ttl(30)
                                .resource_records(
                                    ResourceRecord::builder()
                                        .value(format!("{elb}.us-east-1.elb.amazonaws.com"))
                                        .build()
                                        .unwrap(),
                                )
                                .build()
                                .unwrap(),
                        )
                        .build()
                        .unwrap(),
                )
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    zone_id
}

#[tokio::test]
async fn what_the_guest_left_is_found_and_deleted_by_its_tag() {
    let Some(stack) = stack("what_the_guest_left_is_found_and_deleted_by_its_tag").await else {
        return;
    };
    let infra_id = unique("gst-").to_lowercase();
    let vpc = stack
        .moto
        .ec2
        .create_vpc()
        .cidr_block("10.203.0.0/16")
        .send()
        .await
        .unwrap();
    let vpc_id = vpc.vpc().unwrap().vpc_id().unwrap().to_owned();
    let subnet = stack
        .moto
        .ec2
        .create_subnet()
        .vpc_id(&vpc_id)
        .availability_zone("us-east-1a")
        .cidr_block("10.203.0.0/24")
        .send()
        .await
        .unwrap();
    let subnet_id = subnet.subnet().unwrap().subnet_id().unwrap().to_owned();
    let zone_id = guest_leaves(&stack, &infra_id, &vpc_id, &subnet_id).await;

    let sweep = FindLeftovers {
        infra_id: infra_id.clone(),
        oidc_bucket: None,
    };
    let found: Vec<String> = find_leftovers(&stack.aws, &stack.aws, &sweep)
        .await
        .unwrap()
        .iter()
        .map(|l| l.kind.clone())
        .collect();
    for kind in [
        "ec2:instance",
        "ec2:volume",
        "elb:load-balancer",
        "elbv2:load-balancer",
        "elbv2:target-group",
        "s3:bucket",
        "ec2:security-group",
    ] {
        assert!(found.iter().any(|k| k == kind), "{kind} not in {found:?}");
    }

    let request = DeleteGuestResources {
        infra_id: infra_id.clone(),
        vpc_id: vpc_id.clone(),
        public_zone_id: zone_id.clone(),
        apps_record: format!("*.apps.demo.{infra_id}.example.com"),
    };
    let log = Ledger::default();
    let key = format!("hf-{infra_id}-1");
    let scope = stack.scope(&key, &infra_id, &log);
    let deleted = delete_guest_resources(&stack.aws, &scope, &request)
        .await
        .unwrap();
    assert_eq!(deleted.deleted.len(), 9, "{:?}", deleted.deleted);
    assert_eq!(
        log.take()
            .iter()
            .filter(|n| matches!(n, Noted::Deleted(_)))
            .count(),
        9
    );
    // A second run finds nothing to do.
    let again = delete_guest_resources(&stack.aws, &scope, &request)
        .await
        .unwrap();
    assert!(again.deleted.is_empty(), "{:?}", again.deleted);
    assert!(find_leftovers(&stack.aws, &stack.aws, &sweep)
        .await
        .unwrap()
        .is_empty());

    // Independently: nothing of it is left.
    let moto = &stack.moto;
    let instances = moto.ec2.describe_instances().send().await.unwrap();
    assert!(instances
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .filter(|i| i.subnet_id() == Some(subnet_id.as_str()))
        .all(|i| i.state().and_then(|s| s.name()).map(|n| n.as_str()) != Some("running")));
    let buckets = moto.s3.list_buckets().send().await.unwrap();
    assert!(!buckets
        .buckets()
        .iter()
        .any(|b| b.name().is_some_and(|n| n.starts_with(&infra_id))));
    let records = moto
        .route53
        .list_resource_record_sets()
        .hosted_zone_id(&zone_id)
        .send()
        .await
        .unwrap();
    assert!(records
        .resource_record_sets()
        .iter()
        .all(|r| !r.name().contains("apps")));

    moto.route53
        .delete_hosted_zone()
        .id(&zone_id)
        .send()
        .await
        .unwrap();
    moto.ec2
        .delete_subnet()
        .subnet_id(&subnet_id)
        .send()
        .await
        .unwrap();
    moto.ec2.delete_vpc().vpc_id(&vpc_id).send().await.unwrap();
}

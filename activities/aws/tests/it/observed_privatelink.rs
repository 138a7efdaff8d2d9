//! The checks around the operators' PrivateLink, against moto: a zone the management
//! cluster lacks is refused by zone id before anything is made; waits for what the
//! operators have not made end at their deadline naming what is missing; and the
//! removal check passes at once where nothing of theirs exists.

use hcpflow_aws::observed_privatelink::coverage::{check_zone_coverage, CheckZoneCoverage};
use hcpflow_aws::observed_privatelink::endpoints::{wait_privatelink_zone, WaitPrivateLinkZone};
use hcpflow_aws::observed_privatelink::removal::{
    await_privatelink_removed, AwaitPrivateLinkRemoved,
};
use hcpflow_engine::Ledger;

use crate::support::{stack, unique};

#[tokio::test]
async fn a_zone_the_management_cluster_lacks_is_refused_by_zone_id() {
    let Some(stack) = stack("a_zone_the_management_cluster_lacks_is_refused_by_zone_id").await
    else {
        return;
    };
    let ec2 = &stack.moto.ec2;
    let vpc = ec2
        .create_vpc()
        .cidr_block("10.201.0.0/16")
        .send()
        .await
        .unwrap();
    let vpc_id = vpc.vpc().unwrap().vpc_id().unwrap().to_owned();
    let mut subnets = Vec::new();
    for (index, zone) in ["us-east-1a", "us-east-1b"].iter().enumerate() {
        let subnet = ec2
            .create_subnet()
            .vpc_id(&vpc_id)
            .availability_zone(*zone)
            .cidr_block(format!("10.201.{index}.0/24"))
            .send()
            .await
            .unwrap();
        subnets.push(subnet.subnet().unwrap().subnet_id().unwrap().to_owned());
    }
    let check = |zone: &str| CheckZoneCoverage {
        zone: zone.into(),
        management_subnet_ids: subnets.clone(),
    };
    let covered = check_zone_coverage(&stack.aws, &stack.aws, &check("us-east-1b"))
        .await
        .unwrap();
    assert_eq!(covered.management_subnet_id, subnets[1]);
    assert!(
        covered.zone_id.starts_with("use1-az"),
        "{}",
        covered.zone_id
    );
    let refused = check_zone_coverage(&stack.aws, &stack.aws, &check("us-east-1c"))
        .await
        .unwrap_err();
    assert!(!refused.retryable);
    assert_eq!(refused.kind, "ZoneNotCovered");
    assert!(
        refused.message.contains("us-east-1c") && refused.message.contains(&covered.zone_id),
        "{}",
        refused.message
    );
    let unknown = check_zone_coverage(&stack.aws, &stack.aws, &check("us-east-9z"))
        .await
        .unwrap_err();
    assert_eq!(unknown.kind, "UnknownAvailabilityZone");

    for subnet in &subnets {
        ec2.delete_subnet().subnet_id(subnet).send().await.unwrap();
    }
    ec2.delete_vpc().vpc_id(&vpc_id).send().await.unwrap();
}

#[tokio::test]
async fn what_the_operators_never_made_times_out_named_and_nothing_is_left_to_remove() {
    let Some(stack) =
        stack("what_the_operators_never_made_times_out_named_and_nothing_is_left_to_remove").await
    else {
        return;
    };
    let infra_id = unique("op-");
    let vpc = stack
        .moto
        .ec2
        .create_vpc()
        .cidr_block("10.202.0.0/16")
        .send()
        .await
        .unwrap();
    let vpc_id = vpc.vpc().unwrap().vpc_id().unwrap().to_owned();
    let zone = stack
        .moto
        .route53
        .create_hosted_zone()
        .name(format!("{infra_id}.hypershift.local"))
        .caller_reference(&infra_id)
        .send()
        .await
        .unwrap();
    let zone_id = zone.hosted_zone().unwrap().id().to_owned();
    let log = Ledger::default();
    let key = format!("hf-{infra_id}-1");
    let scope = stack.scope(&key, &infra_id, &log);

    let missing = wait_privatelink_zone(
        &stack.aws,
        &scope,
        &WaitPrivateLinkZone {
            infra_id: infra_id.clone(),
            vpc_id: vpc_id.clone(),
            zone: "us-east-1a".into(),
            subnet_id: "subnet-none".into(),
            timeout_secs: 1,
        },
    )
    .await
    .unwrap_err();
    assert!(!missing.retryable);
    assert_eq!(missing.kind, "PrivateLinkZoneNotReady");
    assert!(
        missing.message.contains("us-east-1a") && missing.message.contains("private-router"),
        "{}",
        missing.message
    );
    assert!(log.take().is_empty(), "nothing observed, nothing noted");

    let removal = AwaitPrivateLinkRemoved {
        infra_id: infra_id.clone(),
        vpc_id: vpc_id.clone(),
        local_zone_id: zone_id.clone(),
        local_zone_name: format!("{infra_id}.hypershift.local"),
        timeout_secs: 1,
    };
    // An endpoint security group the operator left behind is named.
    let group = stack
        .moto
        .ec2
        .create_security_group()
        .group_name(format!("{infra_id}-vpce-private-router"))
        .description("left behind")
        .vpc_id(&vpc_id)
        .send()
        .await
        .unwrap();
    let group_id = group.group_id().unwrap().to_owned();
    let left = await_privatelink_removed(&stack.aws, &removal)
        .await
        .unwrap_err();
    assert_eq!(left.kind, "PrivateLinkNotRemoved");
    assert!(left.message.contains(&group_id), "{}", left.message);
    stack
        .moto
        .ec2
        .delete_security_group()
        .group_id(&group_id)
        .send()
        .await
        .unwrap();
    await_privatelink_removed(&stack.aws, &removal)
        .await
        .unwrap();

    stack
        .moto
        .route53
        .delete_hosted_zone()
        .id(&zone_id)
        .send()
        .await
        .unwrap();
    stack
        .moto
        .ec2
        .delete_vpc()
        .vpc_id(&vpc_id)
        .send()
        .await
        .unwrap();
}

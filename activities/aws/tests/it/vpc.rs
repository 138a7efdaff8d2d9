//! The VPC: one however often its create runs, deletes that may repeat, and the retry
//! decision for injected faults.

use hcpflow_aws::ec2::tags;
use hcpflow_aws::ec2::vpc::{create_vpc, delete_vpc, CreateVpc, Vpc};
use hcpflow_engine::{Ledger, Noted};

use crate::support::{stack, unique};

fn request(infra_id: &str) -> CreateVpc {
    CreateVpc {
        infra_id: infra_id.to_owned(),
        cidr_block: "10.0.0.0/16".into(),
        resource_tags: Default::default(),
    }
}

/// The cluster's VPCs as moto sees them, by the cluster tag.
async fn vpcs_of(stack: &crate::support::Stack, infra_id: &str) -> Vec<String> {
    stack
        .moto
        .ec2
        .describe_vpcs()
        .filters(tags::owned_by(infra_id))
        .send()
        .await
        .unwrap()
        .vpcs()
        .iter()
        .filter_map(|vpc| vpc.vpc_id().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn a_vpc_created_twice_and_again_after_a_lost_result_is_one_vpc() {
    let Some(stack) = stack("a_vpc_created_twice_and_again_after_a_lost_result_is_one_vpc").await
    else {
        return;
    };
    let infra_id = unique("vpc-");
    let key = format!("hf-{infra_id}-2");
    let log = Ledger::default();
    let scope = stack.scope(&key, &infra_id, &log);
    let first = create_vpc(&stack.aws, &scope, &request(&infra_id))
        .await
        .unwrap();
    let second = create_vpc(&stack.aws, &scope, &request(&infra_id))
        .await
        .unwrap();
    // The first result is thrown away (a crash before it was recorded): a third run
    // knows nothing of the first two.
    let third = create_vpc(&stack.aws, &scope, &request(&infra_id))
        .await
        .unwrap();
    assert_eq!(first, second);
    assert_eq!(first, third);
    assert_eq!(vpcs_of(&stack, &infra_id).await, vec![first.vpc_id.clone()]);

    for attribute in [
        aws_sdk_ec2::types::VpcAttributeName::EnableDnsSupport,
        aws_sdk_ec2::types::VpcAttributeName::EnableDnsHostnames,
    ] {
        let answer = stack
            .moto
            .ec2
            .describe_vpc_attribute()
            .vpc_id(&first.vpc_id)
            .attribute(attribute.clone())
            .send()
            .await
            .unwrap();
        let enabled = answer
            .enable_dns_support()
            .or(answer.enable_dns_hostnames())
            .and_then(|value| value.value());
        assert_eq!(enabled, Some(true), "{attribute:?}");
    }
    // Every run reports the VPC it stands for, for the resource ledger.
    let noted = log.take();
    assert_eq!(noted.len(), 3);
    assert!(noted
        .iter()
        .all(|n| matches!(n, Noted::Created(r) if r.id == first.vpc_id && r.kind == "ec2:vpc")));
    assert_eq!(
        noted[0].resource().cluster.as_deref(),
        Some(infra_id.as_str())
    );

    delete_vpc(&stack.aws, &scope, &first).await.unwrap();
}

#[tokio::test]
async fn a_vpc_deleted_twice_is_gone_and_both_deletes_succeed() {
    let Some(stack) = stack("a_vpc_deleted_twice_is_gone_and_both_deletes_succeed").await else {
        return;
    };
    let infra_id = unique("vpc-");
    let key = format!("hf-{infra_id}-2");
    let log = Ledger::default();
    let scope = stack.scope(&key, &infra_id, &log);
    let vpc = create_vpc(&stack.aws, &scope, &request(&infra_id))
        .await
        .unwrap();
    delete_vpc(&stack.aws, &scope, &vpc).await.unwrap();
    delete_vpc(&stack.aws, &scope, &vpc).await.unwrap();
    assert!(vpcs_of(&stack, &infra_id).await.is_empty());
    let deleted: Vec<_> = log
        .take()
        .into_iter()
        .filter(|noted| matches!(noted, hcpflow_engine::Noted::Deleted(_)))
        .collect();
    assert_eq!(deleted.len(), 1, "only the delete that removed it notes it");
    // A VPC that never existed is as good as deleted.
    let never = Vpc {
        vpc_id: "vpc-0123456789abcdef0".into(),
    };
    delete_vpc(&stack.aws, &scope, &never).await.unwrap();
}

#[tokio::test]
async fn throttling_is_retryable_and_a_permission_error_is_not() {
    let Some(stack) = stack("throttling_is_retryable_and_a_permission_error_is_not").await else {
        return;
    };
    let infra_id = unique("vpc-");
    let key = format!("hf-{infra_id}-2");
    let log = Ledger::default();
    let scope = stack.scope(&key, &infra_id, &log);

    stack.inject("CreateVpc", "throttle", 1, None);
    let throttled = create_vpc(&stack.aws, &scope, &request(&infra_id))
        .await
        .unwrap_err();
    assert!(throttled.retryable, "{throttled:?}");
    assert_eq!(throttled.kind, "RequestLimitExceeded");
    // The engine runs the attempt again: the fault is spent, the VPC is made, once.
    let vpc = create_vpc(&stack.aws, &scope, &request(&infra_id))
        .await
        .unwrap();
    assert_eq!(vpcs_of(&stack, &infra_id).await, vec![vpc.vpc_id.clone()]);

    stack.inject(
        "DeleteVpc",
        "error",
        1,
        Some(("UnauthorizedOperation", 403)),
    );
    let refused = delete_vpc(&stack.aws, &scope, &vpc).await.unwrap_err();
    assert!(!refused.retryable, "{refused:?}");
    assert_eq!(refused.kind, "UnauthorizedOperation");
    assert!(
        refused.message.contains("UnauthorizedOperation injected"),
        "{}",
        refused.message
    );

    stack.inject("DeleteVpc", "unavailable", 1, None);
    assert!(
        delete_vpc(&stack.aws, &scope, &vpc)
            .await
            .unwrap_err()
            .retryable
    );
    delete_vpc(&stack.aws, &scope, &vpc).await.unwrap();

    assert_eq!(
        stack.actions(),
        [
            "DescribeVpcs",
            "CreateVpc",
            "DescribeVpcs",
            "CreateVpc",
            "ModifyVpcAttribute",
            "ModifyVpcAttribute",
            "DeleteVpc",
            "DeleteVpc",
            "DeleteVpc",
        ]
    );
}

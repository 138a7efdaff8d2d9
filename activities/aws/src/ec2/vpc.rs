//! The cluster VPC, with DNS support and DNS hostnames (hypershift-aws.md §1.1).

use aws_sdk_ec2::types::{AttributeBooleanValue, ResourceType};
use hcpflow_engine::ActivityFailure;

use crate::clients::AwsClients;
use crate::ec2::tags;
use crate::error::from_sdk;
use crate::lookup::{created_id, deleted, find_or_create};
use crate::naming;
use crate::scope::Scope;

pub use hcpflow_hypershift::aws::network::{CreateVpc, Vpc};

pub const KIND: &str = "ec2:vpc";

/// Creates the VPC, or finds the one an earlier attempt created, and turns on DNS
/// support and hostnames (both idempotent).
///
/// # Guarantees
/// Any number of runs with one idempotency key leave one VPC.
pub async fn create_vpc(
    aws: &AwsClients,
    scope: &Scope<'_>,
    request: &CreateVpc,
) -> Result<Vpc, ActivityFailure> {
    let vpc_id = find_or_create(
        scope,
        KIND,
        || async {
            let earlier = aws
                .ec2
                .describe_vpcs()
                .filters(tags::made_by(scope.idempotency_key))
                .send()
                .await
                .map_err(from_sdk)?;
            Ok(earlier
                .vpcs()
                .iter()
                .find_map(|vpc| vpc.vpc_id())
                .map(str::to_owned))
        },
        || async {
            let name = naming::vpc(&request.infra_id);
            let created = aws
                .ec2
                .create_vpc()
                .cidr_block(&request.cidr_block)
                .tag_specifications(tags::specification(
                    ResourceType::Vpc,
                    &request.infra_id,
                    Some(&name),
                    scope.idempotency_key,
                    &request.resource_tags,
                ))
                .send()
                .await
                .map_err(from_sdk)?;
            created_id(created.vpc().and_then(|vpc| vpc.vpc_id()), "CreateVpc")
        },
    )
    .await?;
    // One attribute per call, as EC2 requires. Right after the create, the VPC may not
    // be visible yet: a not-found is retried.
    for (support, hostnames) in [(true, false), (false, true)] {
        let enable = AttributeBooleanValue::builder().value(true).build();
        let mut call = aws.ec2.modify_vpc_attribute().vpc_id(&vpc_id);
        if support {
            call = call.enable_dns_support(enable.clone());
        }
        if hostnames {
            call = call.enable_dns_hostnames(enable);
        }
        call.send()
            .await
            .map_err(|error| from_sdk(error).into_failure(true))?;
    }
    Ok(Vpc { vpc_id })
}

/// Deletes the VPC; one already gone is done. A VPC with dependencies left fails with
/// `DependencyViolation`, which is retried (the compensations before it remove them).
pub async fn delete_vpc(
    aws: &AwsClients,
    scope: &Scope<'_>,
    vpc: &Vpc,
) -> Result<(), ActivityFailure> {
    let result = aws.ec2.delete_vpc().vpc_id(&vpc.vpc_id).send().await;
    deleted(scope, KIND, &vpc.vpc_id, result)
}

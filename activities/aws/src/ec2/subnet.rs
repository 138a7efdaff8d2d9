//! A zone's private or public /20 subnet (hypershift-aws.md §1.2), with the load
//! balancer role tag, waited for until EC2 shows it.

use aws_sdk_ec2::types::ResourceType;
use hcpflow_engine::ActivityFailure;

use crate::clients::AwsClients;
use crate::ec2::tags;
use crate::error::from_sdk;
use crate::lookup::{created_id, deleted, find_or_create};
use crate::naming;
use crate::scope::Scope;

pub use hcpflow_hypershift::aws::network::{CreateSubnet, Exposure, Subnet};

pub const KIND: &str = "ec2:subnet";

/// Creates the subnet (or finds an earlier attempt's), then checks that EC2 shows it:
/// a subnet not visible yet fails retryably, so the next attempt looks again.
pub async fn create_subnet(
    aws: &AwsClients,
    scope: &Scope<'_>,
    request: &CreateSubnet,
) -> Result<Subnet, ActivityFailure> {
    let subnet_id = find_or_create(
        scope,
        KIND,
        || async {
            let earlier = aws
                .ec2
                .describe_subnets()
                .filters(tags::made_by(scope.idempotency_key))
                .send()
                .await
                .map_err(from_sdk)?;
            Ok(earlier
                .subnets()
                .iter()
                .find_map(|subnet| subnet.subnet_id())
                .map(str::to_owned))
        },
        || async {
            let (name, role) = match request.exposure {
                Exposure::Private => (
                    naming::private_subnet(&request.infra_id, &request.zone),
                    "kubernetes.io/role/internal-elb",
                ),
                Exposure::Public => (
                    naming::public_subnet(&request.infra_id, &request.zone),
                    "kubernetes.io/role/elb",
                ),
            };
            let mut extra = vec![(role, "1")];
            if request.exposure == Exposure::Private {
                extra.push(("karpenter.sh/discovery", request.infra_id.as_str()));
            }
            let specification = tags::specification_with(
                ResourceType::Subnet,
                &request.infra_id,
                Some(&name),
                scope.idempotency_key,
                &request.resource_tags,
                &extra,
            );
            let created = aws
                .ec2
                .create_subnet()
                .vpc_id(&request.vpc_id)
                .availability_zone(&request.zone)
                .cidr_block(&request.cidr_block)
                .tag_specifications(specification)
                .send()
                .await
                .map_err(from_sdk)?;
            created_id(
                created.subnet().and_then(|subnet| subnet.subnet_id()),
                "CreateSubnet",
            )
        },
    )
    .await?;
    aws.ec2
        .describe_subnets()
        .subnet_ids(&subnet_id)
        .send()
        .await
        .map_err(|error| from_sdk(error).into_failure(true))?;
    Ok(Subnet {
        subnet_id,
        zone: request.zone.clone(),
    })
}

/// Deletes the subnet; gone is done. Network interfaces still in it make AWS answer
/// `DependencyViolation` (retried).
pub async fn delete_subnet(
    aws: &AwsClients,
    scope: &Scope<'_>,
    subnet: &Subnet,
) -> Result<(), ActivityFailure> {
    let result = aws
        .ec2
        .delete_subnet()
        .subnet_id(&subnet.subnet_id)
        .send()
        .await;
    deleted(scope, KIND, &subnet.subnet_id, result)
}

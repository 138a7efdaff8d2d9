//! The interface endpoint's security group in the guest VPC: the API server port and
//! HTTPS (the router) from the machine network.

use aws_sdk_ec2::types::{Filter, IpPermission, IpRange, ResourceType};
use hcpflow_engine::ActivityFailure;

use crate::clients::AwsClients;
use crate::ec2::tags;
use crate::error::from_sdk;
use crate::lookup::{created_id, deleted, find_or_create};
use crate::naming;
use crate::privatelink::API_SERVER_PORT;
use crate::scope::Scope;

pub use hcpflow_hypershift::aws::privatelink::{CreateEndpointSecurityGroup, SecurityGroup};

pub const KIND: &str = "ec2:security-group";

/// Ensures the group and its two ingress rules (a rule already there is fine).
pub async fn create_endpoint_security_group(
    aws: &AwsClients,
    scope: &Scope<'_>,
    request: &CreateEndpointSecurityGroup,
) -> Result<SecurityGroup, ActivityFailure> {
    let name = naming::endpoint_security_group(&request.infra_id);
    let by_name = || async {
        let found = aws
            .ec2
            .describe_security_groups()
            .filters(
                Filter::builder()
                    .name("vpc-id")
                    .values(&request.vpc_id)
                    .build(),
            )
            .filters(Filter::builder().name("group-name").values(&name).build())
            .send()
            .await
            .map_err(from_sdk)?;
        Ok::<_, ActivityFailure>(
            found
                .security_groups()
                .iter()
                .find_map(|group| group.group_id())
                .map(str::to_owned),
        )
    };
    let group_id = find_or_create(
        scope,
        KIND,
        || async {
            let found = aws
                .ec2
                .describe_security_groups()
                .filters(tags::made_by(scope.idempotency_key))
                .send()
                .await
                .map_err(from_sdk)?;
            Ok(found
                .security_groups()
                .iter()
                .find_map(|group| group.group_id())
                .map(str::to_owned))
        },
        || async {
            let created = aws
                .ec2
                .create_security_group()
                .group_name(&name)
                .description(format!(
                    "PrivateLink endpoint of cluster {}",
                    request.infra_id
                ))
                .vpc_id(&request.vpc_id)
                .tag_specifications(tags::specification(
                    ResourceType::SecurityGroup,
                    &request.infra_id,
                    Some(&name),
                    scope.idempotency_key,
                    // Built for creates from before the operators owned PrivateLink, which had no
                    // user tags.
                    &Default::default(),
                ))
                .send()
                .await;
            match created {
                Ok(created) => created_id(created.group_id(), "CreateSecurityGroup"),
                Err(error) => {
                    let error = from_sdk(error);
                    // Group names are unique per VPC, and ours is derived from the
                    // infra id: a group of that name is ours from a lost answer.
                    if error.code == "InvalidGroup.Duplicate" {
                        if let Some(id) = by_name().await? {
                            return Ok(id);
                        }
                    }
                    Err(error.into_failure(true))
                }
            }
        },
    )
    .await?;
    for port in [API_SERVER_PORT, 443] {
        let rule = IpPermission::builder()
            .ip_protocol("tcp")
            .from_port(port)
            .to_port(port)
            .ip_ranges(IpRange::builder().cidr_ip(&request.machine_cidr).build())
            .build();
        let result = aws
            .ec2
            .authorize_security_group_ingress()
            .group_id(&group_id)
            .ip_permissions(rule)
            .send()
            .await;
        if let Err(error) = result {
            let error = from_sdk(error);
            if error.code != "InvalidPermission.Duplicate" {
                return Err(error.into_failure(true));
            }
        }
    }
    Ok(SecurityGroup { group_id })
}

/// Deletes the group; `DependencyViolation` (the endpoint's interfaces still going away)
/// is retried, a group already gone is done.
pub async fn delete_security_group(
    aws: &AwsClients,
    scope: &Scope<'_>,
    group: &SecurityGroup,
) -> Result<(), ActivityFailure> {
    let result = aws
        .ec2
        .delete_security_group()
        .group_id(&group.group_id)
        .send()
        .await;
    deleted(scope, KIND, &group.group_id, result)
}

//! The cluster VPC's internet gateway `<infra-id>-igw` (hypershift-aws.md §1.1).

use aws_sdk_ec2::types::ResourceType;
use hcpflow_engine::ActivityFailure;

use crate::clients::AwsClients;
use crate::ec2::tags;
use crate::error::from_sdk;
use crate::lookup::{created_id, deleted, find_or_create};
use crate::naming;
use crate::scope::Scope;

pub use hcpflow_hypershift::aws::network::{CreateInternetGateway, InternetGateway};

pub const KIND: &str = "ec2:internet-gateway";

/// Creates the gateway (or finds an earlier attempt's) and attaches it to the VPC unless
/// it already is.
pub async fn create_internet_gateway(
    aws: &AwsClients,
    scope: &Scope<'_>,
    request: &CreateInternetGateway,
) -> Result<InternetGateway, ActivityFailure> {
    let mut attached = false;
    let internet_gateway_id = find_or_create(
        scope,
        KIND,
        || async {
            let earlier = aws
                .ec2
                .describe_internet_gateways()
                .filters(tags::made_by(scope.idempotency_key))
                .send()
                .await
                .map_err(from_sdk)?;
            let gateway = earlier.internet_gateways().first();
            attached = gateway.is_some_and(|gateway| {
                gateway
                    .attachments()
                    .iter()
                    .any(|a| a.vpc_id() == Some(request.vpc_id.as_str()))
            });
            Ok(gateway
                .and_then(|gateway| gateway.internet_gateway_id())
                .map(str::to_owned))
        },
        || async {
            let name = naming::internet_gateway(&request.infra_id);
            let created = aws
                .ec2
                .create_internet_gateway()
                .tag_specifications(tags::specification(
                    ResourceType::InternetGateway,
                    &request.infra_id,
                    Some(&name),
                    scope.idempotency_key,
                    &request.resource_tags,
                ))
                .send()
                .await
                .map_err(from_sdk)?;
            created_id(
                created
                    .internet_gateway()
                    .and_then(|gateway| gateway.internet_gateway_id()),
                "CreateInternetGateway",
            )
        },
    )
    .await?;
    if !attached {
        aws.ec2
            .attach_internet_gateway()
            .internet_gateway_id(&internet_gateway_id)
            .vpc_id(&request.vpc_id)
            .send()
            .await
            .map_err(|error| from_sdk(error).into_failure(true))?;
    }
    Ok(InternetGateway {
        internet_gateway_id,
        vpc_id: request.vpc_id.clone(),
    })
}

/// Detaches the gateway from the VPC (not attached is fine) and deletes it; gone is done.
pub async fn delete_internet_gateway(
    aws: &AwsClients,
    scope: &Scope<'_>,
    gateway: &InternetGateway,
) -> Result<(), ActivityFailure> {
    let detached = aws
        .ec2
        .detach_internet_gateway()
        .internet_gateway_id(&gateway.internet_gateway_id)
        .vpc_id(&gateway.vpc_id)
        .send()
        .await;
    if let Err(error) = detached {
        let error = from_sdk(error);
        if !(error.is_not_found() || error.code == "Gateway.NotAttached") {
            return Err(error.into());
        }
    }
    let result = aws
        .ec2
        .delete_internet_gateway()
        .internet_gateway_id(&gateway.internet_gateway_id)
        .send()
        .await;
    deleted(scope, KIND, &gateway.internet_gateway_id, result)
}

//! The interface VPC endpoint in the guest VPC: one endpoint for the service, with one
//! subnet — one network interface — in every zone (AWS allows one subnet per zone per
//! endpoint). Created once with the subnets the zone checks chose; then each zone's
//! interface is waited for on its own.

use std::time::Duration;

use aws_sdk_ec2::types::{ResourceType, VpcEndpoint, VpcEndpointType};
use hcpflow_engine::ActivityFailure;

use crate::clients::AwsClients;
use crate::ec2::endpoint_state::{is_gone, state};
use crate::ec2::tags;
use crate::error::from_sdk;
use crate::lookup::{created_id, find_or_create, unless_not_found};
use crate::naming;
use crate::poll::Poll;
use crate::scope::Scope;

pub use hcpflow_hypershift::aws::privatelink::{
    CreateInterfaceEndpoint, EndpointZone, InterfaceEndpoint, WaitEndpointZone,
};

pub const KIND: &str = "ec2:vpc-endpoint";

const WAIT: Duration = Duration::from_secs(600);

/// Ensures the endpoint with the chosen subnets (adding any an earlier endpoint lacks).
pub async fn create_interface_endpoint(
    aws: &AwsClients,
    scope: &Scope<'_>,
    request: &CreateInterfaceEndpoint,
) -> Result<InterfaceEndpoint, ActivityFailure> {
    let vpc_endpoint_id = find_or_create(
        scope,
        KIND,
        || async {
            let found = aws
                .ec2
                .describe_vpc_endpoints()
                .filters(tags::made_by(scope.idempotency_key))
                .send()
                .await
                .map_err(from_sdk)?;
            Ok(found
                .vpc_endpoints()
                .iter()
                .filter(|endpoint| !is_gone(endpoint))
                .find_map(|endpoint| endpoint.vpc_endpoint_id())
                .map(str::to_owned))
        },
        || async {
            let name = naming::interface_endpoint(&request.infra_id);
            let created = aws
                .ec2
                .create_vpc_endpoint()
                .vpc_endpoint_type(VpcEndpointType::Interface)
                .vpc_id(&request.vpc_id)
                .service_name(&request.service_name)
                .security_group_ids(&request.security_group_id)
                .set_subnet_ids(Some(request.subnet_ids.clone()))
                .client_token(scope.idempotency_key)
                .tag_specifications(tags::specification(
                    ResourceType::VpcEndpoint,
                    &request.infra_id,
                    Some(&name),
                    scope.idempotency_key,
                    // Built for creates from before the operators owned PrivateLink, which had no
                    // user tags.
                    &Default::default(),
                ))
                .send()
                .await
                .map_err(|error| from_sdk(error).into_failure(true))?;
            created_id(
                created.vpc_endpoint().and_then(|e| e.vpc_endpoint_id()),
                "CreateVpcEndpoint",
            )
        },
    )
    .await?;
    let endpoint = describe(aws, &vpc_endpoint_id).await?.ok_or_else(|| {
        ActivityFailure::retryable(
            "EndpointNotVisible",
            format!("endpoint {vpc_endpoint_id} is not visible yet"),
        )
    })?;
    let missing: Vec<String> = request
        .subnet_ids
        .iter()
        .filter(|subnet| !endpoint.subnet_ids().contains(subnet))
        .cloned()
        .collect();
    if !missing.is_empty() {
        aws.ec2
            .modify_vpc_endpoint()
            .vpc_endpoint_id(&vpc_endpoint_id)
            .set_add_subnet_ids(Some(missing))
            .send()
            .await
            .map_err(|error| from_sdk(error).into_failure(true))?;
    }
    let dns_name = endpoint
        .dns_entries()
        .first()
        .and_then(|entry| entry.dns_name())
        .unwrap_or_default()
        .to_owned();
    Ok(InterfaceEndpoint {
        vpc_endpoint_id,
        dns_name,
    })
}

async fn describe(aws: &AwsClients, id: &str) -> Result<Option<VpcEndpoint>, ActivityFailure> {
    let found = unless_not_found(
        aws.ec2
            .describe_vpc_endpoints()
            .vpc_endpoint_ids(id)
            .send()
            .await,
    )?;
    Ok(found.and_then(|found| found.vpc_endpoints().first().cloned()))
}

/// Waits until the endpoint is available and has an interface in the zone's subnet.
pub async fn wait_endpoint_zone(
    aws: &AwsClients,
    request: &WaitEndpointZone,
) -> Result<EndpointZone, ActivityFailure> {
    let mut poll = Poll::new(WAIT);
    loop {
        let endpoint = describe(aws, &request.vpc_endpoint_id).await?;
        let Some(endpoint) = endpoint.filter(|e| !is_gone(e)) else {
            return Err(ActivityFailure::permanent(
                "EndpointGone",
                format!("endpoint {} does not exist", request.vpc_endpoint_id),
            ));
        };
        if state(&endpoint) == "available" && !endpoint.network_interface_ids().is_empty() {
            let interfaces = aws
                .ec2
                .describe_network_interfaces()
                .set_network_interface_ids(Some(endpoint.network_interface_ids().to_vec()))
                .send()
                .await
                .map_err(|error| from_sdk(error).into_failure(true))?;
            let ready = interfaces.network_interfaces().iter().find(|eni| {
                eni.subnet_id() == Some(request.subnet_id.as_str())
                    && eni
                        .status()
                        .is_some_and(|s| matches!(s.as_str(), "in-use" | "available"))
            });
            if let Some(id) = ready.and_then(|eni| eni.network_interface_id()) {
                return Ok(EndpointZone {
                    zone: request.zone.clone(),
                    network_interface_id: id.to_owned(),
                });
            }
        }
        if !poll.again().await {
            return Err(ActivityFailure::retryable(
                "EndpointZoneNotReady",
                format!(
                    "endpoint {} has no ready interface in {} ({}) after {WAIT:?} (state {})",
                    request.vpc_endpoint_id,
                    request.zone,
                    request.subnet_id,
                    state(&endpoint)
                ),
            ));
        }
    }
}

/// Deletes the endpoint and waits until it is gone (its interfaces hold the subnets and
/// the security group until then); an endpoint already gone is done.
pub async fn delete_interface_endpoint(
    aws: &AwsClients,
    scope: &Scope<'_>,
    endpoint: &InterfaceEndpoint,
) -> Result<(), ActivityFailure> {
    let id = endpoint.vpc_endpoint_id.as_str();
    if describe(aws, id).await?.is_some_and(|e| !is_gone(&e)) {
        let answer = aws
            .ec2
            .delete_vpc_endpoints()
            .vpc_endpoint_ids(id)
            .send()
            .await
            .map_err(from_sdk)?;
        if let Some(error) = answer.unsuccessful().first().and_then(|item| item.error()) {
            let error = crate::error::from_unsuccessful(error);
            if !error.is_not_found() {
                return Err(error.into_failure(false));
            }
        } else {
            scope.log.deleted(scope.resource(KIND, id));
        }
    }
    let mut poll = Poll::new(WAIT);
    while describe(aws, id)
        .await?
        .is_some_and(|e| state(&e) != "deleted")
    {
        if !poll.again().await {
            return Err(ActivityFailure::retryable(
                "EndpointNotDeleted",
                format!("endpoint {id} is still deleting after {WAIT:?}"),
            ));
        }
    }
    Ok(())
}

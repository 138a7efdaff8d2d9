//! The control-plane-operator's interface endpoints in the guest VPC, found by their
//! `AWSEndpointService` tag, and the per-zone wait for their interfaces.

use aws_sdk_ec2::types::{Filter, VpcEndpoint};
use hcpflow_engine::ActivityFailure;
use hcpflow_hypershift::aws::observed_privatelink::{
    ObservedEndpoint, ENDPOINT_SERVICES, ENDPOINT_SERVICE_TAG, OWNER,
};

use crate::clients::AwsClients;
use crate::ec2::endpoint_state::{is_gone, state};
use crate::error::from_sdk;
use crate::observed_privatelink::{until_seen, Look};
use crate::scope::Scope;

pub use hcpflow_hypershift::aws::observed_privatelink::{PrivateLinkZone, WaitPrivateLinkZone};

pub const ENDPOINT_KIND: &str = "ec2:vpc-endpoint";
pub const INTERFACE_KIND: &str = "ec2:network-interface";

fn filter(name: &str, value: &str) -> Filter {
    Filter::builder().name(name).values(value).build()
}

/// The operator's endpoints in `vpc_id` that are not on their way out, as
/// `(service, endpoint)`.
pub async fn operator_endpoints(
    aws: &AwsClients,
    vpc_id: &str,
) -> Result<Vec<(String, VpcEndpoint)>, ActivityFailure> {
    let found = aws
        .ec2
        .describe_vpc_endpoints()
        .filters(filter("vpc-id", vpc_id))
        .filters(filter("tag-key", ENDPOINT_SERVICE_TAG))
        .send()
        .await
        .map_err(|error| from_sdk(error).into_failure(true))?;
    Ok(found
        .vpc_endpoints()
        .iter()
        .filter(|endpoint| !is_gone(endpoint))
        .filter_map(|endpoint| {
            let service = endpoint
                .tags()
                .iter()
                .find(|tag| tag.key() == Some(ENDPOINT_SERVICE_TAG))?
                .value()?
                .to_owned();
            Some((service, endpoint.clone()))
        })
        .collect())
}

/// The endpoint of each service in [`ENDPOINT_SERVICES`], or which is missing.
pub fn by_service(
    endpoints: &[(String, VpcEndpoint)],
) -> Result<Vec<(&'static str, &VpcEndpoint)>, String> {
    ENDPOINT_SERVICES
        .iter()
        .map(|(service, _)| {
            endpoints
                .iter()
                .find(|(s, _)| s == service)
                .map(|(_, endpoint)| (*service, endpoint))
                .ok_or_else(|| format!("the operator has made no endpoint for {service} yet"))
        })
        .collect()
}

/// Waits until every operator endpoint is available with an interface in the zone's
/// subnet; notes each interface as observed.
///
/// Errors: permanent `PrivateLinkZoneNotReady` after `timeout_secs`, naming what is
/// missing (no endpoint yet, the subnet not among the endpoint's, no ready interface).
pub async fn wait_privatelink_zone(
    aws: &AwsClients,
    scope: &Scope<'_>,
    request: &WaitPrivateLinkZone,
) -> Result<PrivateLinkZone, ActivityFailure> {
    let what = format!(
        "PrivateLink in {} (subnet {}) is not ready",
        request.zone, request.subnet_id
    );
    let endpoints = until_seen(
        "PrivateLinkZoneNotReady",
        &what,
        request.timeout_secs,
        || look_at_zone(aws, request),
    )
    .await?;
    for endpoint in &endpoints {
        scope.log.observed(
            scope.resource(INTERFACE_KIND, &endpoint.network_interface_id),
            OWNER,
        );
    }
    Ok(PrivateLinkZone {
        zone: request.zone.clone(),
        endpoints,
    })
}

async fn look_at_zone(
    aws: &AwsClients,
    request: &WaitPrivateLinkZone,
) -> Result<Look<Vec<ObservedEndpoint>>, ActivityFailure> {
    let endpoints = operator_endpoints(aws, &request.vpc_id).await?;
    let endpoints = match by_service(&endpoints) {
        Ok(found) => found,
        Err(why) => return Ok(Look::NotYet(why)),
    };
    let mut seen = Vec::new();
    for (service, endpoint) in endpoints {
        let id = endpoint.vpc_endpoint_id().unwrap_or_default();
        if state(endpoint) != "available" {
            return Ok(Look::NotYet(format!(
                "endpoint {id} ({service}) is {}",
                state(endpoint)
            )));
        }
        if !endpoint
            .subnet_ids()
            .iter()
            .any(|s| s == &request.subnet_id)
        {
            return Ok(Look::NotYet(format!(
                "endpoint {id} ({service}) has no subnet in {} yet (it has {})",
                request.zone,
                endpoint.subnet_ids().join(", ")
            )));
        }
        let interfaces = if endpoint.network_interface_ids().is_empty() {
            Vec::new()
        } else {
            aws.ec2
                .describe_network_interfaces()
                .set_network_interface_ids(Some(endpoint.network_interface_ids().to_vec()))
                .send()
                .await
                .map_err(|error| from_sdk(error).into_failure(true))?
                .network_interfaces()
                .to_vec()
        };
        let ready = interfaces.iter().find(|eni| {
            eni.subnet_id() == Some(request.subnet_id.as_str())
                && eni
                    .status()
                    .is_some_and(|s| matches!(s.as_str(), "in-use" | "available"))
        });
        let Some(interface) = ready.and_then(|eni| eni.network_interface_id()) else {
            return Ok(Look::NotYet(format!(
                "endpoint {id} ({service}) has no ready interface in {}",
                request.subnet_id
            )));
        };
        seen.push(ObservedEndpoint {
            service: service.to_owned(),
            vpc_endpoint_id: id.to_owned(),
            network_interface_id: interface.to_owned(),
        });
    }
    Ok(Look::Seen(seen))
}

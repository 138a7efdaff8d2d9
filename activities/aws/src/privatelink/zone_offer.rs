//! Per availability zone, before the interface endpoint: is the endpoint service offered
//! in this zone, and which of the guest VPC's subnets is in it — both decided by zone
//! *id*. Zone names are per-account aliases (`us-east-1a` here may be another zone in
//! the management account), so a match by name can put the endpoint where the service
//! has no NLB node.

use aws_sdk_ec2::types::Filter;
use hcpflow_engine::ActivityFailure;

use crate::clients::AwsClients;
use crate::error::from_sdk;

pub use hcpflow_hypershift::aws::privatelink::{CheckZoneOffer, ZoneOffer};

/// The zone's id and subnet, or a permanent failure naming what is missing.
pub async fn check_zone_offer(
    aws: &AwsClients,
    request: &CheckZoneOffer,
) -> Result<ZoneOffer, ActivityFailure> {
    let zone_id = zone_id(aws, &request.zone).await?;

    let services = aws
        .ec2
        .describe_vpc_endpoint_services()
        .service_names(&request.service_name)
        .send()
        .await
        .map_err(|error| from_sdk(error).into_failure(true))?;
    let detail = services
        .service_details()
        .iter()
        .find(|detail| detail.service_name() == Some(request.service_name.as_str()))
        .ok_or_else(|| {
            ActivityFailure::retryable(
                "EndpointServiceNotVisible",
                format!(
                    "endpoint service {} is not visible yet",
                    request.service_name
                ),
            )
        })?;
    // Newer APIs list the zone ids; otherwise map the names (in our account's aliases,
    // as DescribeVpcEndpointServices answers them) to ids.
    let offered: Vec<String> = if detail.availability_zone_ids().is_empty() {
        zone_ids(aws, detail.availability_zones())
            .await?
            .into_iter()
            .map(|(_, id)| id)
            .collect()
    } else {
        detail.availability_zone_ids().to_vec()
    };
    if !offered.contains(&zone_id) {
        return Err(ActivityFailure::permanent(
            "ServiceNotOfferedInZone",
            format!(
                "endpoint service {} is not offered in {} (zone id {zone_id}); it is offered in {}: \
                 the management cluster needs subnets in every zone of the hosted cluster",
                request.service_name,
                request.zone,
                offered.join(", ")
            ),
        ));
    }

    let subnets = aws
        .ec2
        .describe_subnets()
        .set_subnet_ids(Some(request.subnet_ids.clone()))
        .send()
        .await
        .map_err(|error| from_sdk(error).into_failure(true))?;
    let subnet_id = subnets
        .subnets()
        .iter()
        .find(|subnet| subnet.availability_zone_id() == Some(zone_id.as_str()))
        .and_then(|subnet| subnet.subnet_id())
        .ok_or_else(|| {
            ActivityFailure::permanent(
                "NoSubnetInZone",
                format!(
                    "none of the subnets {} is in {} (zone id {zone_id})",
                    request.subnet_ids.join(", "),
                    request.zone
                ),
            )
        })?;
    Ok(ZoneOffer {
        zone: request.zone.clone(),
        zone_id,
        subnet_id: subnet_id.to_owned(),
    })
}

/// The id of the zone named `zone` (in this account's names); a permanent
/// `UnknownAvailabilityZone` when there is none.
pub(crate) async fn zone_id(aws: &AwsClients, zone: &str) -> Result<String, ActivityFailure> {
    zone_ids(aws, &[zone.to_owned()])
        .await?
        .into_iter()
        .next()
        .map(|(_, id)| id)
        .ok_or_else(|| {
            ActivityFailure::permanent(
                "UnknownAvailabilityZone",
                format!(
                    "availability zone {zone:?} does not exist in {}",
                    aws.region
                ),
            )
        })
}

/// `(name, id)` of the named zones that exist.
pub(crate) async fn zone_ids(
    aws: &AwsClients,
    names: &[String],
) -> Result<Vec<(String, String)>, ActivityFailure> {
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let zones = aws
        .ec2
        .describe_availability_zones()
        .filters(
            Filter::builder()
                .name("zone-name")
                .set_values(Some(names.to_vec()))
                .build(),
        )
        .send()
        .await
        .map_err(from_sdk)?;
    Ok(zones
        .availability_zones()
        .iter()
        .filter_map(|zone| Some((zone.zone_name()?.to_owned(), zone.zone_id()?.to_owned())))
        .collect())
}

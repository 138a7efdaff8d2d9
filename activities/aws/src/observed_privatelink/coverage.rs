//! Does the management cluster have a subnet in this guest zone? Compared by zone id:
//! names are per-account aliases, and the hypershift-operator's endpoint service is
//! offered only in the zones of its load balancer's subnets, so an endpoint subnet in
//! a zone the management cluster lacks gets no interface.

use hcpflow_engine::ActivityFailure;

use crate::clients::AwsClients;
use crate::error::from_sdk;
use crate::privatelink::zone_offer::zone_id;

pub use hcpflow_hypershift::aws::observed_privatelink::{CheckZoneCoverage, ZoneCoverage};

/// The zone's id and the management subnet there, or a permanent failure naming the
/// zone ids the management cluster does cover. The zone's name is the guest account's
/// alias (`guest`), the subnets are the management account's (`management`).
pub async fn check_zone_coverage(
    guest: &AwsClients,
    management: &AwsClients,
    request: &CheckZoneCoverage,
) -> Result<ZoneCoverage, ActivityFailure> {
    let zone_id = zone_id(guest, &request.zone).await?;
    let subnets = management
        .ec2
        .describe_subnets()
        .set_subnet_ids(Some(request.management_subnet_ids.clone()))
        .send()
        .await
        .map_err(|error| from_sdk(error).into_failure(false))?;
    if let Some(subnet) = subnets
        .subnets()
        .iter()
        .find(|subnet| subnet.availability_zone_id() == Some(zone_id.as_str()))
    {
        return Ok(ZoneCoverage {
            zone: request.zone.clone(),
            zone_id,
            management_subnet_id: subnet.subnet_id().unwrap_or_default().to_owned(),
        });
    }
    let mut covered: Vec<&str> = subnets
        .subnets()
        .iter()
        .filter_map(|subnet| subnet.availability_zone_id())
        .collect();
    covered.sort_unstable();
    covered.dedup();
    Err(ActivityFailure::permanent(
        "ZoneNotCovered",
        format!(
            "the management cluster has no subnet in {} (zone id {zone_id}); its subnets {} are in \
             zone ids {}: the operator's endpoint service would not be offered there, so PrivateLink \
             cannot reach the control plane from that zone",
            request.zone,
            request.management_subnet_ids.join(", "),
            if covered.is_empty() {
                "none".to_owned()
            } else {
                covered.join(", ")
            }
        ),
    ))
}

//! The public zone of the base domain: a prerequisite, only read (hypershift-aws.md §1.4
//! step 11).

use hcpflow_engine::ActivityFailure;

use crate::clients::AwsClients;
use crate::error::from_sdk;
use crate::route53::{bare_zone_id, same_name};

pub use hcpflow_hypershift::aws::dns::{FindPublicZone, PublicZone};

/// The public zone named `base_domain`; a permanent `PublicZoneNotFound` when there is
/// none, and `PublicZoneAmbiguous` when there are several.
pub async fn find_public_zone(
    aws: &AwsClients,
    request: &FindPublicZone,
) -> Result<PublicZone, ActivityFailure> {
    let page = aws
        .route53
        .list_hosted_zones_by_name()
        .dns_name(&request.base_domain)
        .max_items(100)
        .send()
        .await
        .map_err(from_sdk)?;
    let public: Vec<&str> = page
        .hosted_zones()
        .iter()
        .filter(|zone| same_name(zone.name(), &request.base_domain))
        .filter(|zone| !zone.config().is_some_and(|config| config.private_zone()))
        .map(|zone| bare_zone_id(zone.id()))
        .collect();
    match public.as_slice() {
        [zone_id] => Ok(PublicZone {
            zone_id: (*zone_id).to_owned(),
        }),
        [] => Err(ActivityFailure::permanent(
            "PublicZoneNotFound",
            format!(
                "no public Route53 zone named {:?}: create it before the cluster (it is a prerequisite)",
                request.base_domain
            ),
        )),
        several => Err(ActivityFailure::permanent(
            "PublicZoneAmbiguous",
            format!(
                "{} public Route53 zones are named {:?} ({}): keep one",
                several.len(),
                request.base_domain,
                several.join(", ")
            ),
        )),
    }
}

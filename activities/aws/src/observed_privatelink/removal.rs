//! After the HostedCluster is deleted: have the operators removed their PrivateLink?
//! The control-plane-operator deletes its endpoints, their security groups
//! (`<infra>-vpce-<service>`) and the records; the hypershift-operator its endpoint
//! services (tagged with the cluster's owned tag, from `resourceTags`). Their records
//! left behind would keep our local zone from being deleted; the rest would leak.

use aws_sdk_ec2::types::Filter;
use hcpflow_engine::ActivityFailure;

use crate::clients::AwsClients;
use crate::error::from_sdk;
use crate::naming;
use crate::observed_privatelink::endpoints::operator_endpoints;
use crate::observed_privatelink::records::{cnames, record_names};
use crate::observed_privatelink::{until_seen, Look};
use crate::privatelink::endpoint_service::live_services;

pub use hcpflow_hypershift::aws::observed_privatelink::AwaitPrivateLinkRemoved;

/// Waits until nothing of the operators' PrivateLink is left.
///
/// Errors: permanent `PrivateLinkNotRemoved` after `timeout_secs`, naming each object
/// still there.
pub async fn await_privatelink_removed(
    aws: &AwsClients,
    request: &AwaitPrivateLinkRemoved,
) -> Result<(), ActivityFailure> {
    let what = "the HyperShift operators have not removed their PrivateLink";
    until_seen(
        "PrivateLinkNotRemoved",
        what,
        request.timeout_secs,
        || async {
            let left = still_there(aws, request).await?;
            Ok(if left.is_empty() {
                Look::Seen(())
            } else {
                Look::NotYet(format!("still there: {}", left.join(", ")))
            })
        },
    )
    .await
}

/// What of the operators' PrivateLink exists, one description per object.
pub async fn still_there(
    aws: &AwsClients,
    request: &AwaitPrivateLinkRemoved,
) -> Result<Vec<String>, ActivityFailure> {
    let mut left: Vec<String> = operator_endpoints(aws, &request.vpc_id)
        .await?
        .into_iter()
        .map(|(service, endpoint)| {
            format!(
                "endpoint {} ({service})",
                endpoint.vpc_endpoint_id().unwrap_or_default()
            )
        })
        .collect();

    let prefix = format!("{}-vpce-", request.infra_id);
    let groups = aws
        .ec2
        .describe_security_groups()
        .filters(
            Filter::builder()
                .name("vpc-id")
                .values(&request.vpc_id)
                .build(),
        )
        .send()
        .await
        .map_err(|error| from_sdk(error).into_failure(true))?;
    left.extend(
        groups
            .security_groups()
            .iter()
            .filter(|group| group.group_name().is_some_and(|n| n.starts_with(&prefix)))
            .map(|group| {
                format!(
                    "security group {} ({})",
                    group.group_id().unwrap_or_default(),
                    group.group_name().unwrap_or_default()
                )
            }),
    );

    let names: Vec<String> = record_names(&request.local_zone_name)
        .into_iter()
        .map(|(_, name)| name)
        .collect();
    left.extend(
        cnames(aws, &request.local_zone_id, &names)
            .await?
            .into_iter()
            .map(|(name, target)| format!("record {name} → {target}")),
    );

    let owned = naming::cluster_tag_key(&request.infra_id);
    left.extend(
        live_services(aws)
            .await?
            .iter()
            .filter(|service| service.tags().iter().any(|tag| tag.key() == Some(&owned)))
            .map(|service| {
                format!(
                    "endpoint service {}",
                    service.service_id().unwrap_or_default()
                )
            }),
    );
    Ok(left)
}

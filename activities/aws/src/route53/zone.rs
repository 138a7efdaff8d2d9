//! The cluster's private zones: `<name>.<base_domain>` and `<name>.hypershift.local`,
//! both associated with the cluster VPC (hypershift-aws.md §1.4, §1.7 step 11).
//!
//! Zones cannot be tagged at creation, and moto creates a second zone for a repeated
//! CallerReference (AWS answers `HostedZoneAlreadyExists`). So the CallerReference is
//! the idempotency key, a create first looks for a zone of that name whose
//! CallerReference is the key, and the tags are set afterwards (idempotently).

use aws_sdk_route53::types::{
    Change, ChangeAction, ChangeBatch, HostedZoneConfig, RrType, Tag, TagResourceType, Vpc,
    VpcRegion,
};
use hcpflow_engine::ActivityFailure;

use crate::clients::AwsClients;
use crate::error::from_sdk;
use crate::lookup::{created_id, deleted, find_or_create, unless_not_found};
use crate::naming;
use crate::route53::{bare_zone_id, same_name};
use crate::scope::Scope;

pub use hcpflow_hypershift::aws::dns::{CreatePrivateZone, HostedZone};

pub const KIND: &str = "route53:hosted-zone";

/// The SOA's last field — how long resolvers cache a "no such name" — as `hypershift
/// create infra aws` sets it on its private zones (`setSOAMinimum`): 60 s instead of
/// Route53's default day, so a name asked for before its record exists (`api.…` while
/// the operator makes the endpoint) resolves a minute later, not a day later.
pub const NEGATIVE_CACHE_TTL: &str = "60";

/// Sets the zone's SOA negative-cache TTL to [`NEGATIVE_CACHE_TTL`] (an UPSERT of the
/// SOA with that field changed: idempotent).
async fn set_negative_cache_ttl(
    aws: &AwsClients,
    zone_id: &str,
    name: &str,
) -> Result<(), ActivityFailure> {
    let listed = aws
        .route53
        .list_resource_record_sets()
        .hosted_zone_id(zone_id)
        .start_record_name(name)
        .start_record_type(RrType::Soa)
        .max_items(1)
        .send()
        .await
        .map_err(|error| from_sdk(error).into_failure(true))?;
    let Some(mut soa) = listed
        .resource_record_sets()
        .iter()
        .find(|set| set.r#type() == &RrType::Soa && same_name(set.name(), name))
        .cloned()
    else {
        // Route53 writes the SOA with the zone; a moment later it is there.
        return Err(ActivityFailure::retryable(
            "SoaNotFound",
            format!("the SOA record of zone {name} ({zone_id}) is not listed yet"),
        ));
    };
    let Some(value) = soa.resource_records().first().map(|r| r.value().to_owned()) else {
        return Err(ActivityFailure::retryable(
            "SoaNotFound",
            format!("the SOA record of zone {name} ({zone_id}) has no value"),
        ));
    };
    let mut fields: Vec<&str> = value.split(' ').collect();
    if fields.len() != 7 {
        return Err(ActivityFailure::permanent(
            "UnexpectedSoa",
            format!(
                "the SOA record of zone {name} has {} fields, not 7: {value}",
                fields.len()
            ),
        ));
    }
    if fields[6] == NEGATIVE_CACHE_TTL {
        return Ok(());
    }
    fields[6] = NEGATIVE_CACHE_TTL;
    let record = aws_sdk_route53::types::ResourceRecord::builder()
        .value(fields.join(" "))
        .build()
        .map_err(|e| ActivityFailure::permanent("InvalidRecord", e.to_string()))?;
    soa.resource_records = Some(vec![record]);
    let change = Change::builder()
        .action(ChangeAction::Upsert)
        .resource_record_set(soa)
        .build()
        .and_then(|change| ChangeBatch::builder().changes(change).build())
        .map_err(|e| ActivityFailure::permanent("InvalidChange", e.to_string()))?;
    aws.route53
        .change_resource_record_sets()
        .hosted_zone_id(zone_id)
        .change_batch(change)
        .send()
        .await
        .map_err(|error| from_sdk(error).into_failure(true))?;
    Ok(())
}

/// Creates the private zone, or finds the one an earlier attempt created, and tags it.
///
/// # Guarantees
/// Any number of runs with one idempotency key leave one zone, even against an API
/// (moto) that ignores CallerReference.
pub async fn create_private_zone(
    aws: &AwsClients,
    scope: &Scope<'_>,
    request: &CreatePrivateZone,
) -> Result<HostedZone, ActivityFailure> {
    let zone_id = find_or_create(
        scope,
        KIND,
        || find_by_caller_reference(aws, &request.name, scope.idempotency_key),
        || async {
            let created = aws
                .route53
                .create_hosted_zone()
                .name(&request.name)
                .caller_reference(scope.idempotency_key)
                .vpc(
                    Vpc::builder()
                        .vpc_id(&request.vpc_id)
                        .vpc_region(VpcRegion::from(scope.region))
                        .build(),
                )
                .hosted_zone_config(
                    HostedZoneConfig::builder()
                        .private_zone(true)
                        .comment(format!("hcpflow: cluster {}", request.infra_id))
                        .build(),
                )
                .send()
                .await;
            match created {
                Ok(created) => created_id(
                    created.hosted_zone().map(|zone| bare_zone_id(zone.id())),
                    "CreateHostedZone",
                ),
                Err(error) => {
                    let error = from_sdk(error);
                    // AWS's answer to a repeated CallerReference: the zone exists.
                    if error.code == "HostedZoneAlreadyExists" {
                        if let Some(id) =
                            find_by_caller_reference(aws, &request.name, scope.idempotency_key)
                                .await?
                        {
                            return Ok(id);
                        }
                    }
                    Err(error.into())
                }
            }
        },
    )
    .await?;
    let tags = naming::tags(
        &request.infra_id,
        Some(&request.name),
        scope.idempotency_key,
        &request.resource_tags,
    )
    .into_iter()
    .map(|(key, value)| Tag::builder().key(key).value(value).build());
    aws.route53
        .change_tags_for_resource()
        .resource_type(TagResourceType::Hostedzone)
        .resource_id(&zone_id)
        .set_add_tags(Some(tags.collect()))
        .send()
        .await
        .map_err(|error| from_sdk(error).into_failure(true))?;
    set_negative_cache_ttl(aws, &zone_id, &request.name).await?;
    Ok(HostedZone {
        zone_id,
        name: request.name.clone(),
    })
}

/// The zone named `name` that a create with `caller_reference` made.
async fn find_by_caller_reference(
    aws: &AwsClients,
    name: &str,
    caller_reference: &str,
) -> Result<Option<String>, ActivityFailure> {
    // Zones are listed in name order from `dns_name`: the ones of this name come first.
    let mut next: Option<(String, Option<String>)> = Some((name.to_owned(), None));
    while let Some((dns_name, zone_id)) = next.take() {
        let page = aws
            .route53
            .list_hosted_zones_by_name()
            .dns_name(dns_name)
            .set_hosted_zone_id(zone_id)
            .send()
            .await
            .map_err(from_sdk)?;
        let mut past_the_name = false;
        for zone in page.hosted_zones() {
            if !same_name(zone.name(), name) {
                past_the_name = true;
                break;
            }
            if zone.caller_reference() == caller_reference {
                return Ok(Some(bare_zone_id(zone.id()).to_owned()));
            }
        }
        if page.is_truncated() && !past_the_name {
            if let Some(dns_name) = page.next_dns_name() {
                next = Some((
                    dns_name.to_owned(),
                    page.next_hosted_zone_id().map(str::to_owned),
                ));
            }
        }
    }
    Ok(None)
}

/// Empties the zone of every record but its own NS and SOA, then deletes it; a zone
/// already gone is done.
pub async fn delete_zone(
    aws: &AwsClients,
    scope: &Scope<'_>,
    zone: &HostedZone,
) -> Result<(), ActivityFailure> {
    let mut changes = Vec::new();
    let mut start: Option<(String, RrType, Option<String>)> = None;
    loop {
        let mut call = aws
            .route53
            .list_resource_record_sets()
            .hosted_zone_id(&zone.zone_id);
        if let Some((name, kind, identifier)) = start.take() {
            call = call
                .start_record_name(name)
                .start_record_type(kind)
                .set_start_record_identifier(identifier);
        }
        let Some(page) = unless_not_found(call.send().await)? else {
            return Ok(()); // the zone is gone
        };
        for record in page.resource_record_sets() {
            let apex = same_name(record.name(), &zone.name);
            if apex && matches!(record.r#type(), RrType::Ns | RrType::Soa) {
                continue;
            }
            // A DELETE must repeat the record exactly, so send it back as listed.
            changes.push(
                Change::builder()
                    .action(ChangeAction::Delete)
                    .resource_record_set(record.clone())
                    .build()
                    .map_err(|e| ActivityFailure::permanent("InvalidChange", e.to_string()))?,
            );
        }
        match (
            page.is_truncated(),
            page.next_record_name(),
            page.next_record_type(),
        ) {
            (true, Some(name), Some(kind)) => {
                start = Some((
                    name.to_owned(),
                    kind.clone(),
                    page.next_record_identifier().map(str::to_owned),
                ));
            }
            _ => break,
        }
    }
    // At most 1,000 changes go in one batch.
    for batch in changes.chunks(500) {
        let batch = ChangeBatch::builder()
            .set_changes(Some(batch.to_vec()))
            .build()
            .map_err(|e| ActivityFailure::permanent("InvalidChange", e.to_string()))?;
        let result = aws
            .route53
            .change_resource_record_sets()
            .hosted_zone_id(&zone.zone_id)
            .change_batch(batch)
            .send()
            .await;
        // A record removed by someone else meanwhile fails the batch: the next attempt
        // lists again.
        result.map_err(|error| {
            let mut error = from_sdk(error);
            if error.code == "InvalidChangeBatch" || error.code == "InvalidInput" {
                error.code = "RecordsChanged".into();
                return ActivityFailure::retryable(error.code, error.message);
            }
            error.into()
        })?;
    }
    let result = aws
        .route53
        .delete_hosted_zone()
        .id(&zone.zone_id)
        .send()
        .await;
    deleted(scope, KIND, &zone.zone_id, result)
}

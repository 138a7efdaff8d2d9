//! The guest's ingress operator publishes the default IngressController's wildcard
//! record `*.apps.<name>.<baseDomain>` (its DNSRecord, TTL 30; `<name>` being
//! `spec.dns.baseDomainPrefix` when set) in the zones of the
//! cluster's DNS config — the public one being the HostedCluster's
//! `spec.dns.publicZoneID` — pointing at the router's load balancer
//! (cluster-ingress-operator `pkg/operator/controller/dns`, `pkg/dns/aws/dns.go`:
//! `Ensure`, `Delete`); without a public zone there is nothing to publish. When the
//! IngressController goes, so does its record.
//!
//! The real provider writes an alias A record with the load balancer's canonical hosted
//! zone; moto gives classic ELBs none, so the emulator writes a CNAME to the load
//! balancer's DNS name. The operator acts with the ingress role; the emulator, with the
//! management credentials.

use aws_sdk_route53::types::{
    Change, ChangeAction, ChangeBatch, ResourceRecord, ResourceRecordSet, RrType,
};

use super::super::aws::{sdk, unbuilt, AwsError, Clients, Service};
use super::super::records::{fqdn, unescape};
use super::super::spec::Cluster;

/// The DNSRecord's TTL (`defaultRecordTTL`).
const TTL: i64 = 30;

fn record_name(cluster: &Cluster) -> String {
    format!("*.apps.{}", cluster.cluster_domain())
}

async fn change(
    clients: &Clients,
    zone_id: &str,
    action: ChangeAction,
    record: ResourceRecordSet,
) -> Result<(), AwsError> {
    let operation = "ChangeResourceRecordSets";
    let batch = ChangeBatch::builder()
        .changes(
            Change::builder()
                .action(action)
                .resource_record_set(record)
                .build()
                .map_err(|e| unbuilt(Service::Route53, operation, e))?,
        )
        .build()
        .map_err(|e| unbuilt(Service::Route53, operation, e))?;
    clients
        .route53
        .change_resource_record_sets()
        .hosted_zone_id(zone_id)
        .change_batch(batch)
        .send()
        .await
        .map_err(|e| sdk(Service::Route53, operation, e))?;
    Ok(())
}

/// UPSERTs the record to `target`.
pub(super) async fn ensure(
    clients: &Clients,
    cluster: &Cluster,
    target: &str,
) -> Result<(), AwsError> {
    if cluster.public_zone_id.is_empty() || cluster.base_domain.is_empty() || target.is_empty() {
        return Ok(());
    }
    let name = record_name(cluster);
    if current(clients, cluster).await?.is_some_and(|record| {
        record
            .resource_records()
            .iter()
            .any(|r| r.value() == target)
    }) {
        return Ok(());
    }
    let record = ResourceRecordSet::builder()
        .name(&name)
        .r#type(RrType::Cname)
        .ttl(TTL)
        .resource_records(
            ResourceRecord::builder()
                .value(target)
                .build()
                .map_err(|e| unbuilt(Service::Route53, "ChangeResourceRecordSets", e))?,
        )
        .build()
        .map_err(|e| unbuilt(Service::Route53, "ChangeResourceRecordSets", e))?;
    change(
        clients,
        &cluster.public_zone_id,
        ChangeAction::Upsert,
        record,
    )
    .await?;
    tracing::info!(cluster = %cluster.name, record = %name, %target,
                   "the guest's ingress operator published its record in the public zone");
    Ok(())
}

/// The record as it is in the public zone, if it is there (a zone that is gone has
/// none).
async fn current(
    clients: &Clients,
    cluster: &Cluster,
) -> Result<Option<ResourceRecordSet>, AwsError> {
    let wanted = fqdn(&record_name(cluster).to_ascii_lowercase());
    let listed = clients
        .route53
        .list_resource_record_sets()
        .hosted_zone_id(&cluster.public_zone_id)
        .start_record_name(&wanted)
        .start_record_type(RrType::Cname)
        .max_items(1)
        .send()
        .await
        .map_err(|e| sdk(Service::Route53, "ListResourceRecordSets", e));
    let listed = match listed {
        Ok(listed) => listed,
        Err(e) if e.code() == "NoSuchHostedZone" => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(listed
        .resource_record_sets()
        .first()
        .filter(|record| {
            fqdn(&unescape(record.name()).to_ascii_lowercase()) == wanted
                && record.r#type() == &RrType::Cname
        })
        .cloned())
}

/// Deletes the record; whether it was there.
pub(super) async fn destroy(clients: &Clients, cluster: &Cluster) -> Result<bool, AwsError> {
    if cluster.public_zone_id.is_empty() || cluster.base_domain.is_empty() {
        return Ok(false);
    }
    let Some(record) = current(clients, cluster).await? else {
        return Ok(false);
    };
    change(
        clients,
        &cluster.public_zone_id,
        ChangeAction::Delete,
        record,
    )
    .await?;
    tracing::info!(cluster = %cluster.name, record = %record_name(cluster),
                   "the guest's ingress operator deleted its record from the public zone");
    Ok(true)
}

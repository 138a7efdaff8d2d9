//! CNAME records in a zone we created, addressed by its id: PrivateLink's
//! `api.<name>.hypershift.local` and `*.apps.<name>.hypershift.local` (hypershift-aws.md §5).

use aws_sdk_route53::types::{
    Change, ChangeAction, ChangeBatch, ResourceRecord, ResourceRecordSet, RrType,
};
use hcpflow_engine::ActivityFailure;

use crate::clients::AwsClients;
use crate::error::from_sdk;
use crate::lookup::unless_not_found;
use crate::route53::same_name;
use crate::scope::Scope;

pub use hcpflow_hypershift::aws::dns::Cname;

pub const KIND: &str = "route53:record";

/// The TTL HyperShift gives its PrivateLink records.
const TTL_SECONDS: i64 = 300;

/// Creates or updates the record (UPSERT is idempotent by nature).
pub async fn upsert_cname(
    aws: &AwsClients,
    scope: &Scope<'_>,
    record: &Cname,
) -> Result<Cname, ActivityFailure> {
    let set = ResourceRecordSet::builder()
        .name(&record.name)
        .r#type(RrType::Cname)
        .ttl(TTL_SECONDS)
        .resource_records(
            ResourceRecord::builder()
                .value(&record.target)
                .build()
                .map_err(|e| ActivityFailure::permanent("InvalidRecord", e.to_string()))?,
        )
        .build()
        .map_err(|e| ActivityFailure::permanent("InvalidRecord", e.to_string()))?;
    change(aws, &record.zone_id, ChangeAction::Upsert, set)
        .await
        .map_err(|error| error.into_failure(true))?;
    scope.log.created(scope.resource(KIND, &record.ledger_id()));
    Ok(record.clone())
}

/// Deletes the record as it is now (a DELETE must match the current value); a record or
/// zone already gone is done.
pub async fn delete_cname(
    aws: &AwsClients,
    scope: &Scope<'_>,
    record: &Cname,
) -> Result<(), ActivityFailure> {
    let Some(current) =
        find_record_set(aws, &record.zone_id, &record.name, &[RrType::Cname]).await?
    else {
        return Ok(());
    };
    match change(aws, &record.zone_id, ChangeAction::Delete, current).await {
        Ok(()) => {
            scope.log.deleted(scope.resource(KIND, &record.ledger_id()));
            Ok(())
        }
        Err(error) if error.is_not_found() => Ok(()),
        // Changed or removed by someone else since the listing: list again.
        Err(error) if matches!(error.code.as_str(), "InvalidChangeBatch" | "InvalidInput") => {
            Err(ActivityFailure::retryable("RecordChanged", error.message))
        }
        Err(error) => Err(error.into()),
    }
}

async fn change(
    aws: &AwsClients,
    zone_id: &str,
    action: ChangeAction,
    set: ResourceRecordSet,
) -> Result<(), crate::AwsError> {
    let batch = Change::builder()
        .action(action)
        .resource_record_set(set)
        .build()
        .and_then(|change| ChangeBatch::builder().changes(change).build())
        .map_err(|e| crate::AwsError::new("InvalidChange", e.to_string(), None))?;
    aws.route53
        .change_resource_record_sets()
        .hosted_zone_id(zone_id)
        .change_batch(batch)
        .send()
        .await
        .map_err(from_sdk)?;
    Ok(())
}

/// The record set named `name` (a wildcard as `*`) of one of `types` in the zone, as it
/// is now; `None` when there is none, or the zone is gone.
pub async fn find_record_set(
    aws: &AwsClients,
    zone_id: &str,
    name: &str,
    types: &[RrType],
) -> Result<Option<ResourceRecordSet>, ActivityFailure> {
    let listed = aws
        .route53
        .list_resource_record_sets()
        .hosted_zone_id(zone_id)
        .start_record_name(name)
        .max_items(10)
        .send()
        .await;
    let Some(listed) = unless_not_found(listed)? else {
        return Ok(None);
    };
    Ok(listed
        .resource_record_sets()
        .iter()
        .find(|set| same_name(&unescape(set.name()), name) && types.contains(set.r#type()))
        .cloned())
}

/// Route53 lists `*` as `\052`.
fn unescape(name: &str) -> String {
    name.replace("\\052", "*")
}

#[cfg(test)]
mod tests {
    #[test]
    fn wildcards_are_listed_escaped() {
        assert_eq!(
            super::unescape("\\052.apps.demo.hypershift.local."),
            "*.apps.demo.hypershift.local."
        );
    }
}

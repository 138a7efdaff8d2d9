//! The control-plane-operator's records in the local zone (`<name>.hypershift.local`):
//! `api.` is a CNAME of the kube-apiserver-private endpoint, `*.apps.` of the
//! private-router endpoint — each endpoint's first DNS entry, as the operator writes it.

use aws_sdk_route53::types::RrType;
use hcpflow_engine::ActivityFailure;
use hcpflow_hypershift::aws::observed_privatelink::OWNER;

use crate::clients::AwsClients;
use crate::observed_privatelink::endpoints::{by_service, operator_endpoints, ENDPOINT_KIND};
use crate::observed_privatelink::{until_seen, Look};
use crate::route53::records::{find_record_set, KIND as RECORD_KIND};
use crate::route53::same_name;
use crate::scope::Scope;

pub use hcpflow_hypershift::aws::observed_privatelink::{
    PrivateLinkRecords, WaitPrivateLinkRecords,
};

/// The record the operator writes for each service's endpoint, in a zone named `zone`.
pub fn record_names(zone: &str) -> [(&'static str, String); 2] {
    let zone = zone.trim_end_matches('.');
    [
        ("kube-apiserver-private", format!("api.{zone}")),
        ("private-router", format!("*.apps.{zone}")),
    ]
}

/// The CNAMEs `names` in the zone, as `(name, target)` (Route53 lists `*` as `\052`);
/// a zone that is gone has none.
pub async fn cnames(
    aws: &AwsClients,
    zone_id: &str,
    names: &[String],
) -> Result<Vec<(String, String)>, ActivityFailure> {
    let mut found = Vec::new();
    for name in names {
        let set = find_record_set(aws, zone_id, name, &[RrType::Cname]).await?;
        if let Some(target) = set
            .as_ref()
            .and_then(|set| set.resource_records().first())
            .map(|record| record.value().to_owned())
        {
            found.push((name.clone(), target));
        }
    }
    Ok(found)
}

/// Waits until both records exist and point at the operator's endpoints; notes the
/// endpoints and records as observed.
///
/// Errors: permanent `PrivateLinkRecordsNotReady` after `timeout_secs`, naming the
/// record that is missing or points elsewhere.
pub async fn wait_privatelink_records(
    aws: &AwsClients,
    scope: &Scope<'_>,
    request: &WaitPrivateLinkRecords,
) -> Result<PrivateLinkRecords, ActivityFailure> {
    let what = format!(
        "the PrivateLink records in {} are not ready",
        request.local_zone_name
    );
    let (endpoint_ids, records) = until_seen(
        "PrivateLinkRecordsNotReady",
        &what,
        request.timeout_secs,
        || look(aws, request),
    )
    .await?;
    for id in &endpoint_ids {
        scope.log.observed(scope.resource(ENDPOINT_KIND, id), OWNER);
    }
    for (name, _) in &records {
        scope.log.observed(
            scope.resource(RECORD_KIND, &format!("{}/{name}", request.local_zone_id)),
            OWNER,
        );
    }
    Ok(PrivateLinkRecords { records })
}

type Seen = (Vec<String>, Vec<(String, String)>);

async fn look(
    aws: &AwsClients,
    request: &WaitPrivateLinkRecords,
) -> Result<Look<Seen>, ActivityFailure> {
    let endpoints = operator_endpoints(aws, &request.vpc_id).await?;
    let endpoints = match by_service(&endpoints) {
        Ok(found) => found,
        Err(why) => return Ok(Look::NotYet(why)),
    };
    let expected = record_names(&request.local_zone_name);
    let names: Vec<String> = expected.iter().map(|(_, name)| name.clone()).collect();
    let present = cnames(aws, &request.local_zone_id, &names).await?;
    let mut records = Vec::new();
    for (service, name) in &expected {
        let Some((_, endpoint)) = endpoints.iter().find(|(s, _)| s == service) else {
            continue;
        };
        let target = endpoint
            .dns_entries()
            .first()
            .and_then(|entry| entry.dns_name())
            .unwrap_or_default();
        match present.iter().find(|(n, _)| n == name) {
            Some((_, value)) if same_name(value, target) => {
                records.push((name.clone(), value.clone()));
            }
            Some((_, value)) => {
                return Ok(Look::NotYet(format!(
                    "{name} points at {value}, not at the {service} endpoint {target}"
                )))
            }
            None => return Ok(Look::NotYet(format!("{name} does not exist yet"))),
        }
    }
    let ids = endpoints
        .iter()
        .filter_map(|(_, endpoint)| endpoint.vpc_endpoint_id().map(str::to_owned))
        .collect();
    Ok(Look::Seen((ids, records)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_records_are_named_as_the_operator_names_them() {
        let names = super::record_names("demo.hypershift.local.");
        assert_eq!(names[0].1, "api.demo.hypershift.local");
        assert_eq!(names[1].1, "*.apps.demo.hypershift.local");
    }
}

//! The control-plane-operator's records in the guest's private zone
//! `<name>.hypershift.local` (control-plane-operator/controllers/awsprivatelink/
//! route53.go: `lookupZoneID`, `CreateRecord`, `FindRecord`, `DeleteRecord`): the zone is
//! found among the private zones of ListHostedZones by name; each record is an UPSERT of
//! a CNAME with TTL 300 to the endpoint's first DNS name. The calls are the CPO's, with
//! its role's permissions (record calls on `arn:aws:route53:::hostedzone/<id>`); errors
//! are reported as the Go SDK writes them, as the real controller passes them on.

use aws_sdk_route53::types::{
    Change, ChangeAction, ChangeBatch, ResourceRecord, ResourceRecordSet, RrType,
};

use super::aws::{AwsError, Clients, Service};
use super::iam::Cpo;

fn zone_arn(zone_id: &str) -> String {
    format!("arn:aws:route53:::hostedzone/{zone_id}")
}

/// `lookupZoneID`: the id of the private zone named `name` (`Ok(None)` when there is
/// none: the real function's "hosted zone %s not found").
pub(super) async fn lookup_zone(
    clients: &Clients,
    cpo: &Cpo,
    name: &str,
) -> Result<Option<String>, AwsError> {
    let wanted = name.trim_end_matches('.');
    let mut marker = None;
    loop {
        let page = cpo
            .call(
                Service::Route53,
                "ListHostedZones",
                None,
                clients
                    .route53
                    .list_hosted_zones()
                    .set_marker(marker.take())
                    .send(),
            )
            .await?;
        let found = page.hosted_zones().iter().find(|zone| {
            zone.config().is_some_and(|c| c.private_zone())
                && zone.name().trim_end_matches('.') == wanted
        });
        if let Some(zone) = found {
            return Ok(Some(
                zone.id().trim_start_matches("/hostedzone/").to_owned(),
            ));
        }
        match page.next_marker() {
            Some(next) if page.is_truncated() => marker = Some(next.to_owned()),
            _ => return Ok(None),
        }
    }
}

fn build_error(e: impl std::fmt::Display) -> AwsError {
    AwsError {
        service: Service::Route53,
        operation: "ChangeResourceRecordSets",
        code: "Unknown".into(),
        message: e.to_string(),
        answer: None,
        identity: false,
    }
}

async fn change(
    clients: &Clients,
    cpo: &Cpo,
    zone_id: &str,
    action: ChangeAction,
    record: ResourceRecordSet,
) -> Result<(), AwsError> {
    let batch = ChangeBatch::builder()
        .changes(
            Change::builder()
                .action(action)
                .resource_record_set(record)
                .build()
                .map_err(build_error)?,
        )
        .build()
        .map_err(build_error)?;
    let arn = zone_arn(zone_id);
    cpo.call(
        Service::Route53,
        "ChangeResourceRecordSets",
        Some(&arn),
        clients
            .route53
            .change_resource_record_sets()
            .hosted_zone_id(zone_id)
            .change_batch(batch)
            .send(),
    )
    .await?;
    Ok(())
}

/// `CreateRecord`: UPSERT `name` CNAME `value`, TTL 300.
pub(super) async fn upsert_cname(
    clients: &Clients,
    cpo: &Cpo,
    zone_id: &str,
    name: &str,
    value: &str,
) -> Result<(), AwsError> {
    let record = ResourceRecordSet::builder()
        .name(name)
        .r#type(RrType::Cname)
        .ttl(300)
        .resource_records(
            ResourceRecord::builder()
                .value(value)
                .build()
                .map_err(build_error)?,
        )
        .build()
        .map_err(build_error)?;
    change(clients, cpo, zone_id, ChangeAction::Upsert, record).await
}

/// `cleanRecordName`: Route 53 writes `*` and other specials as `\NNN` octal escapes.
pub(super) fn unescape(name: &str) -> String {
    let mut out = String::new();
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            let digits: String = chars.clone().take(3).collect();
            if digits.len() == 3 && digits.chars().all(|d| d.is_digit(8)) {
                if let Some(decoded) = u32::from_str_radix(&digits, 8)
                    .ok()
                    .and_then(char::from_u32)
                {
                    out.push(decoded);
                    for _ in 0..3 {
                        chars.next();
                    }
                    continue;
                }
            }
        }
        out.push(c);
    }
    out
}

pub(super) fn fqdn(name: &str) -> String {
    if name.ends_with('.') {
        name.to_owned()
    } else {
        format!("{name}.")
    }
}

/// `FindRecord` and `DeleteRecord`: removes the CNAME `name` if it is there; whether it
/// was.
pub(super) async fn delete_cname(
    clients: &Clients,
    cpo: &Cpo,
    zone_id: &str,
    name: &str,
) -> Result<bool, AwsError> {
    let wanted = fqdn(&name.to_ascii_lowercase());
    let arn = zone_arn(zone_id);
    let listed = cpo
        .call(
            Service::Route53,
            "ListResourceRecordSets",
            Some(&arn),
            clients
                .route53
                .list_resource_record_sets()
                .hosted_zone_id(zone_id)
                .start_record_name(&wanted)
                .start_record_type(RrType::Cname)
                .max_items(1)
                .send(),
        )
        .await?;
    let Some(record) = listed.resource_record_sets().first() else {
        return Ok(false);
    };
    let found = fqdn(&unescape(record.name()).to_ascii_lowercase());
    if found != wanted || record.r#type() != &RrType::Cname {
        return Ok(false);
    }
    change(clients, cpo, zone_id, ChangeAction::Delete, record.clone()).await?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    #[test]
    fn octal_escapes_are_undone() {
        assert_eq!(
            super::unescape("\\052.apps.demo.hypershift.local."),
            "*.apps.demo.hypershift.local."
        );
        assert_eq!(super::unescape("api.demo."), "api.demo.");
    }
}

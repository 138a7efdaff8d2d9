//! The cluster's private zones: one however often the create runs (moto itself would
//! make a second zone for a repeated CallerReference), emptied before deletion, and the
//! public zone check.

use aws_sdk_route53::types::{HostedZoneConfig, VpcRegion};
use hcpflow_aws::ec2::vpc::{create_vpc, delete_vpc, CreateVpc};
use hcpflow_aws::route53::public_zone::{find_public_zone, FindPublicZone};
use hcpflow_aws::route53::records::{delete_cname, upsert_cname, Cname};
use hcpflow_aws::route53::same_name;
use hcpflow_aws::route53::zone::{create_private_zone, delete_zone, CreatePrivateZone};
use hcpflow_engine::Ledger;

use crate::support::{stack, unique, Stack};

/// Zones of this name, as moto lists them.
async fn zones_named(stack: &Stack, name: &str) -> Vec<String> {
    let listed = stack
        .moto
        .route53
        .list_hosted_zones_by_name()
        .dns_name(name)
        .send()
        .await
        .unwrap();
    listed
        .hosted_zones()
        .iter()
        .filter(|zone| same_name(zone.name(), name))
        .map(|zone| zone.id().to_owned())
        .collect()
}

#[tokio::test]
async fn a_private_zone_is_made_once_tagged_and_emptied_before_it_is_deleted() {
    let Some(stack) =
        stack("a_private_zone_is_made_once_tagged_and_emptied_before_it_is_deleted").await
    else {
        return;
    };
    let infra_id = unique("dns-");
    let log = Ledger::default();
    let keys: Vec<String> = (1..=3).map(|n| format!("hf-{infra_id}-{n}")).collect();
    let scope = |n: usize| stack.scope(&keys[n], &infra_id, &log);
    let vpc = create_vpc(
        &stack.aws,
        &scope(0),
        &CreateVpc {
            infra_id: infra_id.clone(),
            cidr_block: "10.0.0.0/16".into(),
            resource_tags: Default::default(),
        },
    )
    .await
    .unwrap();
    let request = CreatePrivateZone {
        infra_id: infra_id.clone(),
        name: format!("{infra_id}.hypershift.local"),
        vpc_id: vpc.vpc_id.clone(),
        resource_tags: Default::default(),
    };
    let first = create_private_zone(&stack.aws, &scope(1), &request)
        .await
        .unwrap();
    for _ in 0..2 {
        let again = create_private_zone(&stack.aws, &scope(1), &request)
            .await
            .unwrap();
        assert_eq!(again, first);
    }
    assert_eq!(zones_named(&stack, &request.name).await.len(), 1);
    let zone = stack
        .moto
        .route53
        .get_hosted_zone()
        .id(&first.zone_id)
        .send()
        .await
        .unwrap();
    assert_eq!(zone.vpcs()[0].vpc_id(), Some(vpc.vpc_id.as_str()));
    assert!(zone.hosted_zone().unwrap().config().unwrap().private_zone());
    // A name asked for before it exists is cached as absent for a minute, not a day.
    let records = stack
        .moto
        .route53
        .list_resource_record_sets()
        .hosted_zone_id(&first.zone_id)
        .send()
        .await
        .unwrap();
    let soa = records
        .resource_record_sets()
        .iter()
        .find(|r| r.r#type().as_str() == "SOA")
        .unwrap();
    let value = soa.resource_records()[0].value();
    assert_eq!(value.split(' ').nth(6), Some("60"), "{value}");
    let tags = stack
        .moto
        .route53
        .list_tags_for_resource()
        .resource_type(aws_sdk_route53::types::TagResourceType::Hostedzone)
        .resource_id(&first.zone_id)
        .send()
        .await
        .unwrap();
    let tags = tags.resource_tag_set().unwrap().tags();
    assert!(tags.iter().any(|t| t.key()
        == Some(format!("kubernetes.io/cluster/{infra_id}").as_str())
        && t.value() == Some("owned")));

    // Records in it: the delete empties the zone first (Route53 refuses a non-empty one).
    let api = Cname {
        zone_id: first.zone_id.clone(),
        name: format!("api.{}", request.name),
        target: "vpce-1.example.internal".into(),
    };
    let apps = Cname {
        zone_id: first.zone_id.clone(),
        name: format!("*.apps.{}", request.name),
        target: "vpce-1.example.internal".into(),
    };
    for record in [&api, &apps, &api] {
        upsert_cname(&stack.aws, &scope(2), record).await.unwrap();
    }
    delete_cname(&stack.aws, &scope(2), &api).await.unwrap();
    delete_cname(&stack.aws, &scope(2), &api).await.unwrap();
    for _ in 0..2 {
        delete_zone(&stack.aws, &scope(1), &first).await.unwrap();
    }
    assert!(zones_named(&stack, &request.name).await.is_empty());
    // The wildcard record went with the zone; deleting it now is done too.
    delete_cname(&stack.aws, &scope(2), &apps).await.unwrap();
    delete_vpc(&stack.aws, &scope(0), &vpc).await.unwrap();

    let noted: Vec<(bool, String)> = log
        .take()
        .into_iter()
        .filter(|noted| noted.resource().kind.starts_with("route53"))
        .map(|noted| {
            (
                matches!(noted, hcpflow_engine::Noted::Created(_)),
                noted.resource().kind.clone(),
            )
        })
        .collect();
    assert!(
        noted.contains(&(false, "route53:hosted-zone".into())),
        "{noted:?}"
    );
    assert!(
        noted.contains(&(false, "route53:record".into())),
        "{noted:?}"
    );
}

#[tokio::test]
async fn the_public_zone_is_found_by_exact_name_and_a_missing_one_is_a_clear_permanent_error() {
    let Some(stack) = stack(
        "the_public_zone_is_found_by_exact_name_and_a_missing_one_is_a_clear_permanent_error",
    )
    .await
    else {
        return;
    };
    let domain = format!("{}.example.com", unique("pub"));
    let missing = find_public_zone(
        &stack.aws,
        &FindPublicZone {
            base_domain: domain.clone(),
        },
    )
    .await
    .unwrap_err();
    assert!(!missing.retryable);
    assert_eq!(missing.kind, "PublicZoneNotFound");
    assert!(missing.message.contains(&domain), "{}", missing.message);

    let created = stack
        .moto
        .route53
        .create_hosted_zone()
        .name(&domain)
        .caller_reference(unique("ref"))
        .hosted_zone_config(HostedZoneConfig::builder().private_zone(false).build())
        .send()
        .await
        .unwrap();
    let expected = created
        .hosted_zone()
        .unwrap()
        .id()
        .rsplit('/')
        .next()
        .unwrap()
        .to_owned();
    // A private zone of the same name does not count.
    let vpc = stack
        .moto
        .ec2
        .create_vpc()
        .cidr_block("10.9.0.0/16")
        .send()
        .await
        .unwrap();
    let vpc_id = vpc.vpc().unwrap().vpc_id().unwrap().to_owned();
    stack
        .moto
        .route53
        .create_hosted_zone()
        .name(&domain)
        .caller_reference(unique("ref"))
        .vpc(
            aws_sdk_route53::types::Vpc::builder()
                .vpc_id(&vpc_id)
                .vpc_region(VpcRegion::UsEast1)
                .build(),
        )
        // AWS makes a zone with a VPC private; moto only when told.
        .hosted_zone_config(HostedZoneConfig::builder().private_zone(true).build())
        .send()
        .await
        .unwrap();
    let found = find_public_zone(
        &stack.aws,
        &FindPublicZone {
            base_domain: format!("{domain}."),
        },
    )
    .await
    .unwrap();
    assert_eq!(found.zone_id, expected);
}

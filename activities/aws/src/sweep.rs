//! The tag sweep: everything AWS still holds of an infra id. Destroy runs it after the
//! compensations to catch leaks (and fails if anything is left); tests run it to prove
//! there are none.
//!
//! What is searched, and how:
//! - EC2 (VPCs, subnets, gateways, route tables, security groups, endpoints, addresses,
//!   DHCP options, endpoint services): by the cluster tag. NAT gateways are listed and
//!   their tags compared here: moto ignores tag filters on them.
//! - ELBv2 load balancers and target groups: listed, tags read in batches of 20.
//! - What the guest makes (`crate::guest::find`): instances and volumes by the cluster
//!   tag, classic load balancers (tags read in batches of 20), the
//!   `<infra-id>-image-registry-…` buckets by name.
//! - IAM: the eight roles and the instance profile by their exact names, the OIDC
//!   provider by its exact issuer path.
//! - Route53: private zones carrying the cluster tag.
//! - S3: objects under `<infra-id>/` in the OIDC bucket.
//!
//! The bucket is searched in the management side's account; when that is another
//! account than the hosted cluster's, its EC2 and ELBv2 objects of the infra id (the
//! operator's load balancer and endpoint service) are searched there too.

use aws_sdk_ec2::types::Filter;
use hcpflow_engine::ActivityFailure;

use crate::clients::AwsClients;
use crate::error::from_sdk;
use crate::lookup::unless_not_found;
use crate::naming;
use crate::roles::OPERATOR_ROLES;

pub use hcpflow_hypershift::aws::sweep::{FindLeftovers, Leftover};

/// Everything of the infra id that AWS still holds, sorted by kind and id.
pub async fn find_leftovers(
    aws: &AwsClients,
    management: &AwsClients,
    request: &FindLeftovers,
) -> Result<Vec<Leftover>, ActivityFailure> {
    let mut found = Vec::new();
    ec2(aws, &request.infra_id, &mut found).await?;
    elbv2(aws, &request.infra_id, &mut found).await?;
    found.extend(crate::guest::find::guest_only(aws, &request.infra_id).await?);
    iam(aws, request, &mut found).await?;
    route53(aws, &request.infra_id, &mut found).await?;
    if management.account != aws.account {
        ec2(management, &request.infra_id, &mut found).await?;
        elbv2(management, &request.infra_id, &mut found).await?;
    }
    if let Some(bucket) = &request.oidc_bucket {
        s3(management, bucket, &request.infra_id, &mut found).await?;
    }
    found.sort();
    found.dedup();
    Ok(found)
}

fn push(found: &mut Vec<Leftover>, kind: &str, id: Option<&str>) {
    if let Some(id) = id {
        found.push(Leftover {
            kind: kind.to_owned(),
            id: id.to_owned(),
        });
    }
}

fn has_cluster_tag<'a>(
    infra_id: &str,
    mut tags: impl Iterator<Item = (Option<&'a str>, Option<&'a str>)>,
) -> bool {
    let key = naming::cluster_tag_key(infra_id);
    tags.any(|(k, v)| k == Some(key.as_str()) && v == Some(naming::CLUSTER_TAG_VALUE))
}

async fn ec2(
    aws: &AwsClients,
    infra_id: &str,
    found: &mut Vec<Leftover>,
) -> Result<(), ActivityFailure> {
    let ec2 = &aws.ec2;
    let owned = || crate::ec2::tags::owned_by(infra_id);

    let vpcs = ec2
        .describe_vpcs()
        .filters(owned())
        .send()
        .await
        .map_err(from_sdk)?;
    for vpc in vpcs.vpcs() {
        push(found, crate::ec2::vpc::KIND, vpc.vpc_id());
    }
    let subnets = ec2
        .describe_subnets()
        .filters(owned())
        .send()
        .await
        .map_err(from_sdk)?;
    for subnet in subnets.subnets() {
        push(found, crate::ec2::subnet::KIND, subnet.subnet_id());
    }
    let gateways = ec2
        .describe_internet_gateways()
        .filters(owned())
        .send()
        .await
        .map_err(from_sdk)?;
    for gateway in gateways.internet_gateways() {
        push(
            found,
            crate::ec2::internet_gateway::KIND,
            gateway.internet_gateway_id(),
        );
    }
    let tables = ec2
        .describe_route_tables()
        .filters(owned())
        .send()
        .await
        .map_err(from_sdk)?;
    for table in tables.route_tables() {
        push(found, crate::ec2::route_table::KIND, table.route_table_id());
    }
    let groups = ec2
        .describe_security_groups()
        .filters(owned())
        .send()
        .await
        .map_err(from_sdk)?;
    for group in groups.security_groups() {
        push(
            found,
            crate::privatelink::security_group::KIND,
            group.group_id(),
        );
    }
    let endpoints = ec2
        .describe_vpc_endpoints()
        .filters(owned())
        .send()
        .await
        .map_err(from_sdk)?;
    for endpoint in endpoints.vpc_endpoints() {
        // One still deleting is still there.
        let state = crate::ec2::endpoint_state::state(endpoint);
        if !matches!(state.as_str(), "deleted" | "rejected" | "failed") {
            push(
                found,
                crate::ec2::s3_endpoint::KIND,
                endpoint.vpc_endpoint_id(),
            );
        }
    }
    let addresses = ec2
        .describe_addresses()
        .filters(owned())
        .send()
        .await
        .map_err(from_sdk)?;
    for address in addresses.addresses() {
        push(
            found,
            crate::ec2::nat_gateway::EIP_KIND,
            address.allocation_id(),
        );
    }
    let dhcp = ec2
        .describe_dhcp_options()
        .filters(owned())
        .send()
        .await
        .map_err(from_sdk)?;
    for options in dhcp.dhcp_options() {
        push(found, crate::ec2::dhcp::KIND, options.dhcp_options_id());
    }

    // NAT gateways: tags compared here (moto ignores `tag:` filters on them).
    let mut token = None;
    loop {
        let page = ec2
            .describe_nat_gateways()
            .filter(
                Filter::builder()
                    .name("state")
                    .values("pending")
                    .values("available")
                    .values("deleting")
                    .build(),
            )
            .set_next_token(token)
            .send()
            .await
            .map_err(from_sdk)?;
        for nat in page.nat_gateways() {
            if has_cluster_tag(infra_id, nat.tags().iter().map(|t| (t.key(), t.value()))) {
                push(
                    found,
                    crate::ec2::nat_gateway::NAT_KIND,
                    nat.nat_gateway_id(),
                );
            }
        }
        token = page.next_token().map(str::to_owned);
        if token.is_none() {
            break;
        }
    }

    for service in crate::privatelink::endpoint_service::live_services(aws).await? {
        if has_cluster_tag(
            infra_id,
            service.tags().iter().map(|t| (t.key(), t.value())),
        ) {
            push(
                found,
                crate::privatelink::endpoint_service::KIND,
                service.service_id(),
            );
        }
    }
    Ok(())
}

/// The v2 load balancers and target groups tagged for the infra id.
pub(crate) async fn elbv2_tagged(
    aws: &AwsClients,
    infra_id: &str,
) -> Result<Vec<Leftover>, ActivityFailure> {
    let mut found = Vec::new();
    elbv2(aws, infra_id, &mut found).await?;
    Ok(found)
}

async fn elbv2(
    aws: &AwsClients,
    infra_id: &str,
    found: &mut Vec<Leftover>,
) -> Result<(), ActivityFailure> {
    use crate::privatelink::load_balancer::{LOAD_BALANCER_KIND, TARGET_GROUP_KIND};
    let elbv2 = &aws.elbv2;
    let mut arns: Vec<(&str, String)> = Vec::new();
    let mut marker = None;
    loop {
        let page = elbv2
            .describe_load_balancers()
            .set_marker(marker)
            .send()
            .await
            .map_err(from_sdk)?;
        arns.extend(
            page.load_balancers()
                .iter()
                .filter_map(|lb| lb.load_balancer_arn())
                .map(|arn| (LOAD_BALANCER_KIND, arn.to_owned())),
        );
        marker = page.next_marker().map(str::to_owned);
        if marker.is_none() {
            break;
        }
    }
    let mut marker = None;
    loop {
        let page = elbv2
            .describe_target_groups()
            .set_marker(marker)
            .send()
            .await
            .map_err(from_sdk)?;
        arns.extend(
            page.target_groups()
                .iter()
                .filter_map(|tg| tg.target_group_arn())
                .map(|arn| (TARGET_GROUP_KIND, arn.to_owned())),
        );
        marker = page.next_marker().map(str::to_owned);
        if marker.is_none() {
            break;
        }
    }
    for batch in arns.chunks(20) {
        let described = elbv2
            .describe_tags()
            .set_resource_arns(Some(batch.iter().map(|(_, arn)| arn.clone()).collect()))
            .send()
            .await;
        // A load balancer deleted between the listing and this call fails the batch.
        let Some(described) = unless_not_found(described)? else {
            continue;
        };
        for description in described.tag_descriptions() {
            if has_cluster_tag(
                infra_id,
                description.tags().iter().map(|t| (t.key(), t.value())),
            ) {
                let arn = description.resource_arn();
                let kind = batch
                    .iter()
                    .find(|(_, candidate)| Some(candidate.as_str()) == arn)
                    .map(|(kind, _)| *kind)
                    .unwrap_or(LOAD_BALANCER_KIND);
                push(found, kind, arn);
            }
        }
    }
    Ok(())
}

async fn iam(
    aws: &AwsClients,
    request: &FindLeftovers,
    found: &mut Vec<Leftover>,
) -> Result<(), ActivityFailure> {
    let infra_id = request.infra_id.as_str();
    let names = OPERATOR_ROLES
        .iter()
        .map(|role| role.name(infra_id))
        .chain([crate::iam::worker::role_name(infra_id)]);
    for name in names {
        let role = unless_not_found(aws.iam.get_role().role_name(&name).send().await)?;
        if let Some(arn) = role.as_ref().and_then(|r| r.role()).map(|r| r.arn()) {
            push(found, crate::iam::role::KIND, Some(arn));
        }
    }
    let profile_name = crate::iam::worker::instance_profile_name(infra_id);
    let profile = unless_not_found(
        aws.iam
            .get_instance_profile()
            .instance_profile_name(&profile_name)
            .send()
            .await,
    )?;
    if let Some(arn) = profile
        .as_ref()
        .and_then(|p| p.instance_profile())
        .map(|p| p.arn())
    {
        push(found, crate::iam::worker::PROFILE_KIND, Some(arn));
    }
    let providers = aws
        .iam
        .list_open_id_connect_providers()
        .send()
        .await
        .map_err(from_sdk)?;
    for arn in providers
        .open_id_connect_provider_list()
        .iter()
        .filter_map(|p| p.arn())
    {
        let Some(path) = crate::iam::oidc_provider::provider_path(arn) else {
            continue;
        };
        // With the bucket known, the whole issuer; else the last path segment (exactly).
        let ours = match &request.oidc_bucket {
            Some(bucket) => {
                path.starts_with(&format!("{bucket}.s3."))
                    && path.ends_with(&format!("/{infra_id}"))
            }
            None => path.rsplit('/').next() == Some(infra_id),
        };
        if ours {
            push(found, crate::iam::oidc_provider::KIND, Some(arn));
        }
    }
    Ok(())
}

async fn route53(
    aws: &AwsClients,
    infra_id: &str,
    found: &mut Vec<Leftover>,
) -> Result<(), ActivityFailure> {
    use aws_sdk_route53::types::TagResourceType;
    let mut private = Vec::new();
    let mut marker = None;
    loop {
        let page = aws
            .route53
            .list_hosted_zones()
            .set_marker(marker)
            .send()
            .await
            .map_err(from_sdk)?;
        private.extend(
            page.hosted_zones()
                .iter()
                .filter(|zone| zone.config().is_some_and(|c| c.private_zone()))
                .map(|zone| crate::route53::bare_zone_id(zone.id()).to_owned()),
        );
        marker = page.next_marker().map(str::to_owned);
        if !page.is_truncated() || marker.is_none() {
            break;
        }
    }
    for batch in private.chunks(10) {
        let tagged = aws
            .route53
            .list_tags_for_resources()
            .resource_type(TagResourceType::Hostedzone)
            .set_resource_ids(Some(batch.to_vec()))
            .send()
            .await;
        let Some(tagged) = unless_not_found(tagged)? else {
            continue;
        };
        for set in tagged.resource_tag_sets() {
            if has_cluster_tag(infra_id, set.tags().iter().map(|t| (t.key(), t.value()))) {
                push(found, crate::route53::zone::KIND, set.resource_id());
            }
        }
    }
    Ok(())
}

async fn s3(
    aws: &AwsClients,
    bucket: &str,
    infra_id: &str,
    found: &mut Vec<Leftover>,
) -> Result<(), ActivityFailure> {
    // No bucket, no objects.
    let aws = &match crate::oidc::documents::bucket_clients(aws, bucket).await {
        Ok(clients) => clients,
        Err(failure) if failure.kind == "OidcBucketMissing" => return Ok(()),
        Err(failure) => return Err(failure),
    };
    let mut token = None;
    loop {
        let page = aws
            .s3
            .list_objects_v2()
            .bucket(bucket)
            .prefix(format!("{infra_id}/"))
            .set_continuation_token(token)
            .send()
            .await;
        // No bucket, no objects.
        let Some(page) = unless_not_found(page)? else {
            return Ok(());
        };
        for object in page.contents() {
            if let Some(key) = object.key() {
                push(
                    found,
                    crate::oidc::documents::KIND,
                    Some(&format!("{bucket}/{key}")),
                );
            }
        }
        token = page.next_continuation_token().map(str::to_owned);
        if token.is_none() {
            return Ok(());
        }
    }
}

//! The control-plane-operator's AWSEndpointService controller in the guest VPC
//! (control-plane-operator/controllers/awsprivatelink/awsprivatelink_controller.go:
//! `reconcileAWSEndpointService` and `delete`), for one private Service once the
//! hypershift-operator has made its endpoint service:
//!
//! - the endpoint security group `<infraID>-vpce-<service>` ("VPC endpoint security
//!   group"; the resource tags, `kubernetes.io/cluster/<infraID>=owned`, `Name`), with
//!   ingress on the Service's port from each machine CIDR ("Control plane service"),
//!   `reconcileAWSEndpointSecurityGroup`;
//! - an Interface endpoint to the endpoint service in `cloudProviderConfig.vpc`, tagged
//!   with the resource tags and `AWSEndpointService=<service>` (and found by them), in
//!   the NodePools' subnets, one per availability zone (`deduplicateSubnetsByAZ`), with
//!   that security group; when the NodePools' subnets change, ModifyVpcEndpoint adds and
//!   removes subnets (`modifyEndpointIfNeeded`); with no NodePool yet the endpoint has
//!   no subnet, as the real one creates it;
//! - the CNAMEs in `<name>.hypershift.local` (see `records`).
//!
//! Every call is the CPO's, with its role's permissions; the messages of
//! `AWSEndpointAvailable=False` are the controller's.
//!
//! moto: DeleteVpcEndpoints leaves the endpoint listed as `deleted` (AWS drops it), so
//! gone endpoints are skipped; and ModifyVpcEndpoint changes an endpoint's subnets
//! without making or removing its network interfaces (AWS does both). When the
//! interfaces do not match the subnets after a change, the emulator replaces the
//! endpoint (with the management credentials: this stands in for AWS, not for the
//! CPO), so that every subnet of an endpoint has its interface as on AWS.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_ec2::types::{
    DnsEntry, Filter, IpPermission, IpRange, ResourceType, SecurityGroup, Tag, TagSpecification,
    VpcEndpoint, VpcEndpointType,
};

use super::aws::{sdk, AwsError, Clients, Service};
use super::default_security_group::{self, filters as group_filters};
use super::iam::Cpo;
use super::records;
use super::spec::{Cluster, PrivateService};

/// `vpcEndpointSecurityGroupName`.
fn group_name(cluster: &Cluster, service: &str) -> String {
    format!("{}-vpce-{service}", cluster.infra_id)
}

/// `apiTagToEC2Tag` / `apiTagToEC2Filter`: the resource tags and the service's name.
fn endpoint_tags(cluster: &Cluster, service: &str) -> Vec<(String, String)> {
    let mut tags = cluster.resource_tags.clone();
    tags.push(("AWSEndpointService".into(), service.to_owned()));
    tags
}

fn is_gone(endpoint: &VpcEndpoint) -> bool {
    endpoint.state().is_some_and(|s| {
        matches!(
            s.as_str().to_ascii_lowercase().as_str(),
            "deleted" | "deleting" | "failed" | "rejected" | "expired"
        )
    })
}

async fn find_group(
    clients: &Clients,
    cpo: &Cpo,
    cluster: &Cluster,
    service: &str,
) -> Result<Option<SecurityGroup>, AwsError> {
    let found = cpo
        .call(
            Service::Ec2,
            "DescribeSecurityGroups",
            None,
            clients
                .ec2
                .describe_security_groups()
                .set_filters(Some(group_filters(
                    &cluster.infra_id,
                    &group_name(cluster, service),
                )))
                .send(),
        )
        .await?;
    Ok(found.security_groups().first().cloned())
}

/// `VPCEndpointSecurityGroupRules`.
fn ingress_rules(cluster: &Cluster, port: i32) -> Vec<IpPermission> {
    cluster
        .machine_cidrs
        .iter()
        .map(|cidr| {
            IpPermission::builder()
                .ip_protocol("tcp")
                .from_port(port)
                .to_port(port)
                .ip_ranges(
                    IpRange::builder()
                        .cidr_ip(cidr)
                        .description("Control plane service")
                        .build(),
                )
                .build()
        })
        .collect()
}

/// `isPermissionPresent`: same ports, protocol and CIDRs with their descriptions.
fn present(rule: &IpPermission, existing: &[IpPermission]) -> bool {
    let ranges = |p: &IpPermission| -> Vec<(Option<String>, Option<String>)> {
        p.ip_ranges()
            .iter()
            .map(|r| {
                (
                    r.description().map(str::to_owned),
                    r.cidr_ip().map(str::to_owned),
                )
            })
            .collect()
    };
    existing.iter().any(|e| {
        e.from_port() == rule.from_port()
            && e.to_port() == rule.to_port()
            && e.ip_protocol() == rule.ip_protocol()
            && ranges(e) == ranges(rule)
    })
}

/// `reconcileAWSEndpointSecurityGroup`: the group's id.
async fn security_group(
    clients: &Clients,
    cpo: &Cpo,
    cluster: &Cluster,
    service: &PrivateService,
) -> Result<String, String> {
    let name = group_name(cluster, service.name);
    let found = find_group(clients, cpo, cluster, service.name)
        .await
        .map_err(|e| format!("cannot list security groups: {e}"))?;
    let group = match found {
        Some(group) => group,
        None => {
            let mut tags = cluster.resource_tags.clone();
            if !tags.iter().any(|(k, _)| k == "Name") {
                tags.push(("Name".into(), name.clone()));
            }
            let tags: Vec<Tag> = tags
                .into_iter()
                .map(|(k, v)| Tag::builder().key(k).value(v).build())
                .collect();
            let create_failed =
                |e: AwsError| format!("failed to create security group, code: {}", e.code());
            cpo.allow_tagging("CreateSecurityGroup")
                .map_err(create_failed)?;
            let created = cpo
                .call(
                    Service::Ec2,
                    "CreateSecurityGroup",
                    None,
                    clients
                        .ec2
                        .create_security_group()
                        .group_name(&name)
                        .description("VPC endpoint security group")
                        .vpc_id(&cluster.vpc)
                        .tag_specifications(
                            TagSpecification::builder()
                                .resource_type(ResourceType::SecurityGroup)
                                .set_tags(Some(tags))
                                .build(),
                        )
                        .send(),
                )
                .await
                .map_err(create_failed)?;
            let id = created.group_id().unwrap_or_default().to_owned();
            tracing::info!(cluster = %cluster.name, service = service.name, group = %id,
                           "the control-plane-operator created an endpoint security group");
            let fetched = cpo
                .call(
                    Service::Ec2,
                    "DescribeSecurityGroups",
                    None,
                    clients.ec2.describe_security_groups().group_ids(&id).send(),
                )
                .await
                .map_err(|e| {
                    format!(
                        "failed to wait for security group to exist (id: {id}), code: {}",
                        e.code()
                    )
                })?;
            fetched
                .security_groups()
                .first()
                .cloned()
                .ok_or_else(|| format!("failed to fetch security group (id: {id})"))?
        }
    };
    let id = group.group_id().unwrap_or_default().to_owned();
    let missing: Vec<IpPermission> = ingress_rules(cluster, service.port)
        .into_iter()
        .filter(|rule| !present(rule, group.ip_permissions()))
        .collect();
    if !missing.is_empty() {
        let authorized = cpo
            .call(
                Service::Ec2,
                "AuthorizeSecurityGroupIngress",
                None,
                clients
                    .ec2
                    .authorize_security_group_ingress()
                    .group_id(&id)
                    .set_ip_permissions(Some(missing))
                    .send(),
            )
            .await;
        if let Err(e) = authorized {
            if e.code() != "InvalidPermission.Duplicate" {
                return Err(format!(
                    "failed to set security group ingress rules, code: {}",
                    e.code()
                ));
            }
        }
    }
    Ok(id)
}

/// `deduplicateSubnetsByAZ` / `pickOneSubnetPerAZ`: the lowest subnet id of each zone,
/// sorted; the zones are learnt once (DescribeSubnets, as the CPO) and kept.
async fn one_per_zone(
    clients: &Clients,
    cpo: &Cpo,
    subnets: &[String],
    zones: &mut HashMap<String, String>,
) -> Result<Vec<String>, AwsError> {
    if subnets.len() <= 1 {
        return Ok(subnets.to_vec());
    }
    let unknown: Vec<String> = subnets
        .iter()
        .filter(|s| !zones.contains_key(*s))
        .cloned()
        .collect();
    if !unknown.is_empty() {
        let described = cpo
            .call(
                Service::Ec2,
                "DescribeSubnets",
                None,
                clients
                    .ec2
                    .describe_subnets()
                    .set_subnet_ids(Some(unknown))
                    .send(),
            )
            .await?;
        for subnet in described.subnets() {
            zones.insert(
                subnet.subnet_id().unwrap_or_default().to_owned(),
                subnet.availability_zone().unwrap_or_default().to_owned(),
            );
        }
    }
    let mut sorted = subnets.to_vec();
    sorted.sort();
    let mut by_zone: BTreeMap<String, String> = BTreeMap::new();
    for id in sorted {
        let zone = zones.get(&id).cloned().unwrap_or_default();
        by_zone.entry(zone).or_insert(id);
    }
    let mut picked: Vec<String> = by_zone.into_values().collect();
    picked.sort();
    Ok(picked)
}

fn tag_filters(tags: &[(String, String)]) -> Vec<Filter> {
    tags.iter()
        .map(|(k, v)| Filter::builder().name(format!("tag:{k}")).values(v).build())
        .collect()
}

/// The CPO's live endpoint of this service, found by its tags.
async fn find_endpoint(
    clients: &Clients,
    cpo: &Cpo,
    cluster: &Cluster,
    service: &str,
) -> Result<Option<VpcEndpoint>, AwsError> {
    let found = cpo
        .call(
            Service::Ec2,
            "DescribeVpcEndpoints",
            None,
            clients
                .ec2
                .describe_vpc_endpoints()
                .set_filters(Some(tag_filters(&endpoint_tags(cluster, service))))
                .send(),
        )
        .await?;
    Ok(found.vpc_endpoints().iter().find(|e| !is_gone(e)).cloned())
}

/// `diffIDs`.
fn diff(desired: &[String], existing: &[String]) -> (Vec<String>, Vec<String>) {
    let added = desired
        .iter()
        .filter(|d| !existing.contains(d))
        .cloned()
        .collect();
    let removed = existing
        .iter()
        .filter(|e| !desired.contains(e))
        .cloned()
        .collect();
    (added, removed)
}

struct Wanted<'a> {
    cluster: &'a Cluster,
    service: &'a str,
    endpoint_service: &'a str,
    group: &'a str,
    subnets: Vec<String>,
}

fn create_request(
    clients: &Clients,
    wanted: &Wanted<'_>,
) -> aws_sdk_ec2::operation::create_vpc_endpoint::builders::CreateVpcEndpointFluentBuilder {
    let tags: Vec<Tag> = endpoint_tags(wanted.cluster, wanted.service)
        .into_iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect();
    clients
        .ec2
        .create_vpc_endpoint()
        .security_group_ids(wanted.group)
        .service_name(wanted.endpoint_service)
        .vpc_id(&wanted.cluster.vpc)
        .vpc_endpoint_type(VpcEndpointType::Interface)
        .set_subnet_ids(Some(wanted.subnets.clone()))
        .tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::VpcEndpoint)
                .set_tags(Some(tags))
                .build(),
        )
}

/// The network interfaces of an endpoint match its subnets, one each, as AWS keeps
/// them; `false` when moto left them behind a change.
async fn interfaces_match(clients: &Clients, endpoint: &VpcEndpoint) -> Result<bool, AwsError> {
    let ids = endpoint.network_interface_ids().to_vec();
    let mut subnets: Vec<String> = if ids.is_empty() {
        Vec::new()
    } else {
        clients
            .ec2
            .describe_network_interfaces()
            .set_network_interface_ids(Some(ids))
            .send()
            .await
            .map_err(|e| sdk(Service::Ec2, "DescribeNetworkInterfaces", e))?
            .network_interfaces()
            .iter()
            .filter_map(|eni| eni.subnet_id().map(str::to_owned))
            .collect()
    };
    subnets.sort();
    let mut wanted = endpoint.subnet_ids().to_vec();
    wanted.sort();
    Ok(subnets == wanted)
}

/// `ensureVPCEndpoint`: the endpoint's DNS entries.
async fn endpoint(
    clients: &Clients,
    cpo: &Cpo,
    wanted: &Wanted<'_>,
) -> Result<Vec<DnsEntry>, String> {
    let found = find_endpoint(clients, cpo, wanted.cluster, wanted.service)
        .await
        .map_err(|e| format!("failed to describe vpc endpoints: {}", e.code()))?;
    let Some(existing) = found else {
        if !wanted.cluster.has_subnet {
            return Err("AWS platform information not provided in HostedControlPlane".into());
        }
        let create_failed = |e: AwsError| format!("failed to create vpc endpoint: {}", e.code());
        cpo.allow_tagging("CreateVpcEndpoint")
            .map_err(create_failed)?;
        let created = cpo
            .call(
                Service::Ec2,
                "CreateVpcEndpoint",
                None,
                create_request(clients, wanted).send(),
            )
            .await
            .map_err(create_failed)?;
        let endpoint = created
            .vpc_endpoint()
            .ok_or("CreateVpcEndpoint output is nil")?;
        tracing::info!(cluster = %wanted.cluster.name, service = wanted.service,
                       endpoint = endpoint.vpc_endpoint_id().unwrap_or_default(),
                       subnets = ?wanted.subnets, "the control-plane-operator created an endpoint");
        return Ok(endpoint.dns_entries().to_vec());
    };
    let id = existing.vpc_endpoint_id().unwrap_or_default().to_owned();
    let linked = existing.service_name().unwrap_or_default();
    if linked != wanted.endpoint_service {
        cpo.call(
            Service::Ec2,
            "DeleteVpcEndpoints",
            None,
            clients
                .ec2
                .delete_vpc_endpoints()
                .vpc_endpoint_ids(&id)
                .send(),
        )
        .await
        .map_err(|e| format!("error deleting AWSEndpoint: {e}"))?;
        return Err(format!("current endpoint {linked} is not pointing to the existing .Status.EndpointServiceName, reconciling by deleting endpoint"));
    }
    let (added, removed) = diff(&wanted.subnets, existing.subnet_ids());
    let groups: Vec<String> = existing
        .groups()
        .iter()
        .filter_map(|g| g.group_id().map(str::to_owned))
        .collect();
    let (added_groups, _) = diff(&[wanted.group.to_owned()], &groups);
    if added.is_empty() && removed.is_empty() && added_groups.is_empty() {
        return Ok(existing.dns_entries().to_vec());
    }
    cpo.call(
        Service::Ec2,
        "ModifyVpcEndpoint",
        None,
        clients
            .ec2
            .modify_vpc_endpoint()
            .vpc_endpoint_id(&id)
            .set_add_subnet_ids((!added.is_empty()).then_some(added.clone()))
            .set_remove_subnet_ids((!removed.is_empty()).then_some(removed.clone()))
            .set_add_security_group_ids((!added_groups.is_empty()).then_some(added_groups))
            .send(),
    )
    .await
    .map_err(|e| format!("failed to modify vpc endpoint: {}", e.code()))?;
    tracing::info!(cluster = %wanted.cluster.name, service = wanted.service, endpoint = %id,
                   ?added, ?removed, "the control-plane-operator changed an endpoint's subnets");
    replace_if_interfaces_lag(clients, wanted, &id)
        .await
        .map_err(|e| e.go_error())
}

/// The moto stand-in for AWS's interface bookkeeping (see the module doc): the
/// endpoint's DNS entries, of a replacement if its interfaces did not follow.
async fn replace_if_interfaces_lag(
    clients: &Clients,
    wanted: &Wanted<'_>,
    id: &str,
) -> Result<Vec<DnsEntry>, AwsError> {
    let described = clients
        .ec2
        .describe_vpc_endpoints()
        .vpc_endpoint_ids(id)
        .send()
        .await
        .map_err(|e| sdk(Service::Ec2, "DescribeVpcEndpoints", e))?;
    let Some(current) = described.vpc_endpoints().first() else {
        return Ok(Vec::new());
    };
    if interfaces_match(clients, current).await? {
        return Ok(current.dns_entries().to_vec());
    }
    clients
        .ec2
        .delete_vpc_endpoints()
        .vpc_endpoint_ids(id)
        .send()
        .await
        .map_err(|e| sdk(Service::Ec2, "DeleteVpcEndpoints", e))?;
    let mut subnets = current.subnet_ids().to_vec();
    subnets.sort();
    let replacement = Wanted { subnets, ..*wanted };
    let created = create_request(clients, &replacement)
        .send()
        .await
        .map_err(|e| sdk(Service::Ec2, "CreateVpcEndpoint", e))?;
    tracing::info!(cluster = %wanted.cluster.name, service = wanted.service, old = %id,
                   new = created.vpc_endpoint().and_then(|e| e.vpc_endpoint_id()).unwrap_or_default(),
                   "moto made no network interfaces for the endpoint's new subnets: replaced it");
    Ok(created
        .vpc_endpoint()
        .map(|e| e.dns_entries().to_vec())
        .unwrap_or_default())
}

/// `reconcileAWSEndpointService` for one Service: `Err` with the message of
/// `AWSEndpointAvailable=False`.
pub(super) async fn ensure(
    clients: &Clients,
    cpo: &Cpo,
    cluster: &Cluster,
    service: &PrivateService,
    endpoint_service: &str,
    zones: &mut HashMap<String, String>,
) -> Result<(), String> {
    let group = security_group(clients, cpo, cluster, service).await?;
    let subnets = match one_per_zone(clients, cpo, &cluster.node_pool_subnets, zones).await {
        Ok(subnets) => subnets,
        Err(e) => {
            tracing::warn!(cluster = %cluster.name, error = %e,
                           "failed to deduplicate subnets by AZ, proceeding with original list");
            cluster.node_pool_subnets.clone()
        }
    };
    let wanted = Wanted {
        cluster,
        service: service.name,
        endpoint_service,
        group: &group,
        subnets,
    };
    let dns = endpoint(clients, cpo, &wanted).await?;
    let Some(target) = dns.first().and_then(|d| d.dns_name()) else {
        return Ok(());
    };
    let zone = cluster.local_zone();
    let zone_id = records::lookup_zone(clients, cpo, &zone)
        .await
        .map_err(|e| e.go_error())?
        .ok_or_else(|| format!("hosted zone {zone} not found"))?;
    for record in &service.records {
        records::upsert_cname(clients, cpo, &zone_id, &format!("{record}.{zone}"), target)
            .await
            .map_err(|e| e.go_error())?;
    }
    Ok(())
}

/// Deletes the CNAMEs any private Service may have had in the local zone; a zone that
/// is not there is done.
pub(super) async fn destroy_records(
    clients: &Clients,
    cpo: &Cpo,
    cluster: &Cluster,
    services: &[PrivateService],
) -> Result<(), String> {
    let zone = cluster.local_zone();
    let Some(zone_id) = records::lookup_zone(clients, cpo, &zone)
        .await
        .map_err(|e| e.go_error())?
    else {
        return Ok(());
    };
    let mut names: Vec<&str> = services.iter().flat_map(|s| s.records.clone()).collect();
    names.sort_unstable();
    names.dedup();
    for name in names {
        let fqdn = format!("{name}.{zone}");
        match records::delete_cname(clients, cpo, &zone_id, &fqdn).await {
            Ok(true) => {
                tracing::info!(cluster = %cluster.name, record = %fqdn, "the control-plane-operator deleted a record")
            }
            Ok(false) => {}
            Err(e) if e.code() == "NoSuchHostedZone" => return Ok(()),
            Err(e) => return Err(e.go_error()),
        }
    }
    Ok(())
}

/// Deletes the service's endpoints and waits for them to go.
pub(super) async fn destroy_endpoint(
    clients: &Clients,
    cpo: &Cpo,
    cluster: &Cluster,
    service: &PrivateService,
) -> Result<(), String> {
    let Some(endpoint) = find_endpoint(clients, cpo, cluster, service.name)
        .await
        .map_err(|e| e.go_error())?
    else {
        return Ok(());
    };
    let id = endpoint.vpc_endpoint_id().unwrap_or_default().to_owned();
    cpo.call(
        Service::Ec2,
        "DeleteVpcEndpoints",
        None,
        clients
            .ec2
            .delete_vpc_endpoints()
            .vpc_endpoint_ids(&id)
            .send(),
    )
    .await
    .map_err(|e| e.go_error())?;
    let described = cpo
        .call(
            Service::Ec2,
            "DescribeVpcEndpoints",
            None,
            clients
                .ec2
                .describe_vpc_endpoints()
                .vpc_endpoint_ids(&id)
                .send(),
        )
        .await;
    match described {
        Ok(output) if output.vpc_endpoints().iter().any(|e| !is_gone(e)) => {
            Err("resource requested for deletion but still present".into())
        }
        Err(e) if e.code() != "InvalidVpcEndpointId.NotFound" => Err(e.go_error()),
        _ => {
            tracing::info!(cluster = %cluster.name, service = service.name, endpoint = %id,
                           "the control-plane-operator deleted an endpoint");
            Ok(())
        }
    }
}

/// Deletes the service's endpoint security group: `Ok(false)` while it still has
/// dependencies (DependencyViolation: the endpoint is still going).
pub(super) async fn destroy_security_group(
    clients: &Clients,
    cpo: &Cpo,
    cluster: &Cluster,
    service: &PrivateService,
) -> Result<bool, String> {
    let Some(group) = find_group(clients, cpo, cluster, service.name)
        .await
        .map_err(|e| format!("cannot list security groups: {e}"))?
    else {
        return Ok(true);
    };
    let id = group.group_id().unwrap_or_default().to_owned();
    match default_security_group::revoke_and_delete(clients, cpo, &group).await {
        Ok(()) => {
            tracing::info!(cluster = %cluster.name, service = service.name, group = %id,
                           "the control-plane-operator deleted an endpoint security group");
            Ok(true)
        }
        Err((_, e)) if e.code() == "DependencyViolation" => Ok(false),
        Err(("DeleteSecurityGroup", e)) => {
            Err(format!("failed to delete security group {id}: {e}"))
        }
        Err(("RevokeSecurityGroupEgress", e)) => Err(format!(
            "failed to revoke security group {id} egress rules: {e}"
        )),
        Err((_, e)) => Err(format!(
            "failed to revoke security group {id} ingress rules: {e}"
        )),
    }
}

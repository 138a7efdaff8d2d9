//! The default worker security group, as the control-plane-operator makes and removes it
//! (control-plane-operator/controllers/hostedcontrolplane/hostedcontrolplane_controller.go:
//! `reconcileDefaultSecurityGroup`, `createAWSDefaultSecurityGroup`,
//! `destroyAWSDefaultSecurityGroup`; the rules are support/awsutil/sg.go:
//! `DefaultWorkerSGIngressRules`).
//!
//! `<infraID>-default-sg` in the guest VPC, "default worker security group", tagged
//! with the resource tags, `kubernetes.io/cluster/<infraID>=owned` and `Name`; found by
//! those two tags. Ingress from itself: VXLAN 4789/udp, GENEVE 6081/udp, IPsec IKE
//! 500/udp and NAT-T 4500/udp, ESP, 9000-9999 tcp and udp, the kubelet 10250/tcp,
//! node ports 30000-32767 tcp and udp; from each machine CIDR: ICMP and SSH. Every call
//! is the CPO's, with its role's permissions; the error messages are the real ones.

use aws_sdk_ec2::types::{
    Filter, IpPermission, IpRange, ResourceType, SecurityGroup, Tag, TagSpecification,
    UserIdGroupPair,
};

use super::aws::{AwsError, Clients, Service};
use super::iam::Cpo;
use super::spec::Cluster;

/// `awsSecurityGroupName`.
pub(super) fn name(infra_id: &str) -> String {
    format!("{infra_id}-default-sg")
}

/// `awsSecurityGroupFilters`.
pub(super) fn filters(infra_id: &str, name: &str) -> Vec<Filter> {
    vec![
        Filter::builder()
            .name(format!("tag:kubernetes.io/cluster/{infra_id}"))
            .values("owned")
            .build(),
        Filter::builder().name("tag:Name").values(name).build(),
    ]
}

/// `awsSecurityGroupTags`: the resource tags, then the cluster's and the Name tag
/// unless the resource tags set them.
fn tags(cluster: &Cluster) -> Vec<Tag> {
    let mut tags: Vec<(String, String)> = cluster.resource_tags.clone();
    if !tags.iter().any(|(k, _)| k == "Name") {
        tags.push(("Name".into(), name(&cluster.infra_id)));
    }
    tags.into_iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect()
}

fn from_group(
    from: i32,
    to: i32,
    protocol: &str,
    group: &str,
    owner: &str,
    what: &str,
) -> IpPermission {
    IpPermission::builder()
        .from_port(from)
        .to_port(to)
        .ip_protocol(protocol)
        .user_id_group_pairs(
            UserIdGroupPair::builder()
                .group_id(group)
                .user_id(owner)
                .description(what)
                .build(),
        )
        .build()
}

fn from_cidr(from: i32, to: i32, protocol: &str, cidr: &str, what: &str) -> IpPermission {
    IpPermission::builder()
        .from_port(from)
        .to_port(to)
        .ip_protocol(protocol)
        .ip_ranges(IpRange::builder().cidr_ip(cidr).description(what).build())
        .build()
}

/// `DefaultWorkerSGIngressRules`.
fn ingress_rules(machine_cidrs: &[String], group: &str, owner: &str) -> Vec<IpPermission> {
    let mut rules = vec![
        from_group(4789, 4789, "udp", group, owner, "VXLAN Packets"),
        from_group(6081, 6081, "udp", group, owner, "GENEVE Protocol"),
        from_group(500, 500, "udp", group, owner, "IPSEC IKE Packets"),
        from_group(4500, 4500, "udp", group, owner, "IPSEC NAT-T Packets"),
        from_group(-1, -1, "50", group, owner, "IPSEC ESP Packets"),
        from_group(
            9000,
            9999,
            "tcp",
            group,
            owner,
            "Internal cluster communication (TCP)",
        ),
        from_group(
            9000,
            9999,
            "udp",
            group,
            owner,
            "Internal cluster communication (UDP)",
        ),
        from_group(10250, 10250, "tcp", group, owner, "Kubelet"),
        from_group(
            30000,
            32767,
            "tcp",
            group,
            owner,
            "Kubernetes services (TCP)",
        ),
        from_group(
            30000,
            32767,
            "udp",
            group,
            owner,
            "Kubernetes services (UDP)",
        ),
    ];
    for cidr in machine_cidrs {
        rules.push(from_cidr(-1, -1, "icmp", cidr, "ICMP"));
        rules.push(from_cidr(22, 22, "tcp", cidr, "SSH"));
    }
    rules
}

async fn find(
    clients: &Clients,
    cpo: &Cpo,
    filters: Vec<Filter>,
) -> Result<Option<SecurityGroup>, AwsError> {
    let found = cpo
        .call(
            Service::Ec2,
            "DescribeSecurityGroups",
            None,
            clients
                .ec2
                .describe_security_groups()
                .set_filters(Some(filters))
                .send(),
        )
        .await?;
    Ok(found.security_groups().first().cloned())
}

/// `createAWSDefaultSecurityGroup`: the group's id, or the message of
/// `AWSDefaultSecurityGroupCreated=False`.
pub(super) async fn ensure(
    clients: &Clients,
    cpo: &Cpo,
    cluster: &Cluster,
) -> Result<String, String> {
    let vpc = &cluster.vpc;
    let vpcs = cpo
        .call(
            Service::Ec2,
            "DescribeVpcs",
            None,
            clients.ec2.describe_vpcs().vpc_ids(vpc).send(),
        )
        .await
        .map_err(|e| format!("failed to describe vpc {vpc}, code {}", e.code()))?;
    if vpcs.vpcs().is_empty() {
        return Err(format!("vpc {vpc} not found"));
    }
    if cluster.machine_cidrs.is_empty() {
        return Err("failed to extract machine CIDR while creating default security group: hostedcontrolplane.spec.networking.machineNetwork length is 0".into());
    }
    let group_name = name(&cluster.infra_id);
    let existing = find(clients, cpo, filters(&cluster.infra_id, &group_name))
        .await
        .map_err(|e| format!("cannot list security groups, code: {}", e.code()))?;
    let group = match existing {
        Some(group) => group,
        None => {
            cpo.allow_tagging("CreateSecurityGroup")
                .map_err(|e| format!("failed to create security group, code: {}", e.code()))?;
            let created = cpo
                .call(
                    Service::Ec2,
                    "CreateSecurityGroup",
                    None,
                    clients
                        .ec2
                        .create_security_group()
                        .group_name(&group_name)
                        .description("default worker security group")
                        .vpc_id(vpc)
                        .tag_specifications(
                            TagSpecification::builder()
                                .resource_type(ResourceType::SecurityGroup)
                                .set_tags(Some(tags(cluster)))
                                .build(),
                        )
                        .send(),
                )
                .await
                .map_err(|e| format!("failed to create security group, code: {}", e.code()))?;
            let id = created.group_id().unwrap_or_default().to_owned();
            tracing::info!(cluster = %cluster.name, group = %id, "created the default security group");
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
                        "failed to find created security group (id: {id}), code: {}",
                        e.code()
                    )
                })?;
            fetched.security_groups().first().cloned().ok_or_else(|| {
                format!("failed to fetch security group (id: {id}), code: Unknown")
            })?
        }
    };
    let id = group.group_id().unwrap_or_default().to_owned();
    let owner = group.owner_id().unwrap_or_default();
    let rules = ingress_rules(&cluster.machine_cidrs, &id, owner);
    let authorized = cpo
        .call(
            Service::Ec2,
            "AuthorizeSecurityGroupIngress",
            None,
            clients
                .ec2
                .authorize_security_group_ingress()
                .group_id(&id)
                .set_ip_permissions(Some(rules))
                .send(),
        )
        .await;
    match authorized {
        Err(e) if e.code() != "InvalidPermission.Duplicate" => Err(format!(
            "failed to set security group ingress rules, code: {}",
            e.code()
        )),
        _ => Ok(id),
    }
}

/// Why the group could not be removed: the error code (for the caller to decide what
/// to do) and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct NotRemoved {
    pub(super) code: String,
    pub(super) message: String,
}

fn not_removed(code: &str, message: String) -> NotRemoved {
    NotRemoved {
        code: code.to_owned(),
        message,
    }
}

/// `destroyAWSDefaultSecurityGroup`: revokes its rules and deletes it; nothing found is
/// done.
pub(super) async fn destroy(
    clients: &Clients,
    cpo: &Cpo,
    cluster: &Cluster,
) -> Result<(), NotRemoved> {
    let filters = || filters(&cluster.infra_id, &name(&cluster.infra_id));
    let found = find(clients, cpo, filters())
        .await
        .map_err(|e| not_removed(e.code(), format!("cannot list security groups: {e}")))?;
    let Some(group) = found else {
        return Ok(());
    };
    let id = group.group_id().unwrap_or_default().to_owned();
    revoke_and_delete(clients, cpo, &group)
        .await
        .map_err(|(step, e)| {
            let message = match step {
                "DeleteSecurityGroup" => {
                    format!("failed to delete security group {id}: {}", e.code())
                }
                "RevokeSecurityGroupEgress" => {
                    format!("failed to revoke security group egress rules: {}", e.code())
                }
                _ => format!(
                    "failed to revoke security group ingress rules: {}",
                    e.code()
                ),
            };
            not_removed(e.code(), message)
        })?;
    tracing::info!(cluster = %cluster.name, group = %id, "deleted the default security group");
    match find(clients, cpo, filters()).await {
        Ok(None) => Ok(()),
        Ok(Some(_)) => Err(not_removed(
            "",
            "security group still exists, waiting on deletion".into(),
        )),
        Err(e) => Err(not_removed(
            e.code(),
            format!("cannot list security groups: {e}"),
        )),
    }
}

/// Revokes a group's ingress and egress rules and deletes it, as the CPO; the failed
/// step and its error. A group already gone is done.
pub(super) async fn revoke_and_delete(
    clients: &Clients,
    cpo: &Cpo,
    group: &SecurityGroup,
) -> Result<(), (&'static str, AwsError)> {
    let id = group.group_id().unwrap_or_default();
    let gone = |e: &AwsError| e.code() == "InvalidGroup.NotFound";
    if !group.ip_permissions().is_empty() {
        let step = "RevokeSecurityGroupIngress";
        let revoked = cpo
            .call(
                Service::Ec2,
                step,
                None,
                clients
                    .ec2
                    .revoke_security_group_ingress()
                    .group_id(id)
                    .set_ip_permissions(Some(group.ip_permissions().to_vec()))
                    .send(),
            )
            .await;
        match revoked {
            Err(e) if gone(&e) => return Ok(()),
            Err(e) => return Err((step, e)),
            Ok(_) => {}
        }
    }
    if !group.ip_permissions_egress().is_empty() {
        let step = "RevokeSecurityGroupEgress";
        let revoked = cpo
            .call(
                Service::Ec2,
                step,
                None,
                clients
                    .ec2
                    .revoke_security_group_egress()
                    .group_id(id)
                    .set_ip_permissions(Some(group.ip_permissions_egress().to_vec()))
                    .send(),
            )
            .await;
        match revoked {
            Err(e) if gone(&e) => return Ok(()),
            Err(e) => return Err((step, e)),
            Ok(_) => {}
        }
    }
    let step = "DeleteSecurityGroup";
    match cpo
        .call(
            Service::Ec2,
            step,
            None,
            clients.ec2.delete_security_group().group_id(id).send(),
        )
        .await
    {
        Err(e) if gone(&e) => Ok(()),
        Err(e) => Err((step, e)),
        Ok(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rules_are_the_real_ones() {
        let rules = ingress_rules(&["10.0.0.0/16".into()], "sg-1", "123456789012");
        assert_eq!(rules.len(), 12);
        let described: Vec<(i32, i32, &str, &str)> = rules
            .iter()
            .map(|r| {
                let what = r
                    .user_id_group_pairs()
                    .first()
                    .and_then(|p| p.description())
                    .or_else(|| r.ip_ranges().first().and_then(|i| i.description()))
                    .unwrap_or_default();
                (
                    r.from_port().unwrap_or_default(),
                    r.to_port().unwrap_or_default(),
                    r.ip_protocol().unwrap_or_default(),
                    what,
                )
            })
            .collect();
        assert_eq!(described[4], (-1, -1, "50", "IPSEC ESP Packets"));
        assert_eq!(described[7], (10250, 10250, "tcp", "Kubelet"));
        assert_eq!(described[10], (-1, -1, "icmp", "ICMP"));
        assert_eq!(described[11], (22, 22, "tcp", "SSH"));
        assert_eq!(rules[0].user_id_group_pairs()[0].group_id(), Some("sg-1"));
    }
}

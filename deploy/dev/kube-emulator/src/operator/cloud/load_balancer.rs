//! The management cluster's cloud provider (the in-tree AWS cloud provider,
//! k8s.io/cloud-provider-aws `aws_loadbalancer.go`): for each private Service of type
//! LoadBalancer the control-plane-operator makes in the control plane's namespace
//! (`private-router` on 443, `kube-apiserver-private` on 6443, both annotated
//! internal + nlb), an internal network load balancer in the management cluster's
//! subnets — those tagged `kubernetes.io/cluster/<management cluster>` and
//! `kubernetes.io/role/internal-elb=1`, one per zone — with a TCP target group and a
//! TCP listener on the Service's port. When the Service goes (with the control plane's
//! namespace, on the HostedCluster's deletion), the provider removes them.
//!
//! Names as the provider makes them: the load balancer `a` + 31 hex characters (the
//! provider uses the Service's uid; the emulator, which has no Service objects, derives
//! it from the HostedCluster's uid and the Service's name, so it is the same on every
//! pass and after a restart), the target group `k8s-<namespace>-<service>-<hash>`.
//! Tags: `kubernetes.io/service-name=<namespace>/<service>` and
//! `kubernetes.io/cluster/<management cluster>=owned`. The target group (type ip) has
//! one target: an address in the management VPC standing for the Service's endpoint.
//! The provider works with the management cluster's own credentials: no IAM check.
//!
//! moto: a second CreateLoadBalancer of one name makes a second load balancer, and a
//! target group of an existing name is `DuplicateTargetGroupName`, so everything is
//! looked up by name first.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use aws_sdk_ec2::types::Filter;
use aws_sdk_elasticloadbalancingv2::types::{
    Action, ActionTypeEnum, LoadBalancer, LoadBalancerSchemeEnum, LoadBalancerTypeEnum,
    ProtocolEnum, Tag, TargetDescription, TargetTypeEnum,
};
use sha2::{Digest, Sha256};

use super::aws::{sdk, unless_not_found, AwsError, Clients, Service};
use super::spec::{Cluster, PrivateService};

/// The hex SHA-256 of the parts joined by `/`: the emulator's stand-in for uids.
pub(super) fn hash(parts: &[&str]) -> String {
    let digest = Sha256::digest(parts.join("/").as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The load balancer's name: `a` and 31 hex characters (32 at most, as AWS allows).
pub(super) fn name(cluster: &Cluster, service: &str) -> String {
    format!("a{}", &hash(&[&cluster.uid, service])[..31])
}

/// `k8s-%.8s-%.8s-%.10s` of the namespace and name without their non-alphanumerics.
fn target_group_name(cluster: &Cluster, service: &PrivateService) -> String {
    let port = service.port.to_string();
    target_group_name_of(
        &cluster.control_plane_namespace(),
        service.name,
        &[&cluster.uid, service.name, &port, "TCP", "ip"],
    )
}

/// The provider's `createTargetName`: `k8s-%.8s-%.8s-%.10s` of the Service's namespace
/// and name without their non-alphanumerics, and a hash (of `seed`: the emulator has no
/// uids of its own).
pub(super) fn target_group_name_of(namespace: &str, service: &str, seed: &[&str]) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .filter(char::is_ascii_alphanumeric)
            .take(8)
            .collect()
    };
    format!(
        "k8s-{}-{}-{}",
        clean(namespace),
        clean(service),
        &hash(seed)[..10]
    )
}

fn tags(cluster: &Cluster, service: &str, management_cluster: &str) -> Vec<Tag> {
    [
        (
            "kubernetes.io/service-name".to_owned(),
            format!("{}/{service}", cluster.control_plane_namespace()),
        ),
        (
            format!("kubernetes.io/cluster/{management_cluster}"),
            "owned".to_owned(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| Tag::builder().key(k).value(v).build())
    .collect()
}

/// The management cluster's internal-ELB subnets, one per zone (the lowest id), as
/// `(subnet id, zone, CIDR, VPC)`.
async fn management_subnets(
    clients: &Clients,
    management_cluster: &str,
) -> Result<Vec<(String, String, String, String)>, AwsError> {
    let found = clients
        .ec2
        .describe_subnets()
        .filters(
            Filter::builder()
                .name("tag-key")
                .values(format!("kubernetes.io/cluster/{management_cluster}"))
                .build(),
        )
        .filters(
            Filter::builder()
                .name("tag:kubernetes.io/role/internal-elb")
                .values("1")
                .values("")
                .build(),
        )
        .send()
        .await
        .map_err(|e| sdk(Service::Ec2, "DescribeSubnets", e))?;
    let mut by_zone: BTreeMap<String, (String, String, String, String)> = BTreeMap::new();
    for subnet in found.subnets() {
        let id = subnet.subnet_id().unwrap_or_default().to_owned();
        let zone = subnet.availability_zone().unwrap_or_default().to_owned();
        let entry = (
            id.clone(),
            zone.clone(),
            subnet.cidr_block().unwrap_or_default().to_owned(),
            subnet.vpc_id().unwrap_or_default().to_owned(),
        );
        match by_zone.get(&zone) {
            Some(existing) if existing.0 <= id => {}
            _ => {
                by_zone.insert(zone, entry);
            }
        }
    }
    Ok(by_zone.into_values().collect())
}

/// An address in `cidr` for the Service's one endpoint (the same on every pass).
fn target_address(cidr: &str, seed: &str) -> Option<String> {
    let (base, bits) = cidr.split_once('/')?;
    let base: Ipv4Addr = base.parse().ok()?;
    let bits: u32 = bits.parse().ok()?;
    let size = 1u32.checked_shl(32 - bits.min(32)).unwrap_or(0);
    if size < 16 {
        return None;
    }
    let offset = 10 + u32::from_str_radix(&hash(&[seed])[..4], 16).ok()? % (size - 16);
    Some(Ipv4Addr::from(u32::from(base) + offset).to_string())
}

/// The load balancer of this name, if there is one.
pub(super) async fn find(clients: &Clients, name: &str) -> Result<Option<LoadBalancer>, AwsError> {
    let found = unless_not_found(
        clients
            .elbv2
            .describe_load_balancers()
            .names(name)
            .send()
            .await
            .map_err(|e| sdk(Service::Elbv2, "DescribeLoadBalancers", e)),
    )?;
    Ok(found.and_then(|found| found.load_balancers().first().cloned()))
}

/// Ensures the Service's load balancer, target group, target and listener. `Err` when
/// the provider could not make them (the Service would show the event; the
/// HostedCluster sees nothing yet).
pub(super) async fn ensure(
    clients: &Clients,
    management_cluster: &str,
    cluster: &Cluster,
    service: &PrivateService,
) -> Result<(), String> {
    let elbv2 = &clients.elbv2;
    let lb_name = name(cluster, service.name);
    let subnets = management_subnets(clients, management_cluster)
        .await
        .map_err(|e| e.go_error())?;
    let Some((_, _, cidr, vpc)) = subnets.first().cloned() else {
        return Err(format!(
            "could not find any suitable subnets for creating the ELB (management cluster {management_cluster})"
        ));
    };
    let lb = match find(clients, &lb_name).await.map_err(|e| e.go_error())? {
        Some(lb) => lb,
        None => {
            let created = elbv2
                .create_load_balancer()
                .name(&lb_name)
                .r#type(LoadBalancerTypeEnum::Network)
                .scheme(LoadBalancerSchemeEnum::Internal)
                .set_subnets(Some(subnets.iter().map(|s| s.0.clone()).collect()))
                .set_tags(Some(tags(cluster, service.name, management_cluster)))
                .send()
                .await
                .map_err(|e| sdk(Service::Elbv2, "CreateLoadBalancer", e).go_error())?;
            tracing::info!(cluster = %cluster.name, service = service.name, load_balancer = %lb_name,
                           "the management cluster's cloud provider created a load balancer");
            created
                .load_balancers()
                .first()
                .cloned()
                .ok_or("CreateLoadBalancer answered no load balancer")?
        }
    };
    let lb_arn = lb.load_balancer_arn().unwrap_or_default().to_owned();

    let tg_name = target_group_name(cluster, service);
    let found = unless_not_found(
        elbv2
            .describe_target_groups()
            .names(&tg_name)
            .send()
            .await
            .map_err(|e| sdk(Service::Elbv2, "DescribeTargetGroups", e)),
    )
    .map_err(|e| e.go_error())?;
    let tg_arn = match found.and_then(|f| f.target_groups().first().cloned()) {
        Some(tg) => tg.target_group_arn().unwrap_or_default().to_owned(),
        None => {
            let created = elbv2
                .create_target_group()
                .name(&tg_name)
                .protocol(ProtocolEnum::Tcp)
                .port(service.port)
                .vpc_id(&vpc)
                .target_type(TargetTypeEnum::Ip)
                .set_tags(Some(tags(cluster, service.name, management_cluster)))
                .send()
                .await
                .map_err(|e| sdk(Service::Elbv2, "CreateTargetGroup", e).go_error())?;
            created
                .target_groups()
                .first()
                .and_then(|tg| tg.target_group_arn())
                .unwrap_or_default()
                .to_owned()
        }
    };

    let health = elbv2
        .describe_target_health()
        .target_group_arn(&tg_arn)
        .send()
        .await
        .map_err(|e| sdk(Service::Elbv2, "DescribeTargetHealth", e).go_error())?;
    if health.target_health_descriptions().is_empty() {
        let address = target_address(&cidr, &lb_name)
            .ok_or_else(|| format!("no address for a target in {cidr}"))?;
        elbv2
            .register_targets()
            .target_group_arn(&tg_arn)
            .targets(
                TargetDescription::builder()
                    .id(address)
                    .port(service.port)
                    .build(),
            )
            .send()
            .await
            .map_err(|e| sdk(Service::Elbv2, "RegisterTargets", e).go_error())?;
    }

    let listeners = elbv2
        .describe_listeners()
        .load_balancer_arn(&lb_arn)
        .send()
        .await
        .map_err(|e| sdk(Service::Elbv2, "DescribeListeners", e).go_error())?;
    if !listeners
        .listeners()
        .iter()
        .any(|l| l.port() == Some(service.port))
    {
        elbv2
            .create_listener()
            .load_balancer_arn(&lb_arn)
            .protocol(ProtocolEnum::Tcp)
            .port(service.port)
            .default_actions(
                Action::builder()
                    .r#type(ActionTypeEnum::Forward)
                    .target_group_arn(&tg_arn)
                    .build(),
            )
            .send()
            .await
            .map_err(|e| sdk(Service::Elbv2, "CreateListener", e).go_error())?;
    }
    Ok(())
}

/// Removes the Service's listeners, load balancer(s) of its name and target group.
pub(super) async fn destroy(
    clients: &Clients,
    cluster: &Cluster,
    service: &PrivateService,
) -> Result<(), AwsError> {
    let lb_name = name(cluster, service.name);
    if remove(clients, &lb_name, &target_group_name(cluster, service)).await? {
        tracing::info!(cluster = %cluster.name, service = service.name, load_balancer = %lb_name,
                       "the management cluster's cloud provider deleted a load balancer");
    }
    Ok(())
}

/// Removes the v2 load balancer(s) named `lb_name` with their listeners, and the target
/// group named `tg_name`, as the cloud provider does when their Service goes (its
/// `EnsureLoadBalancerDeleted`); whether there was a load balancer or target group.
pub(super) async fn remove(
    clients: &Clients,
    lb_name: &str,
    tg_name: &str,
) -> Result<bool, AwsError> {
    let elbv2 = &clients.elbv2;
    let mut found_any = false;
    // moto may hold more than one of a name: delete until none is left.
    for _ in 0..5 {
        let Some(lb) = find(clients, lb_name).await? else {
            break;
        };
        found_any = true;
        let arn = lb.load_balancer_arn().unwrap_or_default().to_owned();
        let listeners = unless_not_found(
            elbv2
                .describe_listeners()
                .load_balancer_arn(&arn)
                .send()
                .await
                .map_err(|e| sdk(Service::Elbv2, "DescribeListeners", e)),
        )?;
        for listener in listeners.iter().flat_map(|l| l.listeners()) {
            let deleted = elbv2
                .delete_listener()
                .listener_arn(listener.listener_arn().unwrap_or_default())
                .send()
                .await
                .map_err(|e| sdk(Service::Elbv2, "DeleteListener", e));
            unless_not_found(deleted)?;
        }
        let deleted = elbv2
            .delete_load_balancer()
            .load_balancer_arn(&arn)
            .send()
            .await
            .map_err(|e| sdk(Service::Elbv2, "DeleteLoadBalancer", e));
        unless_not_found(deleted)?;
    }
    let found = unless_not_found(
        elbv2
            .describe_target_groups()
            .names(tg_name)
            .send()
            .await
            .map_err(|e| sdk(Service::Elbv2, "DescribeTargetGroups", e)),
    )?;
    for tg in found.iter().flat_map(|f| f.target_groups()) {
        found_any = true;
        let deleted = elbv2
            .delete_target_group()
            .target_group_arn(tg.target_group_arn().unwrap_or_default())
            .send()
            .await
            .map_err(|e| sdk(Service::Elbv2, "DeleteTargetGroup", e));
        unless_not_found(deleted)?;
    }
    Ok(found_any)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_addresses_stay_inside_the_subnet() {
        for seed in ["a", "b", "c", "d"] {
            let address: Ipv4Addr = target_address("10.250.3.0/24", seed)
                .unwrap()
                .parse()
                .unwrap();
            let octets = address.octets();
            assert_eq!(&octets[..3], &[10, 250, 3]);
            assert!((10..250).contains(&octets[3]), "{address}");
        }
        assert_eq!(target_address("10.0.0.0/29", "a"), None);
    }
}

//! The default router's load balancer: the guest's ingress operator publishes the
//! default IngressController with a `openshift-ingress/router-default` Service of type
//! LoadBalancer (a classic ELB on AWS unless told otherwise), and the cloud provider
//! makes it (cloud-provider-aws `aws.go`: `EnsureLoadBalancer`, `ensureLoadBalancer`,
//! `ensureSecurityGroup`, `ensureLoadBalancerHealthCheck`; removed by
//! `EnsureLoadBalancerDeleted` when the Service goes).
//!
//! - the load balancer `a` + 31 hex characters (the provider's `GetLoadBalancerName`,
//!   from the Service's uid; the emulator derives it from the HostedCluster's uid and
//!   `router-default`), internet-facing, in the placement's subnets, with TCP listeners
//!   80 and 443 to node ports and no instances (the nodes are not EC2 instances in
//!   moto), an HTTP health check on `/healthz` of the health check node port (the
//!   Service's `externalTrafficPolicy: Local`); tagged
//!   `kubernetes.io/service-name=openshift-ingress/router-default` and with the resource
//!   tags (`kubernetes.io/cluster/<infraID>=owned` among them: the ingress operator
//!   passes them as the Service's additional-resource-tags annotation);
//! - its security group `k8s-elb-<load balancer name>` in the guest VPC, "Security
//!   group for Kubernetes ELB <name> (openshift-ingress/router-default)", with the same
//!   tags, open on 80 and 443 and to ICMP fragmentation-needed from 0.0.0.0/0.
//!
//! moto: a classic ELB is deleted at once, so its security group can go in the same
//! pass.

use aws_sdk_ec2::types::{IpPermission, IpRange, ResourceType, SecurityGroup, TagSpecification};
use aws_sdk_elasticloadbalancing::types::{HealthCheck, Listener, Tag};

use super::super::aws::{sdk, unbuilt, unless_not_found, AwsError, Clients, Service};
use super::super::load_balancer;
use super::super::spec::Cluster;
use super::{ec2_filter, node_port, owned_tags, Placement};

const SERVICE: &str = "openshift-ingress/router-default";

fn name(cluster: &Cluster) -> String {
    load_balancer::name(cluster, "router-default")
}

fn group_name(load_balancer: &str) -> String {
    format!("k8s-elb-{load_balancer}")
}

fn tags(cluster: &Cluster) -> Vec<(String, String)> {
    let mut tags = vec![("kubernetes.io/service-name".to_owned(), SERVICE.to_owned())];
    tags.extend(owned_tags(cluster));
    tags
}

async fn find_group(
    clients: &Clients,
    cluster: &Cluster,
) -> Result<Option<SecurityGroup>, AwsError> {
    let found = clients
        .ec2
        .describe_security_groups()
        .filters(ec2_filter("group-name", &group_name(&name(cluster))))
        .filters(ec2_filter("vpc-id", &cluster.vpc))
        .send()
        .await
        .map_err(|e| sdk(Service::Ec2, "DescribeSecurityGroups", e))?;
    Ok(found.security_groups().first().cloned())
}

fn from_anywhere(protocol: &str, from: i32, to: i32) -> IpPermission {
    IpPermission::builder()
        .ip_protocol(protocol)
        .from_port(from)
        .to_port(to)
        .ip_ranges(IpRange::builder().cidr_ip("0.0.0.0/0").build())
        .build()
}

/// `ensureSecurityGroup` and its ingress rules: the group's id.
async fn ensure_group(clients: &Clients, cluster: &Cluster) -> Result<String, AwsError> {
    let lb_name = name(cluster);
    let group = match find_group(clients, cluster).await? {
        Some(group) => group,
        None => {
            let ec2_tags: Vec<aws_sdk_ec2::types::Tag> = tags(cluster)
                .into_iter()
                .map(|(k, v)| aws_sdk_ec2::types::Tag::builder().key(k).value(v).build())
                .collect();
            let created = clients
                .ec2
                .create_security_group()
                .group_name(group_name(&lb_name))
                .description(format!(
                    "Security group for Kubernetes ELB {lb_name} ({SERVICE})"
                ))
                .vpc_id(&cluster.vpc)
                .tag_specifications(
                    TagSpecification::builder()
                        .resource_type(ResourceType::SecurityGroup)
                        .set_tags(Some(ec2_tags))
                        .build(),
                )
                .send()
                .await
                .map_err(|e| sdk(Service::Ec2, "CreateSecurityGroup", e))?;
            let id = created.group_id().unwrap_or_default().to_owned();
            tracing::info!(cluster = %cluster.name, group = %id,
                           "the guest's cloud provider created the router load balancer's security group");
            return authorize(clients, &id).await.map(|()| id);
        }
    };
    let id = group.group_id().unwrap_or_default().to_owned();
    if group.ip_permissions().is_empty() {
        authorize(clients, &id).await?;
    }
    Ok(id)
}

async fn authorize(clients: &Clients, group: &str) -> Result<(), AwsError> {
    let authorized = clients
        .ec2
        .authorize_security_group_ingress()
        .group_id(group)
        .ip_permissions(from_anywhere("tcp", 80, 80))
        .ip_permissions(from_anywhere("tcp", 443, 443))
        // ICMP destination unreachable, fragmentation needed (path MTU discovery).
        .ip_permissions(from_anywhere("icmp", 3, 4))
        .send()
        .await
        .map_err(|e| sdk(Service::Ec2, "AuthorizeSecurityGroupIngress", e));
    match authorized {
        Err(e) if e.code() != "InvalidPermission.Duplicate" => Err(e),
        _ => Ok(()),
    }
}

/// The load balancer's DNS name, if it exists.
async fn find(clients: &Clients, lb_name: &str) -> Result<Option<String>, AwsError> {
    let found = unless_not_found(
        clients
            .elb
            .describe_load_balancers()
            .load_balancer_names(lb_name)
            .send()
            .await
            .map_err(|e| sdk(Service::Elb, "DescribeLoadBalancers", e)),
    )?;
    Ok(found.and_then(|f| {
        f.load_balancer_descriptions()
            .first()
            .map(|lb| lb.dns_name().unwrap_or_default().to_owned())
    }))
}

fn listener(cluster: &Cluster, port: i32, port_name: &str) -> Result<Listener, AwsError> {
    Listener::builder()
        .protocol("TCP")
        .load_balancer_port(port)
        .instance_protocol("TCP")
        .instance_port(node_port(cluster, SERVICE, port_name))
        .build()
        .map_err(|e| unbuilt(Service::Elb, "CreateLoadBalancer", e))
}

/// Ensures the security group and the load balancer: the load balancer's DNS name.
pub(super) async fn ensure(
    clients: &Clients,
    cluster: &Cluster,
    placement: &Placement,
) -> Result<String, AwsError> {
    let group = ensure_group(clients, cluster).await?;
    let lb_name = name(cluster);
    if let Some(dns_name) = find(clients, &lb_name).await? {
        return Ok(dns_name);
    }
    let elb_tags = tags(cluster)
        .into_iter()
        .map(|(k, v)| {
            Tag::builder()
                .key(k)
                .value(v)
                .build()
                .map_err(|e| unbuilt(Service::Elb, "CreateLoadBalancer", e))
        })
        .collect::<Result<Vec<Tag>, AwsError>>()?;
    let created = clients
        .elb
        .create_load_balancer()
        .load_balancer_name(&lb_name)
        .listeners(listener(cluster, 80, "http")?)
        .listeners(listener(cluster, 443, "https")?)
        .set_subnets(Some(placement.subnets.clone()))
        .security_groups(&group)
        .set_tags(Some(elb_tags))
        .send()
        .await
        .map_err(|e| sdk(Service::Elb, "CreateLoadBalancer", e))?;
    let health_check = HealthCheck::builder()
        .target(format!(
            "HTTP:{}/healthz",
            node_port(cluster, SERVICE, "health")
        ))
        .interval(5)
        .timeout(4)
        .unhealthy_threshold(2)
        .healthy_threshold(2)
        .build()
        .map_err(|e| unbuilt(Service::Elb, "ConfigureHealthCheck", e))?;
    clients
        .elb
        .configure_health_check()
        .load_balancer_name(&lb_name)
        .health_check(health_check)
        .send()
        .await
        .map_err(|e| sdk(Service::Elb, "ConfigureHealthCheck", e))?;
    let dns_name = created.dns_name().unwrap_or_default().to_owned();
    tracing::info!(cluster = %cluster.name, load_balancer = %lb_name, %dns_name,
                   "the guest's cloud provider created the router's classic load balancer");
    Ok(dns_name)
}

/// `EnsureLoadBalancerDeleted`: the load balancer, then its security group; whether
/// either was there.
pub(super) async fn destroy(clients: &Clients, cluster: &Cluster) -> Result<bool, AwsError> {
    let lb_name = name(cluster);
    let mut found = false;
    if find(clients, &lb_name).await?.is_some() {
        found = true;
        unless_not_found(
            clients
                .elb
                .delete_load_balancer()
                .load_balancer_name(&lb_name)
                .send()
                .await
                .map_err(|e| sdk(Service::Elb, "DeleteLoadBalancer", e)),
        )?;
        tracing::info!(cluster = %cluster.name, load_balancer = %lb_name,
                       "the guest's cloud provider deleted the router's classic load balancer");
    }
    let Some(group) = find_group(clients, cluster).await? else {
        return Ok(found);
    };
    let id = group.group_id().unwrap_or_default().to_owned();
    if !group.ip_permissions().is_empty() {
        unless_not_found(
            clients
                .ec2
                .revoke_security_group_ingress()
                .group_id(&id)
                .set_ip_permissions(Some(group.ip_permissions().to_vec()))
                .send()
                .await
                .map_err(|e| sdk(Service::Ec2, "RevokeSecurityGroupIngress", e)),
        )?;
    }
    unless_not_found(
        clients
            .ec2
            .delete_security_group()
            .group_id(&id)
            .send()
            .await
            .map_err(|e| sdk(Service::Ec2, "DeleteSecurityGroup", e)),
    )?;
    tracing::info!(cluster = %cluster.name, group = %id,
                   "the guest's cloud provider deleted the router load balancer's security group");
    Ok(true)
}

//! A user workload's load balancer: the guest's `default/guest-app` Service of type
//! LoadBalancer, annotated `service.beta.kubernetes.io/aws-load-balancer-type: nlb`,
//! for which the cloud provider makes a v2 network load balancer (cloud-provider-aws
//! `aws_loadbalancer.go`: `ensureLoadBalancerv2`, `ensureTargetGroup`,
//! `createTargetName`; removed by `EnsureLoadBalancerDeleted` with its listeners and
//! target groups).
//!
//! The load balancer `a` + 31 hex characters (from the HostedCluster's uid and
//! `guest-app`, standing for the Service's uid), internet-facing, in the placement's
//! subnets; one TCP target group `k8s-default-guestapp-<hash>` on the port's node port
//! (target type instance, no targets: the nodes are not EC2 instances in moto) and a
//! TCP listener on 80 forwarding to it. Both tagged
//! `kubernetes.io/service-name=default/guest-app` and
//! `kubernetes.io/cluster/<infraID>=owned`.

use aws_sdk_elasticloadbalancingv2::types::{
    Action, ActionTypeEnum, LoadBalancerSchemeEnum, LoadBalancerTypeEnum, ProtocolEnum, Tag,
    TargetTypeEnum,
};

use super::super::aws::{sdk, unless_not_found, AwsError, Clients, Service};
use super::super::load_balancer;
use super::super::spec::Cluster;
use super::{node_port, Placement};

const NAMESPACE: &str = "default";
const SERVICE: &str = "guest-app";
const PORT: i32 = 80;

fn name(cluster: &Cluster) -> String {
    load_balancer::name(cluster, SERVICE)
}

fn target_group_name(cluster: &Cluster) -> String {
    let node_port = node_port(cluster, SERVICE, "http").to_string();
    load_balancer::target_group_name_of(
        NAMESPACE,
        SERVICE,
        &[&cluster.uid, SERVICE, &node_port, "TCP", "instance"],
    )
}

fn tags(cluster: &Cluster) -> Vec<Tag> {
    [
        (
            "kubernetes.io/service-name".to_owned(),
            format!("{NAMESPACE}/{SERVICE}"),
        ),
        (
            format!("kubernetes.io/cluster/{}", cluster.infra_id),
            "owned".to_owned(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| Tag::builder().key(k).value(v).build())
    .collect()
}

/// Ensures the load balancer, its target group and its listener.
pub(super) async fn ensure(
    clients: &Clients,
    cluster: &Cluster,
    placement: &Placement,
) -> Result<(), AwsError> {
    let elbv2 = &clients.elbv2;
    let lb_name = name(cluster);
    let lb = match load_balancer::find(clients, &lb_name).await? {
        Some(lb) => lb,
        None => {
            let created = elbv2
                .create_load_balancer()
                .name(&lb_name)
                .r#type(LoadBalancerTypeEnum::Network)
                .scheme(LoadBalancerSchemeEnum::InternetFacing)
                .set_subnets(Some(placement.subnets.clone()))
                .set_tags(Some(tags(cluster)))
                .send()
                .await
                .map_err(|e| sdk(Service::Elbv2, "CreateLoadBalancer", e))?;
            tracing::info!(cluster = %cluster.name, load_balancer = %lb_name,
                           "the guest's cloud provider created guest-app's network load balancer");
            match created.load_balancers().first() {
                Some(lb) => lb.clone(),
                None => return Ok(()),
            }
        }
    };
    let lb_arn = lb.load_balancer_arn().unwrap_or_default().to_owned();
    let tg_name = target_group_name(cluster);
    let found = unless_not_found(
        elbv2
            .describe_target_groups()
            .names(&tg_name)
            .send()
            .await
            .map_err(|e| sdk(Service::Elbv2, "DescribeTargetGroups", e)),
    )?;
    let tg_arn = match found.and_then(|f| f.target_groups().first().cloned()) {
        Some(tg) => tg.target_group_arn().unwrap_or_default().to_owned(),
        None => elbv2
            .create_target_group()
            .name(&tg_name)
            .protocol(ProtocolEnum::Tcp)
            .port(node_port(cluster, SERVICE, "http"))
            .vpc_id(&cluster.vpc)
            .target_type(TargetTypeEnum::Instance)
            .set_tags(Some(tags(cluster)))
            .send()
            .await
            .map_err(|e| sdk(Service::Elbv2, "CreateTargetGroup", e))?
            .target_groups()
            .first()
            .and_then(|tg| tg.target_group_arn())
            .unwrap_or_default()
            .to_owned(),
    };
    let listeners = elbv2
        .describe_listeners()
        .load_balancer_arn(&lb_arn)
        .send()
        .await
        .map_err(|e| sdk(Service::Elbv2, "DescribeListeners", e))?;
    if !listeners.listeners().iter().any(|l| l.port() == Some(PORT)) {
        elbv2
            .create_listener()
            .load_balancer_arn(&lb_arn)
            .protocol(ProtocolEnum::Tcp)
            .port(PORT)
            .default_actions(
                Action::builder()
                    .r#type(ActionTypeEnum::Forward)
                    .target_group_arn(&tg_arn)
                    .build(),
            )
            .send()
            .await
            .map_err(|e| sdk(Service::Elbv2, "CreateListener", e))?;
    }
    Ok(())
}

/// `EnsureLoadBalancerDeleted`; whether anything was there.
pub(super) async fn destroy(clients: &Clients, cluster: &Cluster) -> Result<bool, AwsError> {
    let lb_name = name(cluster);
    let found = load_balancer::remove(clients, &lb_name, &target_group_name(cluster)).await?;
    if found {
        tracing::info!(cluster = %cluster.name, load_balancer = %lb_name,
                       "the guest's cloud provider deleted guest-app's network load balancer");
    }
    Ok(found)
}

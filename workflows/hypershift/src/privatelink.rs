//! PrivateLink in a create (unless Public). The HyperShift operators build it
//! (`aws::observed_privatelink` says what they make); hcpflow's part, since the patch
//! [`BY_OPERATOR`]:
//! - before the control plane, [`check_coverage`]: the operator is installed for the
//!   private platform in this region, and the management cluster has a subnet in every
//!   guest zone, by zone id — the checks only we can do before anything is spent;
//! - with the HostedCluster, [`expect_removal`]: a compensation that, after the
//!   HostedCluster is deleted, waits until the operators removed what they made;
//! - once the NodePools exist (their subnets are where the endpoint goes), [`observe`]:
//!   the operator's `AWSEndpointAvailable`, then per zone in parallel the endpoints'
//!   interfaces in that zone's subnet, then the records — each recorded in the ledger as
//!   observed, owned by HyperShift.
//!
//! Histories written before the patch built a duplicate of its own ([`built_by_hcpflow`]:
//! an NLB with no target, an endpoint service, a security group, one endpoint and the
//! records); their replays and their recorded compensations still run that code.

use hcpflow_engine::{WorkflowContext, WorkflowError};
use serde::{Deserialize, Serialize};

use crate::aws::dns::Cname;
use crate::aws::observed_privatelink::{
    AwaitPrivateLinkRemoved, CheckZoneCoverage, ObservedEndpoint, WaitPrivateLinkRecords,
    WaitPrivateLinkZone, ZoneCoverage,
};
use crate::aws::privatelink::{
    CheckZoneOffer, CreateEndpointSecurityGroup, CreateEndpointService, CreateInterfaceEndpoint,
    CreateLoadBalancer, WaitEndpointZone,
};
use crate::aws::target::AwsCalls;
use crate::create::{Input, Network};
use crate::input::{Management, DEFAULT_CONTROL_PLANE_TIMEOUT_SECS};
use crate::kube::hosted_cluster::WaitHostedClusterCondition;
use crate::kube::private_platform::CheckPrivatePlatform;
use crate::Delete;

/// The patch after which the operators build PrivateLink and hcpflow observes it.
pub(crate) const BY_OPERATOR: &str = "privatelink-by-operator";

/// The patch after which PrivateLink's checks (the operator's private platform, every
/// zone covered) come before anything of the cluster is made, not after its network,
/// OIDC and IAM.
pub(crate) const CHECKED_FIRST: &str = "privatelink-checked-first";

/// The condition the control-plane-operator sets on the HostedCluster once its
/// endpoints and records exist.
pub const ENDPOINT_CONDITION: &str = "AWSEndpointAvailable";

/// What the operators made, as a create observed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObservedPrivateLink {
    /// Zone → zone id, as the coverage checks found them.
    pub zone_ids: Vec<(String, String)>,
    /// Per NodePool zone, each service's endpoint and its interface there.
    pub zones: Vec<(String, Vec<ObservedEndpoint>)>,
    /// `(record, target)` in the local zone.
    pub records: Vec<(String, String)>,
}

/// Before the control plane: the operator serves private clusters in this region, then
/// the management cluster covers every guest zone (by zone id), the zones in parallel.
pub(crate) async fn check_coverage(
    ctx: &WorkflowContext,
    aws: &AwsCalls,
    input: &Input,
    management: &Management,
) -> Result<Vec<ZoneCoverage>, WorkflowError> {
    ctx.activity(CheckPrivatePlatform {
        region: input.region.clone(),
    })
    .await?;
    ctx.join_all(input.zones.iter().map(|zone| {
        aws.call(CheckZoneCoverage {
            zone: zone.clone(),
            management_subnet_ids: management.subnet_ids.clone(),
        })
    }))
    .await
    .into_iter()
    .collect()
}

fn timeout_secs(input: &Input) -> u64 {
    input
        .control_plane_timeout_secs
        .unwrap_or(DEFAULT_CONTROL_PLANE_TIMEOUT_SECS)
}

/// Registered just before the HostedCluster, so it runs right after its delete: the
/// operators remove their PrivateLink objects while the HostedCluster goes away; this
/// checks they did (their records would keep our local zone from being deleted).
pub(crate) fn expect_removal(aws: &AwsCalls, infra_id: &str, input: &Input, network: &Network) {
    aws.on_rollback(AwaitPrivateLinkRemoved {
        infra_id: infra_id.to_owned(),
        vpc_id: network.vpc_id.clone(),
        local_zone_id: network.local_zone.zone_id.clone(),
        local_zone_name: network.local_zone.name.clone(),
        timeout_secs: timeout_secs(input),
    });
}

/// After the NodePools are applied: the operator reports its endpoints available, each
/// NodePool zone has an interface of every endpoint in its subnet, and the records point
/// at the endpoints.
pub(crate) async fn observe(
    ctx: &WorkflowContext,
    aws: &AwsCalls,
    infra_id: &str,
    input: &Input,
    network: &Network,
    coverage: Vec<ZoneCoverage>,
) -> Result<ObservedPrivateLink, WorkflowError> {
    ctx.activity(WaitHostedClusterCondition {
        namespace: input.namespace.clone(),
        name: input.name.clone(),
        condition: ENDPOINT_CONDITION.to_owned(),
        timeout_secs: timeout_secs(input),
    })
    .await?;
    let mut pool_zones: Vec<&String> = input.node_pools.iter().map(|p| &p.zone).collect();
    pool_zones.sort();
    pool_zones.dedup();
    let zones = ctx
        .join_all(pool_zones.into_iter().map(|zone| async move {
            let subnet_id = network
                .private_subnets
                .iter()
                .find(|s| &s.zone == zone)
                .map(|s| s.subnet_id.clone())
                .unwrap_or_default();
            let seen = aws
                .call(WaitPrivateLinkZone {
                    infra_id: infra_id.to_owned(),
                    vpc_id: network.vpc_id.clone(),
                    zone: zone.clone(),
                    subnet_id,
                    timeout_secs: timeout_secs(input),
                })
                .await?;
            Ok::<_, WorkflowError>((seen.zone, seen.endpoints))
        }))
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    let records = aws
        .call(WaitPrivateLinkRecords {
            infra_id: infra_id.to_owned(),
            vpc_id: network.vpc_id.clone(),
            local_zone_id: network.local_zone.zone_id.clone(),
            local_zone_name: network.local_zone.name.clone(),
            timeout_secs: timeout_secs(input),
        })
        .await?;
    Ok(ObservedPrivateLink {
        zone_ids: coverage.into_iter().map(|c| (c.zone, c.zone_id)).collect(),
        zones,
        records: records.records,
    })
}

/// What a create before the patch built itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrivateLink {
    pub load_balancer_arn: String,
    pub endpoint_service_name: String,
    pub vpc_endpoint_id: String,
    /// Zone → zone id, as the checks found them.
    pub zone_ids: Vec<(String, String)>,
    pub network_interface_ids: Vec<String>,
    pub records: Vec<String>,
}

/// The pre-patch PrivateLink phase, for replays of histories written before
/// [`BY_OPERATOR`].
pub(crate) async fn built_by_hcpflow(
    ctx: &WorkflowContext,
    infra_id: &str,
    input: &Input,
    management: &Management,
    network: &Network,
    control_plane_operator_arn: &str,
) -> Result<PrivateLink, WorkflowError> {
    let load_balancer = ctx
        .activity(CreateLoadBalancer {
            infra_id: infra_id.to_owned(),
            vpc_id: management.vpc_id.clone(),
            subnet_ids: management.subnet_ids.clone(),
        })
        .await?;
    ctx.on_rollback(Delete(load_balancer.clone()));
    let service = ctx
        .activity(CreateEndpointService {
            infra_id: infra_id.to_owned(),
            load_balancer_arn: load_balancer.load_balancer_arn.clone(),
            allowed_principal: control_plane_operator_arn.to_owned(),
        })
        .await?;
    ctx.on_rollback(Delete(service.clone()));
    let security_group = ctx
        .activity(CreateEndpointSecurityGroup {
            infra_id: infra_id.to_owned(),
            vpc_id: network.vpc_id.clone(),
            machine_cidr: input.vpc_cidr.clone(),
        })
        .await?;
    ctx.on_rollback(Delete(security_group.clone()));
    let candidates: Vec<String> = network
        .private_subnets
        .iter()
        .map(|s| s.subnet_id.clone())
        .collect();
    let offers = ctx
        .join_all(input.zones.iter().map(|zone| {
            ctx.activity(CheckZoneOffer {
                service_name: service.service_name.clone(),
                zone: zone.clone(),
                subnet_ids: candidates.clone(),
            })
        }))
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    let endpoint = ctx
        .activity(CreateInterfaceEndpoint {
            infra_id: infra_id.to_owned(),
            vpc_id: network.vpc_id.clone(),
            service_name: service.service_name.clone(),
            security_group_id: security_group.group_id.clone(),
            subnet_ids: offers.iter().map(|o| o.subnet_id.clone()).collect(),
        })
        .await?;
    ctx.on_rollback(Delete(endpoint.clone()));
    let interfaces = ctx
        .join_all(offers.iter().map(|offer| {
            ctx.activity(WaitEndpointZone {
                vpc_endpoint_id: endpoint.vpc_endpoint_id.clone(),
                zone: offer.zone.clone(),
                subnet_id: offer.subnet_id.clone(),
            })
        }))
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    let mut records = Vec::new();
    for name in [
        format!("api.{}", network.local_zone.name),
        format!("*.apps.{}", network.local_zone.name),
    ] {
        let record = ctx
            .activity(Cname {
                zone_id: network.local_zone.zone_id.clone(),
                name,
                target: endpoint.dns_name.clone(),
            })
            .await?;
        ctx.on_rollback(Delete(record.clone()));
        records.push(record.name);
    }
    Ok(PrivateLink {
        load_balancer_arn: load_balancer.load_balancer_arn,
        endpoint_service_name: service.service_name,
        vpc_endpoint_id: endpoint.vpc_endpoint_id,
        zone_ids: offers.into_iter().map(|o| (o.zone, o.zone_id)).collect(),
        network_interface_ids: interfaces
            .into_iter()
            .map(|i| i.network_interface_id)
            .collect(),
        records,
    })
}

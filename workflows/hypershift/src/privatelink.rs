//! The PrivateLink step of a create (unless Public): in the management VPC an internal
//! NLB and an endpoint service the control-plane-operator role may use; in the guest VPC
//! a security group and one interface endpoint with a subnet in every zone — each zone
//! checked by zone id and waited for in parallel — and the api / *.apps CNAME records in
//! the local zone.

use hcpflow_engine::{WorkflowContext, WorkflowError};
use serde::{Deserialize, Serialize};

use crate::aws::dns::Cname;
use crate::aws::privatelink::{
    CheckZoneOffer, CreateEndpointSecurityGroup, CreateEndpointService, CreateInterfaceEndpoint,
    CreateLoadBalancer, WaitEndpointZone,
};
use crate::create::{Input, Network};
use crate::input::Management;
use crate::Delete;

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

pub(crate) async fn privatelink(
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

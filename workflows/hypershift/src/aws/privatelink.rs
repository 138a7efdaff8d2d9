//! PrivateLink activities: the NLB and endpoint service in the management VPC, the
//! endpoint security group and the interface endpoint in the guest VPC, and the
//! per-zone offer check and wait.

use crate::aws::aws_activity;
use crate::aws::Delete;
use hcpflow_engine::Activity;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateEndpointService {
    pub infra_id: String,
    pub load_balancer_arn: String,
    /// The control-plane-operator role's ARN.
    pub allowed_principal: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointService {
    pub service_id: String,
    pub service_name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateInterfaceEndpoint {
    pub infra_id: String,
    pub vpc_id: String,
    pub service_name: String,
    pub security_group_id: String,
    /// One per zone, as the zone checks chose them.
    pub subnet_ids: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterfaceEndpoint {
    pub vpc_endpoint_id: String,
    /// The endpoint's regional DNS name, the target of the CNAME records.
    pub dns_name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitEndpointZone {
    pub vpc_endpoint_id: String,
    pub zone: String,
    pub subnet_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointZone {
    pub zone: String,
    pub network_interface_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateLoadBalancer {
    pub infra_id: String,
    /// The management VPC and its subnets (prerequisites).
    pub vpc_id: String,
    pub subnet_ids: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadBalancer {
    pub load_balancer_arn: String,
    pub dns_name: String,
    pub target_group_arn: String,
    pub listener_arn: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateEndpointSecurityGroup {
    pub infra_id: String,
    pub vpc_id: String,
    /// The machine network (the VPC CIDR) allowed in.
    pub machine_cidr: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecurityGroup {
    pub group_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckZoneOffer {
    pub service_name: String,
    /// The zone, by this account's name (`us-east-1a`).
    pub zone: String,
    /// The guest VPC's candidate subnets (the private ones); the one in this zone is
    /// chosen.
    pub subnet_ids: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZoneOffer {
    pub zone: String,
    pub zone_id: String,
    pub subnet_id: String,
}

aws_activity!(CreateLoadBalancer => LoadBalancer, "aws.create_load_balancer", creates);
aws_activity!(Delete<LoadBalancer> => (), "aws.delete_load_balancer");
aws_activity!(CreateEndpointService => EndpointService, "aws.create_endpoint_service", creates);
aws_activity!(Delete<EndpointService> => (), "aws.delete_endpoint_service");
aws_activity!(CreateEndpointSecurityGroup => SecurityGroup, "aws.create_endpoint_security_group", creates);
aws_activity!(Delete<SecurityGroup> => (), "aws.delete_security_group");
aws_activity!(CreateInterfaceEndpoint => InterfaceEndpoint, "aws.create_interface_endpoint", creates);
aws_activity!(Delete<InterfaceEndpoint> => (), "aws.delete_interface_endpoint");
aws_activity!(CheckZoneOffer => ZoneOffer, "aws.check_zone_offer");
aws_activity!(WaitEndpointZone => EndpointZone, "aws.wait_endpoint_zone");

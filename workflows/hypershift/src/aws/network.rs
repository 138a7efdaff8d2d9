//! The cluster network's activities (hypershift-aws.md §1.1–1.3): the VPC, its DHCP
//! options and internet gateway, per-zone subnets, NAT gateways with their addresses,
//! route tables and the S3 gateway endpoint. Each create's result is what its
//! compensating [`Delete`] takes.

use crate::aws::aws_activity;
use crate::aws::Delete;
use crate::resource_tags::ResourceTags;
use hcpflow_engine::Activity;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateDhcpOptions {
    pub infra_id: String,
    pub vpc_id: String,
    /// The user's tags (`resource_tags`), besides hcpflow's own.
    #[serde(default, skip_serializing_if = "ResourceTags::is_empty")]
    pub resource_tags: ResourceTags,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DhcpOptions {
    pub dhcp_options_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateInternetGateway {
    pub infra_id: String,
    pub vpc_id: String,
    /// The user's tags (`resource_tags`), besides hcpflow's own.
    #[serde(default, skip_serializing_if = "ResourceTags::is_empty")]
    pub resource_tags: ResourceTags,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InternetGateway {
    pub internet_gateway_id: String,
    pub vpc_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateNatGateway {
    pub infra_id: String,
    pub zone: String,
    /// The zone's public subnet.
    pub subnet_id: String,
    /// The user's tags (`resource_tags`), besides hcpflow's own.
    #[serde(default, skip_serializing_if = "ResourceTags::is_empty")]
    pub resource_tags: ResourceTags,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NatGateway {
    pub nat_gateway_id: String,
    pub allocation_id: String,
}

/// Where the table's default route goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DefaultRoute {
    NatGateway(String),
    InternetGateway(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateRouteTable {
    pub infra_id: String,
    pub vpc_id: String,
    /// `<infra-id>-private-<zone>` or `<infra-id>-public` (see `naming`).
    pub name: String,
    pub default_route: DefaultRoute,
    pub subnet_ids: Vec<String>,
    /// The user's tags (`resource_tags`), besides hcpflow's own.
    #[serde(default, skip_serializing_if = "ResourceTags::is_empty")]
    pub resource_tags: ResourceTags,
    /// Make it the VPC's main table, as `hypershift create infra aws` does with the
    /// public one: a subnet with no table of its own routes to the internet gateway.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub main: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteTable {
    pub route_table_id: String,
    /// The table that was the VPC's main one before this one took its place: its
    /// delete gives the main association back, since AWS refuses to delete a main table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub former_main_route_table_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateS3Endpoint {
    pub infra_id: String,
    pub vpc_id: String,
    pub route_table_ids: Vec<String>,
    /// The user's tags (`resource_tags`), besides hcpflow's own.
    #[serde(default, skip_serializing_if = "ResourceTags::is_empty")]
    pub resource_tags: ResourceTags,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct S3Endpoint {
    pub vpc_endpoint_id: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Exposure {
    Private,
    Public,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateSubnet {
    pub infra_id: String,
    pub vpc_id: String,
    pub zone: String,
    pub cidr_block: String,
    pub exposure: Exposure,
    /// The user's tags (`resource_tags`), besides hcpflow's own.
    #[serde(default, skip_serializing_if = "ResourceTags::is_empty")]
    pub resource_tags: ResourceTags,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subnet {
    pub subnet_id: String,
    pub zone: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateVpc {
    pub infra_id: String,
    /// A /16, checked by the workflow's validation.
    pub cidr_block: String,
    /// The user's tags (`resource_tags`), besides hcpflow's own.
    #[serde(default, skip_serializing_if = "ResourceTags::is_empty")]
    pub resource_tags: ResourceTags,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vpc {
    pub vpc_id: String,
}

aws_activity!(CreateVpc => Vpc, "aws.create_vpc", creates);
aws_activity!(Delete<Vpc> => (), "aws.delete_vpc");
aws_activity!(CreateDhcpOptions => DhcpOptions, "aws.create_dhcp_options", creates);
aws_activity!(Delete<DhcpOptions> => (), "aws.delete_dhcp_options");
aws_activity!(CreateInternetGateway => InternetGateway, "aws.create_internet_gateway", creates);
aws_activity!(Delete<InternetGateway> => (), "aws.delete_internet_gateway");
aws_activity!(CreateSubnet => Subnet, "aws.create_subnet", creates);
aws_activity!(Delete<Subnet> => (), "aws.delete_subnet");
aws_activity!(CreateNatGateway => NatGateway, "aws.create_nat_gateway", creates);
aws_activity!(Delete<NatGateway> => (), "aws.delete_nat_gateway");
aws_activity!(CreateRouteTable => RouteTable, "aws.create_route_table", creates);
aws_activity!(Delete<RouteTable> => (), "aws.delete_route_table");
aws_activity!(CreateS3Endpoint => S3Endpoint, "aws.create_s3_endpoint", creates);
aws_activity!(Delete<S3Endpoint> => (), "aws.delete_s3_endpoint");

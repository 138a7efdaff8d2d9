//! Route53 activities: the cluster's private and `.hypershift.local` zones, CNAME
//! records in them (addressed by zone id), and the check of the public zone.

use crate::aws::aws_activity;
use crate::aws::Delete;
use crate::resource_tags::ResourceTags;
use hcpflow_engine::Activity;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FindPublicZone {
    pub base_domain: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublicZone {
    pub zone_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cname {
    pub zone_id: String,
    /// The record's name, without the trailing dot (`*.apps.demo.hypershift.local`).
    pub name: String,
    pub target: String,
}

impl Cname {
    /// How the ledger names the record.
    pub fn ledger_id(&self) -> String {
        format!("{}/{}/CNAME", self.zone_id, self.name)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreatePrivateZone {
    pub infra_id: String,
    /// The zone's DNS name, without the trailing dot.
    pub name: String,
    /// The VPC the zone answers in.
    pub vpc_id: String,
    /// The user's tags (`resource_tags`), besides hcpflow's own.
    #[serde(default, skip_serializing_if = "ResourceTags::is_empty")]
    pub resource_tags: ResourceTags,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostedZone {
    /// The bare id (`Z0...`), as IAM policies and later calls need it.
    pub zone_id: String,
    pub name: String,
}

aws_activity!(CreatePrivateZone => HostedZone, "aws.create_private_zone", creates);
aws_activity!(Delete<HostedZone> => (), "aws.delete_zone");
aws_activity!(Cname => Cname, "aws.upsert_cname", creates);
aws_activity!(Delete<Cname> => (), "aws.delete_cname");
aws_activity!(FindPublicZone => PublicZone, "aws.find_public_zone");

//! The VPC's DHCP options (hypershift-aws.md §1.1): the region's internal domain and
//! Amazon's DNS, associated with the cluster VPC.

use aws_sdk_ec2::types::{NewDhcpConfiguration, ResourceType};
use hcpflow_engine::ActivityFailure;

use crate::clients::AwsClients;
use crate::ec2::tags;
use crate::error::from_sdk;
use crate::lookup::{created_id, deleted, find_or_create};
use crate::scope::Scope;

pub use hcpflow_hypershift::aws::network::{CreateDhcpOptions, DhcpOptions};

pub const KIND: &str = "ec2:dhcp-options";

/// `ec2.internal` in us-east-1, `<region>.compute.internal` elsewhere.
pub fn domain_name(region: &str) -> String {
    if region == "us-east-1" {
        "ec2.internal".to_owned()
    } else {
        format!("{region}.compute.internal")
    }
}

/// Creates the options (or finds an earlier attempt's) and associates them with the VPC.
///
/// The tags are set again after the create: moto drops the tag specification of
/// CreateDhcpOptions, and CreateTags is idempotent on AWS too.
pub async fn create_dhcp_options(
    aws: &AwsClients,
    scope: &Scope<'_>,
    request: &CreateDhcpOptions,
) -> Result<DhcpOptions, ActivityFailure> {
    let specification = tags::specification(
        ResourceType::DhcpOptions,
        &request.infra_id,
        None,
        scope.idempotency_key,
        &request.resource_tags,
    );
    let dhcp_options_id = find_or_create(
        scope,
        KIND,
        || async {
            let earlier = aws
                .ec2
                .describe_dhcp_options()
                .filters(tags::made_by(scope.idempotency_key))
                .send()
                .await
                .map_err(from_sdk)?;
            Ok(earlier
                .dhcp_options()
                .iter()
                .find_map(|options| options.dhcp_options_id())
                .map(str::to_owned))
        },
        || async {
            let configuration = |key: &str, value: String| {
                NewDhcpConfiguration::builder()
                    .key(key)
                    .values(value)
                    .build()
            };
            let created = aws
                .ec2
                .create_dhcp_options()
                .dhcp_configurations(configuration("domain-name", domain_name(scope.region)))
                .dhcp_configurations(configuration(
                    "domain-name-servers",
                    "AmazonProvidedDNS".to_owned(),
                ))
                .tag_specifications(specification.clone())
                .send()
                .await
                .map_err(from_sdk)?;
            let id = created_id(
                created.dhcp_options().and_then(|o| o.dhcp_options_id()),
                "CreateDhcpOptions",
            )?;
            aws.ec2
                .create_tags()
                .resources(&id)
                .set_tags(Some(specification.tags().to_vec()))
                .send()
                .await
                .map_err(|error| from_sdk(error).into_failure(true))?;
            Ok(id)
        },
    )
    .await?;
    aws.ec2
        .associate_dhcp_options()
        .dhcp_options_id(&dhcp_options_id)
        .vpc_id(&request.vpc_id)
        .send()
        .await
        .map_err(|error| from_sdk(error).into_failure(true))?;
    Ok(DhcpOptions { dhcp_options_id })
}

/// Deletes the options, first moving any VPC still using them back to the default
/// options; gone is done. Runs before or after the VPC's delete alike.
pub async fn delete_dhcp_options(
    aws: &AwsClients,
    scope: &Scope<'_>,
    options: &DhcpOptions,
) -> Result<(), ActivityFailure> {
    // Options still associated cannot be deleted; the VPC may outlive them (a rollback
    // undoes the association's create after the VPC's, newest first), so move any VPC
    // still using them back to `default` first.
    let using = aws
        .ec2
        .describe_vpcs()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("dhcp-options-id")
                .values(&options.dhcp_options_id)
                .build(),
        )
        .send()
        .await
        .map_err(from_sdk)?;
    for vpc in using.vpcs() {
        if let Some(vpc_id) = vpc.vpc_id() {
            aws.ec2
                .associate_dhcp_options()
                .dhcp_options_id("default")
                .vpc_id(vpc_id)
                .send()
                .await
                .map_err(from_sdk)?;
        }
    }
    let result = aws
        .ec2
        .delete_dhcp_options()
        .dhcp_options_id(&options.dhcp_options_id)
        .send()
        .await;
    deleted(scope, KIND, &options.dhcp_options_id, result)
}

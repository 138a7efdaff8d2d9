//! The prerequisites of a create, checked before anything is made: the OIDC bucket
//! exists (and where), and the management VPC and subnets PrivateLink uses exist, the
//! subnets in that VPC.

use hcpflow_engine::ActivityFailure;

use crate::clients::AwsClients;
use crate::error::from_sdk;

pub use hcpflow_hypershift::aws::prerequisites::{CheckPrerequisites, Prerequisites};

fn missing(what: String) -> ActivityFailure {
    ActivityFailure::permanent(
        "MissingPrerequisite",
        format!("{what}: it is a prerequisite, create it before the cluster"),
    )
}

/// Errors: a permanent `RegionMismatch` when the cluster's region is not the one these
/// clients call (since region targets the clients are the cluster's region's, so only a
/// create recorded before them can meet it); a permanent `OidcBucketMissing` or
/// `MissingPrerequisite` naming what is missing; AWS errors classified as usual.
pub async fn check_prerequisites(
    aws: &AwsClients,
    request: &CheckPrerequisites,
) -> Result<Prerequisites, ActivityFailure> {
    if let Some(region) = request.region.as_deref().filter(|r| *r != aws.region) {
        return Err(ActivityFailure::permanent(
            "RegionMismatch",
            format!(
                "the cluster's region is {region}, but this hcpflow's AWS activities call {}: \
                 create it through workers configured for {region} (AWS_REGION)",
                aws.region
            ),
        ));
    }
    // The bucket may be in another region than the cluster (the management cluster's).
    let region = crate::oidc::documents::bucket_region(aws, &request.oidc_bucket).await?;
    if let Some(vpc_id) = &request.management_vpc_id {
        let in_vpc = aws_sdk_ec2::types::Filter::builder()
            .name("vpc-id")
            .values(vpc_id)
            .build();
        let vpcs = aws
            .ec2
            .describe_vpcs()
            .filters(in_vpc.clone())
            .send()
            .await
            .map_err(from_sdk)?;
        if vpcs.vpcs().is_empty() {
            return Err(missing(format!(
                "the management VPC {vpc_id} does not exist in {}: PrivateLink needs the \
                 management cluster's VPC in the cluster's region",
                aws.region
            )));
        }
        let subnets = aws
            .ec2
            .describe_subnets()
            .filters(in_vpc)
            .send()
            .await
            .map_err(from_sdk)?;
        let found: Vec<&str> = subnets
            .subnets()
            .iter()
            .filter_map(|s| s.subnet_id())
            .collect();
        let absent: Vec<&str> = request
            .management_subnet_ids
            .iter()
            .map(String::as_str)
            .filter(|id| !found.contains(id))
            .collect();
        if !absent.is_empty() {
            return Err(missing(format!(
                "the management subnets {} are not in VPC {vpc_id}",
                absent.join(", ")
            )));
        }
    }
    Ok(Prerequisites {
        oidc_bucket_region: region,
    })
}

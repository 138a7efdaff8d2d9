//! The S3 gateway endpoint of the cluster VPC, on every route table (hypershift-aws.md
//! §1.3 step 10).

use aws_sdk_ec2::types::{ResourceType, VpcEndpointType};
use hcpflow_engine::ActivityFailure;

use crate::clients::AwsClients;
use crate::ec2::endpoint_state::is_gone;
use crate::ec2::tags;
use crate::error::from_sdk;
use crate::lookup::{created_id, find_or_create, unless_not_found};
use crate::scope::Scope;

pub use hcpflow_hypershift::aws::network::{CreateS3Endpoint, S3Endpoint};

pub const KIND: &str = "ec2:vpc-endpoint";

pub fn service_name(region: &str) -> String {
    format!("com.amazonaws.{region}.s3")
}

/// Creates the endpoint (or finds an earlier attempt's). moto ignores the ClientToken;
/// the tag lookup is what keeps it to one.
pub async fn create_s3_endpoint(
    aws: &AwsClients,
    scope: &Scope<'_>,
    request: &CreateS3Endpoint,
) -> Result<S3Endpoint, ActivityFailure> {
    let service = service_name(scope.region);
    let vpc_endpoint_id = find_or_create(
        scope,
        KIND,
        || async {
            let earlier = aws
                .ec2
                .describe_vpc_endpoints()
                .filters(tags::made_by(scope.idempotency_key))
                .send()
                .await
                .map_err(from_sdk)?;
            Ok(earlier
                .vpc_endpoints()
                .iter()
                .filter(|endpoint| endpoint.service_name() == Some(service.as_str()))
                .filter(|endpoint| !is_gone(endpoint))
                .find_map(|endpoint| endpoint.vpc_endpoint_id())
                .map(str::to_owned))
        },
        || async {
            let created = aws
                .ec2
                .create_vpc_endpoint()
                .vpc_id(&request.vpc_id)
                .service_name(&service)
                .vpc_endpoint_type(VpcEndpointType::Gateway)
                .set_route_table_ids(Some(request.route_table_ids.clone()))
                .client_token(scope.idempotency_key)
                .tag_specifications(tags::specification(
                    ResourceType::VpcEndpoint,
                    &request.infra_id,
                    None,
                    scope.idempotency_key,
                    &request.resource_tags,
                ))
                .send()
                .await
                // A route table just made may not be visible yet.
                .map_err(|error| from_sdk(error).into_failure(true))?;
            created_id(
                created.vpc_endpoint().and_then(|e| e.vpc_endpoint_id()),
                "CreateVpcEndpoint",
            )
        },
    )
    .await?;
    Ok(S3Endpoint { vpc_endpoint_id })
}

/// Deletes the endpoint; gone is done. (It is looked up first: moto fails a second
/// delete of a gateway endpoint with `InvalidRoute.NotFound`.)
pub async fn delete_s3_endpoint(
    aws: &AwsClients,
    scope: &Scope<'_>,
    endpoint: &S3Endpoint,
) -> Result<(), ActivityFailure> {
    let found = aws
        .ec2
        .describe_vpc_endpoints()
        .vpc_endpoint_ids(&endpoint.vpc_endpoint_id)
        .send()
        .await;
    let Some(found) = unless_not_found(found)? else {
        return Ok(());
    };
    let live = found.vpc_endpoints().iter().any(|e| !is_gone(e));
    if !live {
        return Ok(());
    }
    let answer = aws
        .ec2
        .delete_vpc_endpoints()
        .vpc_endpoint_ids(&endpoint.vpc_endpoint_id)
        .send()
        .await
        .map_err(from_sdk)?;
    // The call succeeds as a whole; per-endpoint failures come back in the body.
    if let Some(failed) = answer.unsuccessful().first() {
        let code = failed.error().and_then(|e| e.code()).unwrap_or("Unknown");
        let message = failed.error().and_then(|e| e.message()).unwrap_or_default();
        let error = crate::error::AwsError::new(code, message, None);
        if !error.is_not_found() {
            return Err(error.into());
        }
        return Ok(());
    }
    scope
        .log
        .deleted(scope.resource(KIND, &endpoint.vpc_endpoint_id));
    Ok(())
}

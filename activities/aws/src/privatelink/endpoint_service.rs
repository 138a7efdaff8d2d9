//! The VPC endpoint service in front of the NLB, with the control-plane-operator role as
//! its allowed principal (hypershift-aws.md §5 step 3).
//!
//! An earlier attempt's service is found by the NLB it fronts (a load balancer belongs
//! to at most one service — AWS's own answer to a second create is "already
//! associated"); moto ignores the ClientToken and would make a second one.

use aws_sdk_ec2::types::{ResourceType, ServiceConfiguration};
use hcpflow_engine::ActivityFailure;

use crate::clients::AwsClients;
use crate::ec2::tags;
use crate::error::from_sdk;
use crate::lookup::{created_id, find_or_create};
use crate::naming;
use crate::privatelink::without_iam_path;
use crate::scope::Scope;

pub use hcpflow_hypershift::aws::privatelink::{CreateEndpointService, EndpointService};

pub const KIND: &str = "ec2:vpc-endpoint-service";

fn is_gone(state: Option<&aws_sdk_ec2::types::ServiceState>) -> bool {
    state.is_some_and(|state| {
        matches!(
            state.as_str().to_ascii_lowercase().as_str(),
            "deleted" | "deleting" | "failed"
        )
    })
}

/// Ensures the service (no acceptance required) and its allowed principal.
pub async fn create_endpoint_service(
    aws: &AwsClients,
    scope: &Scope<'_>,
    request: &CreateEndpointService,
) -> Result<EndpointService, ActivityFailure> {
    let service_id = find_or_create(
        scope,
        KIND,
        || async {
            let found = find_for_load_balancer(aws, &request.load_balancer_arn).await?;
            Ok(found.map(|(id, _)| id))
        },
        || async {
            let name = naming::endpoint_service(&request.infra_id);
            let created = aws
                .ec2
                .create_vpc_endpoint_service_configuration()
                .acceptance_required(false)
                .network_load_balancer_arns(&request.load_balancer_arn)
                .client_token(scope.idempotency_key)
                .tag_specifications(tags::specification(
                    ResourceType::VpcEndpointService,
                    &request.infra_id,
                    Some(&name),
                    scope.idempotency_key,
                    // Built for creates from before the operators owned PrivateLink, which had no
                    // user tags.
                    &Default::default(),
                ))
                .send()
                .await
                .map_err(|error| from_sdk(error).into_failure(true))?;
            created_id(
                created.service_configuration().and_then(|c| c.service_id()),
                "CreateVpcEndpointServiceConfiguration",
            )
        },
    )
    .await?;
    let described = aws
        .ec2
        .describe_vpc_endpoint_service_configurations()
        .service_ids(&service_id)
        .send()
        .await
        .map_err(|error| from_sdk(error).into_failure(true))?;
    let service_name = described
        .service_configurations()
        .first()
        .and_then(|c| c.service_name())
        .map(str::to_owned)
        .ok_or_else(|| {
            ActivityFailure::retryable(
                "MissingId",
                format!("endpoint service {service_id} has no name yet"),
            )
        })?;

    let principal = without_iam_path(&request.allowed_principal);
    let permissions = aws
        .ec2
        .describe_vpc_endpoint_service_permissions()
        .service_id(&service_id)
        .send()
        .await
        .map_err(|error| from_sdk(error).into_failure(true))?;
    let allowed = permissions
        .allowed_principals()
        .iter()
        .any(|p| p.principal() == Some(principal.as_str()));
    if !allowed {
        aws.ec2
            .modify_vpc_endpoint_service_permissions()
            .service_id(&service_id)
            .add_allowed_principals(&principal)
            .send()
            .await
            .map_err(|error| from_sdk(error).into_failure(true))?;
    }
    Ok(EndpointService {
        service_id,
        service_name,
    })
}

/// The live service fronting this NLB: `(id, name)`.
pub async fn find_for_load_balancer(
    aws: &AwsClients,
    load_balancer_arn: &str,
) -> Result<Option<(String, String)>, ActivityFailure> {
    let services = live_services(aws).await?;
    Ok(services.iter().find_map(|service| {
        let fronts = service
            .network_load_balancer_arns()
            .iter()
            .any(|arn| arn == load_balancer_arn);
        match (fronts, service.service_id(), service.service_name()) {
            (true, Some(id), Some(name)) => Some((id.to_owned(), name.to_owned())),
            _ => None,
        }
    }))
}

/// Every endpoint service of the account that is not deleted, deleting or failed.
pub async fn live_services(aws: &AwsClients) -> Result<Vec<ServiceConfiguration>, ActivityFailure> {
    let mut live = Vec::new();
    let mut token = None;
    loop {
        let page = aws
            .ec2
            .describe_vpc_endpoint_service_configurations()
            .set_next_token(token)
            .send()
            .await
            .map_err(from_sdk)?;
        live.extend(
            page.service_configurations()
                .iter()
                .filter(|service| !is_gone(service.service_state()))
                .cloned(),
        );
        token = page.next_token().map(str::to_owned);
        if token.is_none() {
            return Ok(live);
        }
    }
}

/// Deletes the service; one already gone is done. A service with endpoints still
/// connected (`ExistingVpcEndpointConnections`) has them rejected, and the attempt fails
/// retryably so the next one deletes it once they are closed.
pub async fn delete_endpoint_service(
    aws: &AwsClients,
    scope: &Scope<'_>,
    service: &EndpointService,
) -> Result<(), ActivityFailure> {
    let answer = aws
        .ec2
        .delete_vpc_endpoint_service_configurations()
        .service_ids(&service.service_id)
        .send()
        .await;
    let answer = match answer {
        Ok(answer) => answer,
        Err(error) => {
            let error = from_sdk(error);
            return if error.is_not_found() {
                Ok(())
            } else {
                Err(error.into())
            };
        }
    };
    // This call reports per-item failures in its answer, not as an error.
    let Some(error) = answer.unsuccessful().first().and_then(|item| item.error()) else {
        scope.log.deleted(scope.resource(KIND, &service.service_id));
        return Ok(());
    };
    let error = crate::error::from_unsuccessful(error);
    if error.is_not_found() {
        return Ok(());
    }
    if error.code == "ExistingVpcEndpointConnections" {
        reject_connections(aws, &service.service_id).await?;
    }
    Err(error.into_failure(false))
}

/// Rejects the endpoint connections still open to the service.
async fn reject_connections(aws: &AwsClients, service_id: &str) -> Result<(), ActivityFailure> {
    let connections = aws
        .ec2
        .describe_vpc_endpoint_connections()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("service-id")
                .values(service_id)
                .build(),
        )
        .send()
        .await
        .map_err(from_sdk)?;
    let open: Vec<String> = connections
        .vpc_endpoint_connections()
        .iter()
        .filter(|c| {
            c.vpc_endpoint_state().is_some_and(|state| {
                matches!(
                    state.as_str().to_ascii_lowercase().as_str(),
                    "pendingacceptance" | "pending" | "available"
                )
            })
        })
        .filter_map(|c| c.vpc_endpoint_id().map(str::to_owned))
        .collect();
    if !open.is_empty() {
        aws.ec2
            .reject_vpc_endpoint_connections()
            .service_id(service_id)
            .set_vpc_endpoint_ids(Some(open))
            .send()
            .await
            .map_err(from_sdk)?;
    }
    Ok(())
}

//! The hypershift-operator's AWSEndpointService controller
//! (hypershift-operator/controllers/platform/aws/controller.go): once the load balancer
//! of a private Service is `active`, a VPC endpoint service in front of it
//! (`ensureVpcEndpointService`: AcceptanceRequired=false, tagged with the resource
//! tags) that allows the control-plane-operator's role, its IAM path removed, and the
//! `additionalAllowedPrincipals` (`reconcileEndpointServicePermissions`); the messages
//! of `AWSEndpointServiceAvailable=False` are the controller's. It works with the
//! management account's credentials (the operator's `AWS_SHARED_CREDENTIALS_FILE`): no
//! IAM check.
//!
//! The real controller keeps the service's name in the AWSEndpointService's status; the
//! emulator finds it again by the load balancer it fronts (the controller's adoption
//! path, `findExistingVpcEndpointService`) — moto ignores the filters of
//! DescribeVpcEndpointServiceConfigurations, so they are applied here.

use std::collections::BTreeSet;

use aws_sdk_ec2::types::{ResourceType, ServiceConfiguration, Tag, TagSpecification};
use aws_sdk_elasticloadbalancingv2::types::LoadBalancerStateEnum;

use super::aws::{sdk, AwsError, Clients, Service};
use super::load_balancer;
use super::spec::{Cluster, PrivateService};

/// `controlPlaneOperatorRoleARNWithoutPath`, with Go's `arn.Parse` errors.
fn role_arn_without_path(arn: &str) -> Result<String, String> {
    if arn.is_empty() {
        return Err("hosted cluster does not have control plane operator credentials".into());
    }
    let parse_error = |why: &str| format!("failed to parse {arn} into an ARN: arn: {why}");
    let Some(rest) = arn.strip_prefix("arn:") else {
        return Err(parse_error("invalid prefix"));
    };
    let sections: Vec<&str> = rest.splitn(5, ':').collect();
    let [partition, service, _region, account, resource] = sections.as_slice() else {
        return Err(parse_error("not enough sections"));
    };
    let name = resource.rsplit('/').next().unwrap_or(resource);
    Ok(format!("arn:{partition}:{service}::{account}:role/{name}"))
}

/// Whether the configuration fronts a load balancer of this name (moto writes `app/`
/// into NLB ARNs, so only the name segment is compared).
fn fronts(configuration: &ServiceConfiguration, lb_name: &str) -> bool {
    configuration
        .network_load_balancer_arns()
        .iter()
        .any(|arn| arn.split('/').any(|segment| segment == lb_name))
}

async fn configurations(clients: &Clients) -> Result<Vec<ServiceConfiguration>, AwsError> {
    let mut all = Vec::new();
    let mut token = None;
    loop {
        let page = clients
            .ec2
            .describe_vpc_endpoint_service_configurations()
            .set_next_token(token.take())
            .send()
            .await
            .map_err(|e| sdk(Service::Ec2, "DescribeVpcEndpointServiceConfigurations", e))?;
        all.extend(page.service_configurations().iter().cloned());
        match page.next_token() {
            Some(next) if !next.is_empty() => token = Some(next.to_owned()),
            _ => return Ok(all),
        }
    }
}

/// `reconcileAWSEndpointServiceStatus`: the endpoint service's name, or the message of
/// `AWSEndpointServiceAvailable=False`.
pub(super) async fn ensure(
    clients: &Clients,
    cluster: &Cluster,
    service: &PrivateService,
) -> Result<String, String> {
    let lb_name = load_balancer::name(cluster, service.name);
    let found = clients
        .elbv2
        .describe_load_balancers()
        .names(&lb_name)
        .send()
        .await
        .map_err(|e| {
            sdk(Service::Elbv2, "DescribeLoadBalancers", e)
                .code()
                .to_owned()
        })?;
    let Some(lb) = found.load_balancers().first() else {
        return Err(format!("load balancer {lb_name} not found"));
    };
    let Some(lb_arn) = lb.load_balancer_arn() else {
        return Err("load balancer ARN is nil".into());
    };
    if lb.state().and_then(|s| s.code()) != Some(&LoadBalancerStateEnum::Active) {
        return Err(format!("load balancer {lb_arn} is not yet active"));
    }
    let existing = configurations(clients)
        .await
        .map_err(|e| e.code().to_owned())?
        .into_iter()
        .find(|c| fronts(c, &lb_name));
    let configuration = match existing {
        Some(configuration) => configuration,
        None => {
            let tags: Vec<Tag> = cluster
                .resource_tags
                .iter()
                .map(|(k, v)| Tag::builder().key(k).value(v).build())
                .collect();
            let created = clients
                .ec2
                .create_vpc_endpoint_service_configuration()
                .acceptance_required(false)
                .network_load_balancer_arns(lb_arn)
                .tag_specifications(
                    TagSpecification::builder()
                        .resource_type(ResourceType::VpcEndpointService)
                        .set_tags(Some(tags))
                        .build(),
                )
                .send()
                .await
                .map_err(|e| {
                    sdk(Service::Ec2, "CreateVpcEndpointServiceConfiguration", e)
                        .code()
                        .to_owned()
                })?;
            let configuration = created
                .service_configuration()
                .cloned()
                .ok_or("CreateVpcEndpointServiceConfiguration answered no configuration")?;
            tracing::info!(cluster = %cluster.name, service = service.name,
                           endpoint_service = configuration.service_name().unwrap_or_default(),
                           "the hypershift-operator created an endpoint service");
            configuration
        }
    };
    let service_id = configuration.service_id().unwrap_or_default().to_owned();
    permissions(clients, cluster, &service_id).await?;
    Ok(configuration.service_name().unwrap_or_default().to_owned())
}

/// `reconcileEndpointServicePermissions`.
async fn permissions(clients: &Clients, cluster: &Cluster, service_id: &str) -> Result<(), String> {
    let current = clients
        .ec2
        .describe_vpc_endpoint_service_permissions()
        .service_id(service_id)
        .send()
        .await
        .map_err(|e| {
            format!(
                "failed to get vpc endpoint permissions with service ID {service_id}: {}",
                sdk(Service::Ec2, "DescribeVpcEndpointServicePermissions", e)
            )
        })?;
    let role = role_arn_without_path(&cluster.cpo_role_arn)
        .map_err(|e| format!("failed to get control plane operator role ARN: {e}"))?;
    let old: BTreeSet<String> = current
        .allowed_principals()
        .iter()
        .filter_map(|p| p.principal())
        .map(str::to_owned)
        .collect();
    let mut desired: BTreeSet<String> = cluster.additional_principals.iter().cloned().collect();
    desired.insert(role);
    if desired == old {
        return Ok(());
    }
    let added: Vec<String> = desired.difference(&old).cloned().collect();
    let removed: Vec<String> = old.difference(&desired).cloned().collect();
    clients
        .ec2
        .modify_vpc_endpoint_service_permissions()
        .service_id(service_id)
        .set_add_allowed_principals((!added.is_empty()).then_some(added))
        .set_remove_allowed_principals((!removed.is_empty()).then_some(removed))
        .send()
        .await
        .map_err(|e| {
            format!(
                "failed to update vpc endpoint permissions: {}",
                sdk(Service::Ec2, "ModifyVpcEndpointServicePermissions", e)
            )
        })?;
    Ok(())
}

/// The controller's `delete`: removes the endpoint services in front of the Service's
/// load balancer; none is done. `Err` with the controller's message.
pub(super) async fn destroy(
    clients: &Clients,
    cluster: &Cluster,
    service: &PrivateService,
) -> Result<(), String> {
    let lb_name = load_balancer::name(cluster, service.name);
    let ids: Vec<String> = configurations(clients)
        .await
        .map_err(|e| format!("error code: {}", e.code()))?
        .iter()
        .filter(|c| fronts(c, &lb_name))
        .filter_map(|c| c.service_id().map(str::to_owned))
        .collect();
    for id in ids {
        let output = clients
            .ec2
            .delete_vpc_endpoint_service_configurations()
            .service_ids(&id)
            .send()
            .await
            .map_err(|e| {
                format!(
                    "error code: {}",
                    sdk(Service::Ec2, "DeleteVpcEndpointServiceConfigurations", e).code()
                )
            })?;
        if let Some(error) = output.unsuccessful().first().and_then(|u| u.error()) {
            if error.code() != Some("InvalidVpcEndpointService.NotFound") {
                return Err(error.message().unwrap_or_default().to_owned());
            }
        }
        tracing::info!(cluster = %cluster.name, service = service.name, endpoint_service = %id,
                       "the hypershift-operator deleted an endpoint service");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_principal_is_the_role_without_its_path() {
        assert_eq!(
            role_arn_without_path("arn:aws:iam::123456789012:role/a/b/demo-cpo"),
            Ok("arn:aws:iam::123456789012:role/demo-cpo".into())
        );
        assert_eq!(
            role_arn_without_path(""),
            Err("hosted cluster does not have control plane operator credentials".into())
        );
        assert_eq!(
            role_arn_without_path("role/x"),
            Err("failed to parse role/x into an ARN: arn: invalid prefix".into())
        );
        assert_eq!(
            role_arn_without_path("arn:aws:iam"),
            Err("failed to parse arn:aws:iam into an ARN: arn: not enough sections".into())
        );
    }
}

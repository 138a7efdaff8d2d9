//! The internal network load balancer in the management VPC, its target group and its
//! listener on the API server port.
//!
//! Found by name before each create: AWS answers a repeated CreateLoadBalancer with the
//! existing one, but moto makes a second (with a new ARN), and a target group of an
//! existing name is `DuplicateTargetGroupName` there. Never parse `net/` out of the ARN:
//! moto writes `app/` even for NLBs.

use std::time::Duration;

use aws_sdk_elasticloadbalancingv2::types::{
    Action, ActionTypeEnum, LoadBalancerSchemeEnum, LoadBalancerStateEnum, LoadBalancerTypeEnum,
    ProtocolEnum, Tag, TargetTypeEnum,
};
use hcpflow_engine::ActivityFailure;

use crate::clients::AwsClients;
use crate::error::from_sdk;
use crate::lookup::{created_id, deleted, find_or_create, unless_not_found};
use crate::naming;
use crate::poll::Poll;
use crate::privatelink::API_SERVER_PORT;
use crate::scope::Scope;

pub use hcpflow_hypershift::aws::privatelink::{CreateLoadBalancer, LoadBalancer};

pub const LOAD_BALANCER_KIND: &str = "elbv2:load-balancer";
pub const TARGET_GROUP_KIND: &str = "elbv2:target-group";
pub const LISTENER_KIND: &str = "elbv2:listener";

const WAIT: Duration = Duration::from_secs(300);

fn tags(infra_id: &str, name: &str, idempotency_key: &str) -> Vec<Tag> {
    naming::tags(infra_id, Some(name), idempotency_key, &Default::default())
        .into_iter()
        .map(|(key, value)| Tag::builder().key(key).value(value).build())
        .collect()
}

/// Ensures the NLB (and waits until it is active), the target group and the listener.
pub async fn create_load_balancer(
    aws: &AwsClients,
    scope: &Scope<'_>,
    request: &CreateLoadBalancer,
) -> Result<LoadBalancer, ActivityFailure> {
    let elbv2 = &aws.elbv2;
    let lb_name = naming::load_balancer(&request.infra_id);
    let load_balancer_arn = find_or_create(
        scope,
        LOAD_BALANCER_KIND,
        || async {
            let found =
                unless_not_found(elbv2.describe_load_balancers().names(&lb_name).send().await)?;
            Ok(found.and_then(|found| {
                found
                    .load_balancers()
                    .first()
                    .and_then(|lb| lb.load_balancer_arn())
                    .map(str::to_owned)
            }))
        },
        || async {
            let created = elbv2
                .create_load_balancer()
                .name(&lb_name)
                .r#type(LoadBalancerTypeEnum::Network)
                .scheme(LoadBalancerSchemeEnum::Internal)
                .set_subnets(Some(request.subnet_ids.clone()))
                .set_tags(Some(tags(
                    &request.infra_id,
                    &lb_name,
                    scope.idempotency_key,
                )))
                .send()
                .await
                .map_err(from_sdk)?;
            created_id(
                created
                    .load_balancers()
                    .first()
                    .and_then(|lb| lb.load_balancer_arn()),
                "CreateLoadBalancer",
            )
        },
    )
    .await?;
    let dns_name = wait_active(aws, &load_balancer_arn).await?;

    let tg_name = naming::target_group(&request.infra_id);
    let target_group_arn = find_or_create(
        scope,
        TARGET_GROUP_KIND,
        || async {
            let found =
                unless_not_found(elbv2.describe_target_groups().names(&tg_name).send().await)?;
            Ok(found.and_then(|found| {
                found
                    .target_groups()
                    .first()
                    .and_then(|tg| tg.target_group_arn())
                    .map(str::to_owned)
            }))
        },
        || async {
            let created = elbv2
                .create_target_group()
                .name(&tg_name)
                .protocol(ProtocolEnum::Tcp)
                .port(API_SERVER_PORT)
                .vpc_id(&request.vpc_id)
                .target_type(TargetTypeEnum::Ip)
                .set_tags(Some(tags(
                    &request.infra_id,
                    &tg_name,
                    scope.idempotency_key,
                )))
                .send()
                .await
                .map_err(from_sdk)?;
            created_id(
                created
                    .target_groups()
                    .first()
                    .and_then(|tg| tg.target_group_arn()),
                "CreateTargetGroup",
            )
        },
    )
    .await?;

    let listener_arn = find_or_create(
        scope,
        LISTENER_KIND,
        || async {
            let found = unless_not_found(
                elbv2
                    .describe_listeners()
                    .load_balancer_arn(&load_balancer_arn)
                    .send()
                    .await,
            )?;
            Ok(found.and_then(|found| {
                found
                    .listeners()
                    .iter()
                    .find(|listener| listener.port() == Some(API_SERVER_PORT))
                    .and_then(|listener| listener.listener_arn())
                    .map(str::to_owned)
            }))
        },
        || async {
            let forward = Action::builder()
                .r#type(ActionTypeEnum::Forward)
                .target_group_arn(&target_group_arn)
                .build();
            let created = elbv2
                .create_listener()
                .load_balancer_arn(&load_balancer_arn)
                .protocol(ProtocolEnum::Tcp)
                .port(API_SERVER_PORT)
                .default_actions(forward)
                .set_tags(Some(tags(
                    &request.infra_id,
                    &lb_name,
                    scope.idempotency_key,
                )))
                .send()
                .await
                .map_err(|error| from_sdk(error).into_failure(true))?;
            created_id(
                created.listeners().first().and_then(|l| l.listener_arn()),
                "CreateListener",
            )
        },
    )
    .await?;
    Ok(LoadBalancer {
        load_balancer_arn,
        dns_name,
        target_group_arn,
        listener_arn,
    })
}

/// Polls until the NLB is `active`; returns its DNS name.
async fn wait_active(aws: &AwsClients, arn: &str) -> Result<String, ActivityFailure> {
    let mut poll = Poll::new(WAIT);
    loop {
        let found = aws
            .elbv2
            .describe_load_balancers()
            .load_balancer_arns(arn)
            .send()
            .await
            .map_err(|error| from_sdk(error).into_failure(true))?;
        let lb = found.load_balancers().first();
        let state = lb.and_then(|lb| lb.state()).and_then(|s| s.code());
        match state {
            Some(LoadBalancerStateEnum::Active) => {
                return Ok(lb
                    .and_then(|lb| lb.dns_name())
                    .unwrap_or_default()
                    .to_owned())
            }
            Some(LoadBalancerStateEnum::Failed) => {
                return Err(ActivityFailure::permanent(
                    "LoadBalancerFailed",
                    format!("load balancer {arn} failed to provision"),
                ))
            }
            _ => {}
        }
        if !poll.again().await {
            return Err(ActivityFailure::retryable(
                "LoadBalancerNotReady",
                format!("load balancer {arn} is not active after {WAIT:?} (state {state:?})"),
            ));
        }
    }
}

/// Deletes the listener, the NLB, then the target group (in use until the listener is
/// gone: `ResourceInUse` is retried); what is gone is done.
pub async fn delete_load_balancer(
    aws: &AwsClients,
    scope: &Scope<'_>,
    lb: &LoadBalancer,
) -> Result<(), ActivityFailure> {
    let elbv2 = &aws.elbv2;
    let result = elbv2
        .delete_listener()
        .listener_arn(&lb.listener_arn)
        .send()
        .await;
    deleted(scope, LISTENER_KIND, &lb.listener_arn, result)?;
    // Deleting a deleted NLB succeeds, so ask first to keep the ledger honest.
    let exists = unless_not_found(
        elbv2
            .describe_load_balancers()
            .load_balancer_arns(&lb.load_balancer_arn)
            .send()
            .await,
    )?
    .is_some_and(|found| !found.load_balancers().is_empty());
    if exists {
        let result = elbv2
            .delete_load_balancer()
            .load_balancer_arn(&lb.load_balancer_arn)
            .send()
            .await;
        deleted(scope, LOAD_BALANCER_KIND, &lb.load_balancer_arn, result)?;
    }
    let result = elbv2
        .delete_target_group()
        .target_group_arn(&lb.target_group_arn)
        .send()
        .await;
    deleted(scope, TARGET_GROUP_KIND, &lb.target_group_arn, result)
}

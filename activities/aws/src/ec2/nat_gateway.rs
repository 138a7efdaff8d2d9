//! A zone's NAT gateway and its Elastic IP (hypershift-aws.md §1.2, §1.7 step 6).
//!
//! Unlike the `hypershift` CLI, the EIP is looked up by its idempotency tag before one
//! is allocated, so a crash between the two calls does not leak an address. moto
//! ignores tag filters on NAT gateways, so the NAT is looked up by its subnet and its
//! tags are matched here. The delete waits until the NAT is gone before releasing the
//! address (AWS refuses to release an address in use; moto does not check).

use std::time::Duration;

use aws_sdk_ec2::types::{DomainType, NatGateway as AwsNatGateway, NatGatewayState, ResourceType};
use hcpflow_engine::ActivityFailure;

use crate::clients::AwsClients;
use crate::ec2::tags;
use crate::error::from_sdk;
use crate::lookup::{created_id, deleted, find_or_create, unless_not_found};
use crate::naming;
use crate::poll::Poll;
use crate::scope::Scope;

pub use hcpflow_hypershift::aws::network::{CreateNatGateway, NatGateway};

pub const NAT_KIND: &str = "ec2:nat-gateway";
pub const EIP_KIND: &str = "ec2:elastic-ip";

/// How long a create waits for `available`, and a delete for `deleted`, before the
/// attempt fails retryably (the next attempt finds the NAT and waits on).
const WAIT: Duration = Duration::from_secs(300);

fn is_gone(nat: &AwsNatGateway) -> bool {
    matches!(
        nat.state(),
        Some(NatGatewayState::Deleted | NatGatewayState::Deleting | NatGatewayState::Failed)
    )
}

/// Allocates the address and creates the NAT in the public subnet (or finds what an
/// earlier attempt made), then waits until the NAT is `available`.
pub async fn create_nat_gateway(
    aws: &AwsClients,
    scope: &Scope<'_>,
    request: &CreateNatGateway,
) -> Result<NatGateway, ActivityFailure> {
    let allocation_id = find_or_create(
        scope,
        EIP_KIND,
        || async {
            let earlier = aws
                .ec2
                .describe_addresses()
                .filters(tags::made_by(scope.idempotency_key))
                .send()
                .await
                .map_err(from_sdk)?;
            Ok(earlier
                .addresses()
                .iter()
                .find_map(|address| address.allocation_id())
                .map(str::to_owned))
        },
        || async {
            let name = naming::elastic_ip(&request.infra_id, &request.zone);
            let allocated = aws
                .ec2
                .allocate_address()
                .domain(DomainType::Vpc)
                .tag_specifications(tags::specification(
                    ResourceType::ElasticIp,
                    &request.infra_id,
                    Some(&name),
                    scope.idempotency_key,
                    &request.resource_tags,
                ))
                .send()
                .await
                .map_err(from_sdk)?;
            created_id(allocated.allocation_id(), "AllocateAddress")
        },
    )
    .await?;
    let nat_gateway_id = find_or_create(
        scope,
        NAT_KIND,
        || async {
            let in_subnet = aws
                .ec2
                .describe_nat_gateways()
                .filter(
                    aws_sdk_ec2::types::Filter::builder()
                        .name("subnet-id")
                        .values(&request.subnet_id)
                        .build(),
                )
                .send()
                .await
                .map_err(from_sdk)?;
            let ours = in_subnet.nat_gateways().iter().find(|nat| {
                !is_gone(nat)
                    && nat.tags().iter().any(|tag| {
                        tag.key() == Some(naming::IDEMPOTENCY_TAG)
                            && tag.value() == Some(scope.idempotency_key)
                    })
            });
            Ok(ours.and_then(|nat| nat.nat_gateway_id()).map(str::to_owned))
        },
        || async {
            let name = naming::nat_gateway(&request.infra_id, &request.zone);
            let created = aws
                .ec2
                .create_nat_gateway()
                .allocation_id(&allocation_id)
                .subnet_id(&request.subnet_id)
                .client_token(scope.idempotency_key)
                .tag_specifications(tags::specification(
                    ResourceType::Natgateway,
                    &request.infra_id,
                    Some(&name),
                    scope.idempotency_key,
                    &request.resource_tags,
                ))
                .send()
                .await
                .map_err(|error| from_sdk(error).into_failure(true))?;
            created_id(
                created.nat_gateway().and_then(|nat| nat.nat_gateway_id()),
                "CreateNatGateway",
            )
        },
    )
    .await;
    let nat_gateway_id = match nat_gateway_id {
        Ok(id) => id,
        // The address was this activity's own: a NAT gateway that will never be made
        // must not leave it behind (no compensation is registered for a failed create).
        // A retryable failure keeps it for the next attempt, which finds it by tag.
        Err(failure) if !failure.retryable => {
            release_address(aws, scope, &allocation_id).await?;
            return Err(failure);
        }
        Err(failure) => return Err(failure),
    };
    wait_for(aws, &nat_gateway_id, "available", |state| {
        state == Some(&NatGatewayState::Available)
    })
    .await?;
    Ok(NatGateway {
        nat_gateway_id,
        allocation_id,
    })
}

/// Deletes the NAT, waits until it is gone, then releases its address; what is already
/// gone is done.
pub async fn delete_nat_gateway(
    aws: &AwsClients,
    scope: &Scope<'_>,
    nat: &NatGateway,
) -> Result<(), ActivityFailure> {
    // moto answers a delete of an unknown NAT with a 500, so look first.
    let state = nat_state(aws, &nat.nat_gateway_id).await?;
    if !matches!(
        state,
        None | Some(NatGatewayState::Deleted | NatGatewayState::Deleting)
    ) {
        let result = aws
            .ec2
            .delete_nat_gateway()
            .nat_gateway_id(&nat.nat_gateway_id)
            .send()
            .await;
        deleted(scope, NAT_KIND, &nat.nat_gateway_id, result)?;
    }
    wait_for(aws, &nat.nat_gateway_id, "deleted", |state| {
        matches!(state, None | Some(NatGatewayState::Deleted))
    })
    .await?;
    release_address(aws, scope, &nat.allocation_id).await
}

/// Releases an Elastic IP; one already released is done.
async fn release_address(
    aws: &AwsClients,
    scope: &Scope<'_>,
    allocation_id: &str,
) -> Result<(), ActivityFailure> {
    let result = aws
        .ec2
        .release_address()
        .allocation_id(allocation_id)
        .send()
        .await;
    deleted(scope, EIP_KIND, allocation_id, result)
}

/// The NAT's state; `None` when EC2 does not know it.
async fn nat_state(
    aws: &AwsClients,
    nat_gateway_id: &str,
) -> Result<Option<NatGatewayState>, ActivityFailure> {
    let found = aws
        .ec2
        .describe_nat_gateways()
        .nat_gateway_ids(nat_gateway_id)
        .send()
        .await;
    Ok(unless_not_found(found)?.and_then(|found| {
        found
            .nat_gateways()
            .first()
            .and_then(|nat| nat.state().cloned())
    }))
}

/// Polls the NAT until `done` holds for its state, backing off up to 15 s; past
/// [`WAIT`] the attempt fails retryably.
async fn wait_for(
    aws: &AwsClients,
    nat_gateway_id: &str,
    what: &str,
    done: impl Fn(Option<&NatGatewayState>) -> bool,
) -> Result<(), ActivityFailure> {
    let mut poll = Poll::new(WAIT);
    loop {
        let state = nat_state(aws, nat_gateway_id).await?;
        if done(state.as_ref()) {
            return Ok(());
        }
        if state == Some(NatGatewayState::Failed) && what == "available" {
            return Err(ActivityFailure::permanent(
                "NatGatewayFailed",
                format!("NAT gateway {nat_gateway_id} failed to become available"),
            ));
        }
        if !poll.again().await {
            return Err(ActivityFailure::retryable(
                "NatGatewayNotReady",
                format!(
                    "NAT gateway {nat_gateway_id} is not {what} after {WAIT:?} (state {state:?})"
                ),
            ));
        }
    }
}

//! Route tables (hypershift-aws.md §1.2 step 8, §1.3 step 9): one private table per zone
//! whose default route goes to that zone's NAT, and one public table whose default route
//! goes to the internet gateway, each associated with its subnets.

use aws_sdk_ec2::types::{ResourceType, RouteTable as AwsRouteTable};
use hcpflow_engine::ActivityFailure;

use crate::clients::AwsClients;
use crate::ec2::tags;
use crate::error::from_sdk;
use crate::lookup::{created_id, deleted, find_or_create, unless_not_found};
use crate::scope::Scope;

pub use hcpflow_hypershift::aws::network::{CreateRouteTable, DefaultRoute, RouteTable};

pub const KIND: &str = "ec2:route-table";
const DEFAULT_ROUTE: &str = "0.0.0.0/0";

async fn describe(
    aws: &AwsClients,
    route_table_id: &str,
) -> Result<Option<AwsRouteTable>, ActivityFailure> {
    let found = aws
        .ec2
        .describe_route_tables()
        .route_table_ids(route_table_id)
        .send()
        .await;
    Ok(unless_not_found(found)?.and_then(|found| found.route_tables().first().cloned()))
}

/// Creates the table (or finds an earlier attempt's), adds the default route unless it
/// is there, and associates every subnet not associated yet.
pub async fn create_route_table(
    aws: &AwsClients,
    scope: &Scope<'_>,
    request: &CreateRouteTable,
) -> Result<RouteTable, ActivityFailure> {
    let route_table_id = find_or_create(
        scope,
        KIND,
        || async {
            let earlier = aws
                .ec2
                .describe_route_tables()
                .filters(tags::made_by(scope.idempotency_key))
                .send()
                .await
                .map_err(from_sdk)?;
            Ok(earlier
                .route_tables()
                .iter()
                .find_map(|table| table.route_table_id())
                .map(str::to_owned))
        },
        || async {
            let created = aws
                .ec2
                .create_route_table()
                .vpc_id(&request.vpc_id)
                .tag_specifications(tags::specification(
                    ResourceType::RouteTable,
                    &request.infra_id,
                    Some(&request.name),
                    scope.idempotency_key,
                ))
                .send()
                .await
                .map_err(from_sdk)?;
            created_id(
                created
                    .route_table()
                    .and_then(|table| table.route_table_id()),
                "CreateRouteTable",
            )
        },
    )
    .await?;
    let table = describe(aws, &route_table_id).await?.ok_or_else(|| {
        ActivityFailure::retryable(
            "InvalidRouteTableID.NotFound",
            format!("route table {route_table_id} is not visible yet"),
        )
    })?;
    let has_default = table
        .routes()
        .iter()
        .any(|route| route.destination_cidr_block() == Some(DEFAULT_ROUTE));
    if !has_default {
        let mut call = aws
            .ec2
            .create_route()
            .route_table_id(&route_table_id)
            .destination_cidr_block(DEFAULT_ROUTE);
        call = match &request.default_route {
            DefaultRoute::NatGateway(id) => call.nat_gateway_id(id),
            DefaultRoute::InternetGateway(id) => call.gateway_id(id),
        };
        if let Err(error) = call.send().await {
            let error = from_sdk(error);
            if error.code != "RouteAlreadyExists" {
                // The NAT or gateway may not be visible yet right after its create.
                return Err(error.into_failure(true));
            }
        }
    }
    for subnet_id in &request.subnet_ids {
        let associated = table
            .associations()
            .iter()
            .any(|association| association.subnet_id() == Some(subnet_id.as_str()));
        if !associated {
            aws.ec2
                .associate_route_table()
                .route_table_id(&route_table_id)
                .subnet_id(subnet_id)
                .send()
                .await
                .map_err(|error| from_sdk(error).into_failure(true))?;
        }
    }
    Ok(RouteTable { route_table_id })
}

/// Disassociates the table's subnets and deletes it (its routes go with it); gone is
/// done.
pub async fn delete_route_table(
    aws: &AwsClients,
    scope: &Scope<'_>,
    table: &RouteTable,
) -> Result<(), ActivityFailure> {
    let Some(found) = describe(aws, &table.route_table_id).await? else {
        return Ok(());
    };
    for association in found.associations() {
        if association.main() == Some(true) {
            continue;
        }
        let Some(association_id) = association.route_table_association_id() else {
            continue;
        };
        let disassociated = aws
            .ec2
            .disassociate_route_table()
            .association_id(association_id)
            .send()
            .await;
        unless_not_found(disassociated)?;
    }
    let result = aws
        .ec2
        .delete_route_table()
        .route_table_id(&table.route_table_id)
        .send()
        .await;
    deleted(scope, KIND, &table.route_table_id, result)
}

//! Route tables (hypershift-aws.md §1.2 step 8, §1.3 step 9): one private table per zone
//! whose default route goes to that zone's NAT, and one public table whose default route
//! goes to the internet gateway, each associated with its subnets. The public table is
//! also the VPC's main table (cmd/infra/aws/ec2.go `CreatePublicRouteTable`); AWS
//! refuses to delete a main table, so its delete gives the main association back to the
//! table the VPC came with, which goes with the VPC.

use aws_sdk_ec2::types::{Filter, ResourceType, RouteTable as AwsRouteTable};
use hcpflow_engine::ActivityFailure;

use crate::clients::AwsClients;
use crate::ec2::tags;
use crate::error::from_sdk;
use crate::lookup::{created_id, deleted, find_or_create, unless_not_found};
use crate::naming;
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
                    &request.resource_tags,
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
    let former_main_route_table_id = if request.main {
        take_main(aws, &request.vpc_id, &route_table_id).await?
    } else {
        None
    };
    Ok(RouteTable {
        route_table_id,
        former_main_route_table_id,
    })
}

fn holds_main(table: &AwsRouteTable) -> Option<&str> {
    table
        .associations()
        .iter()
        .find(|association| association.main() == Some(true))
        .and_then(|association| association.route_table_association_id())
}

/// Makes `route_table_id` the VPC's main table; returns the table that was main before
/// (on a retry after the switch: the table the VPC came with).
async fn take_main(
    aws: &AwsClients,
    vpc_id: &str,
    route_table_id: &str,
) -> Result<Option<String>, ActivityFailure> {
    let tables = vpc_tables(aws, vpc_id).await?;
    let Some(main) = tables.iter().find(|table| holds_main(table).is_some()) else {
        return Err(ActivityFailure::retryable(
            "NoMainRouteTable",
            format!("VPC {vpc_id} shows no main route table yet"),
        ));
    };
    if main.route_table_id() == Some(route_table_id) {
        return Ok(vpc_default_table(&tables).map(str::to_owned));
    }
    aws.ec2
        .replace_route_table_association()
        .association_id(holds_main(main).unwrap_or_default())
        .route_table_id(route_table_id)
        .send()
        .await
        .map_err(|error| from_sdk(error).into_failure(true))?;
    Ok(main.route_table_id().map(str::to_owned))
}

async fn vpc_tables(aws: &AwsClients, vpc_id: &str) -> Result<Vec<AwsRouteTable>, ActivityFailure> {
    let mut tables = Vec::new();
    let mut pages = aws
        .ec2
        .describe_route_tables()
        .filters(Filter::builder().name("vpc-id").values(vpc_id).build())
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        tables.extend(page.map_err(from_sdk)?.route_tables().iter().cloned());
    }
    Ok(tables)
}

/// The table the VPC was created with: the one no activity tagged.
fn vpc_default_table(tables: &[AwsRouteTable]) -> Option<&str> {
    tables
        .iter()
        .find(|table| {
            !table
                .tags()
                .iter()
                .any(|tag| tag.key() == Some(naming::IDEMPOTENCY_TAG))
        })
        .and_then(|table| table.route_table_id())
}

/// Gives the main association of `table` (if it holds it) to the table that was main
/// before, or to the VPC's own table.
async fn give_main_back(
    aws: &AwsClients,
    table: &RouteTable,
    found: &AwsRouteTable,
) -> Result<(), ActivityFailure> {
    let Some(association_id) = holds_main(found) else {
        return Ok(());
    };
    let vpc_id = found.vpc_id().unwrap_or_default();
    let tables = vpc_tables(aws, vpc_id).await?;
    let recorded = table
        .former_main_route_table_id
        .as_deref()
        .filter(|former| {
            tables
                .iter()
                .any(|other| other.route_table_id() == Some(former))
        });
    let Some(successor) = recorded.or_else(|| vpc_default_table(&tables)) else {
        return Err(ActivityFailure::permanent(
            "MainRouteTable",
            format!(
                "route table {} is the main table of VPC {vpc_id} and no other table can take its place",
                table.route_table_id
            ),
        ));
    };
    aws.ec2
        .replace_route_table_association()
        .association_id(association_id)
        .route_table_id(successor)
        .send()
        .await
        .map_err(|error| from_sdk(error).into_failure(true))?;
    Ok(())
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
    give_main_back(aws, table, &found).await?;
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

//! The VPC's DHCP options, internet gateway and subnets: one each however often their
//! creates run, and compensations that undo them in dependency order.

use hcpflow_aws::ec2::dhcp::{create_dhcp_options, delete_dhcp_options, CreateDhcpOptions};
use hcpflow_aws::ec2::internet_gateway::{
    create_internet_gateway, delete_internet_gateway, CreateInternetGateway,
};
use hcpflow_aws::ec2::subnet::{create_subnet, delete_subnet, CreateSubnet, Exposure};
use hcpflow_aws::ec2::tags;
use hcpflow_aws::ec2::vpc::{create_vpc, delete_vpc, CreateVpc};
use hcpflow_engine::Ledger;

use crate::support::{stack, unique, Stack};

/// What moto holds of the cluster, by its tag: (VPCs, DHCP options, gateways, subnets).
async fn owned(stack: &Stack, infra_id: &str) -> (usize, usize, usize, usize) {
    let ec2 = &stack.moto.ec2;
    let filter = || tags::owned_by(infra_id);
    let vpcs = ec2.describe_vpcs().filters(filter()).send().await.unwrap();
    let dhcp = ec2
        .describe_dhcp_options()
        .filters(filter())
        .send()
        .await
        .unwrap();
    let gateways = ec2
        .describe_internet_gateways()
        .filters(filter())
        .send()
        .await
        .unwrap();
    let subnets = ec2
        .describe_subnets()
        .filters(filter())
        .send()
        .await
        .unwrap();
    (
        vpcs.vpcs().len(),
        dhcp.dhcp_options().len(),
        gateways.internet_gateways().len(),
        subnets.subnets().len(),
    )
}

#[tokio::test]
async fn each_network_create_run_three_times_leaves_one_resource_and_undo_keeps_order() {
    let Some(stack) =
        stack("each_network_create_run_three_times_leaves_one_resource_and_undo_keeps_order").await
    else {
        return;
    };
    let infra_id = unique("net-");
    let log = Ledger::default();
    let keys: Vec<String> = (1..=5).map(|n| format!("hf-{infra_id}-{n}")).collect();
    let scope = |n: usize| stack.scope(&keys[n], &infra_id, &log);

    let vpc_request = CreateVpc {
        infra_id: infra_id.clone(),
        cidr_block: "10.0.0.0/16".into(),
        resource_tags: Default::default(),
    };
    let vpc = create_vpc(&stack.aws, &scope(0), &vpc_request)
        .await
        .unwrap();
    let dhcp_request = CreateDhcpOptions {
        infra_id: infra_id.clone(),
        vpc_id: vpc.vpc_id.clone(),
        resource_tags: Default::default(),
    };
    let igw_request = CreateInternetGateway {
        infra_id: infra_id.clone(),
        vpc_id: vpc.vpc_id.clone(),
        resource_tags: Default::default(),
    };
    let subnet_request = |exposure, cidr: &str| CreateSubnet {
        infra_id: infra_id.clone(),
        vpc_id: vpc.vpc_id.clone(),
        zone: "us-east-1a".into(),
        cidr_block: cidr.into(),
        exposure,
        resource_tags: Default::default(),
    };
    let private = subnet_request(Exposure::Private, "10.0.128.0/20");
    let public = subnet_request(Exposure::Public, "10.0.0.0/20");

    // Three runs each, as after crashes that lost the first results.
    let mut made = Vec::new();
    for _ in 0..3 {
        made.push((
            create_dhcp_options(&stack.aws, &scope(1), &dhcp_request)
                .await
                .unwrap(),
            create_internet_gateway(&stack.aws, &scope(2), &igw_request)
                .await
                .unwrap(),
            create_subnet(&stack.aws, &scope(3), &private)
                .await
                .unwrap(),
            create_subnet(&stack.aws, &scope(4), &public).await.unwrap(),
        ));
    }
    assert!(made.windows(2).all(|pair| pair[0] == pair[1]), "{made:?}");
    assert_eq!(owned(&stack, &infra_id).await, (1, 1, 1, 2));
    let (dhcp, gateway, private, public) = made.remove(0);

    // Associated and attached, once.
    let described = stack
        .moto
        .ec2
        .describe_vpcs()
        .vpc_ids(&vpc.vpc_id)
        .send()
        .await
        .unwrap();
    assert_eq!(
        described.vpcs()[0].dhcp_options_id(),
        Some(dhcp.dhcp_options_id.as_str())
    );
    let gateways = stack
        .moto
        .ec2
        .describe_internet_gateways()
        .internet_gateway_ids(&gateway.internet_gateway_id)
        .send()
        .await
        .unwrap();
    assert_eq!(gateways.internet_gateways()[0].attachments().len(), 1);

    // The compensations, newest first, each run twice.
    let before = stack.actions().len();
    for _ in 0..2 {
        delete_subnet(&stack.aws, &scope(4), &public).await.unwrap();
        delete_subnet(&stack.aws, &scope(3), &private)
            .await
            .unwrap();
    }
    for _ in 0..2 {
        delete_internet_gateway(&stack.aws, &scope(2), &gateway)
            .await
            .unwrap();
    }
    // DHCP options still in use by the VPC: the VPC goes back to the default options,
    // then they are deleted — strict reverse order works.
    for _ in 0..2 {
        delete_dhcp_options(&stack.aws, &scope(1), &dhcp)
            .await
            .unwrap();
    }
    let described = stack
        .moto
        .ec2
        .describe_vpcs()
        .vpc_ids(&vpc.vpc_id)
        .send()
        .await
        .unwrap();
    assert_ne!(
        described.vpcs()[0].dhcp_options_id(),
        Some(dhcp.dhcp_options_id.as_str())
    );
    delete_vpc(&stack.aws, &scope(0), &vpc).await.unwrap();
    assert_eq!(owned(&stack, &infra_id).await, (0, 0, 0, 0));

    // moto does not enforce dependency order: the proxy's log shows ours.
    let mut deletes: Vec<String> = stack.actions()[before..]
        .iter()
        .filter(|action| action.starts_with("Delete") || action.starts_with("Detach"))
        .cloned()
        .collect();
    deletes.dedup(); // repeated runs of one delete count once
    assert_eq!(
        deletes,
        [
            "DeleteSubnet",
            "DetachInternetGateway",
            "DeleteInternetGateway",
            "DetachInternetGateway",
            "DeleteInternetGateway",
            "DeleteDhcpOptions",
            "DeleteVpc",
        ]
    );
}

#[tokio::test]
async fn a_nat_gateway_and_its_address_are_made_once_and_released_after_the_nat_is_gone() {
    use hcpflow_aws::ec2::nat_gateway::{create_nat_gateway, delete_nat_gateway, CreateNatGateway};

    let Some(stack) =
        stack("a_nat_gateway_and_its_address_are_made_once_and_released_after_the_nat_is_gone")
            .await
    else {
        return;
    };
    let infra_id = unique("nat-");
    let log = Ledger::default();
    let keys: Vec<String> = (1..=3).map(|n| format!("hf-{infra_id}-{n}")).collect();
    let scope = |n: usize| stack.scope(&keys[n], &infra_id, &log);
    let vpc = create_vpc(
        &stack.aws,
        &scope(0),
        &CreateVpc {
            infra_id: infra_id.clone(),
            cidr_block: "10.0.0.0/16".into(),
            resource_tags: Default::default(),
        },
    )
    .await
    .unwrap();
    let subnet = create_subnet(
        &stack.aws,
        &scope(1),
        &CreateSubnet {
            infra_id: infra_id.clone(),
            vpc_id: vpc.vpc_id.clone(),
            zone: "us-east-1a".into(),
            cidr_block: "10.0.0.0/20".into(),
            exposure: Exposure::Public,
            resource_tags: Default::default(),
        },
    )
    .await
    .unwrap();
    let request = CreateNatGateway {
        infra_id: infra_id.clone(),
        zone: "us-east-1a".into(),
        subnet_id: subnet.subnet_id.clone(),
        resource_tags: Default::default(),
    };
    let first = create_nat_gateway(&stack.aws, &scope(2), &request)
        .await
        .unwrap();
    for _ in 0..2 {
        assert_eq!(
            create_nat_gateway(&stack.aws, &scope(2), &request)
                .await
                .unwrap(),
            first
        );
    }
    let addresses = stack
        .moto
        .ec2
        .describe_addresses()
        .filters(tags::owned_by(&infra_id))
        .send()
        .await
        .unwrap();
    assert_eq!(addresses.addresses().len(), 1);
    let live_nats = || async {
        let in_subnet = stack
            .moto
            .ec2
            .describe_nat_gateways()
            .filter(
                aws_sdk_ec2::types::Filter::builder()
                    .name("subnet-id")
                    .values(&subnet.subnet_id)
                    .build(),
            )
            .send()
            .await
            .unwrap();
        in_subnet
            .nat_gateways()
            .iter()
            .filter(|nat| nat.state() != Some(&aws_sdk_ec2::types::NatGatewayState::Deleted))
            .count()
    };
    assert_eq!(live_nats().await, 1);

    let before = stack.actions().len();
    delete_nat_gateway(&stack.aws, &scope(2), &first)
        .await
        .unwrap();
    delete_nat_gateway(&stack.aws, &scope(2), &first)
        .await
        .unwrap();
    assert_eq!(live_nats().await, 0);
    let addresses = stack
        .moto
        .ec2
        .describe_addresses()
        .filters(tags::owned_by(&infra_id))
        .send()
        .await
        .unwrap();
    assert!(addresses.addresses().is_empty());
    // The NAT is deleted, and seen gone, before its address is released.
    let order: Vec<String> = stack.actions()[before..].to_vec();
    let delete = order.iter().position(|a| a == "DeleteNatGateway").unwrap();
    let release = order.iter().position(|a| a == "ReleaseAddress").unwrap();
    assert!(delete < release, "{order:?}");
    assert!(order[delete..release]
        .iter()
        .any(|a| a == "DescribeNatGateways"));
    assert_eq!(
        order.iter().filter(|a| *a == "DeleteNatGateway").count(),
        1,
        "{order:?}"
    );

    delete_subnet(&stack.aws, &scope(1), &subnet).await.unwrap();
    delete_vpc(&stack.aws, &scope(0), &vpc).await.unwrap();
}

#[tokio::test]
async fn a_zone_network_with_routes_and_the_s3_endpoint_is_made_once_and_undone_in_order() {
    use hcpflow_aws::ec2::nat_gateway::{create_nat_gateway, delete_nat_gateway, CreateNatGateway};
    use hcpflow_aws::ec2::route_table::{
        create_route_table, delete_route_table, CreateRouteTable, DefaultRoute,
    };
    use hcpflow_aws::ec2::s3_endpoint::{create_s3_endpoint, delete_s3_endpoint, CreateS3Endpoint};
    use hcpflow_aws::naming;
    use hcpflow_aws::resource_tags::ResourceTags;

    let Some(stack) =
        stack("a_zone_network_with_routes_and_the_s3_endpoint_is_made_once_and_undone_in_order")
            .await
    else {
        return;
    };
    let infra_id = unique("rt-");
    let zone = "us-east-1b";
    let log = Ledger::default();
    let keys: Vec<String> = (1..=8).map(|n| format!("hf-{infra_id}-{n}")).collect();
    let scope = |n: usize| stack.scope(&keys[n], &infra_id, &log);
    let aws = &stack.aws;

    let vpc = create_vpc(
        aws,
        &scope(0),
        &CreateVpc {
            infra_id: infra_id.clone(),
            cidr_block: "10.0.0.0/16".into(),
            resource_tags: Default::default(),
        },
    )
    .await
    .unwrap();
    let gateway = create_internet_gateway(
        aws,
        &scope(1),
        &CreateInternetGateway {
            infra_id: infra_id.clone(),
            vpc_id: vpc.vpc_id.clone(),
            resource_tags: Default::default(),
        },
    )
    .await
    .unwrap();
    let subnet = |exposure, cidr: &str| CreateSubnet {
        infra_id: infra_id.clone(),
        vpc_id: vpc.vpc_id.clone(),
        zone: zone.into(),
        cidr_block: cidr.into(),
        exposure,
        resource_tags: Default::default(),
    };
    let private = create_subnet(aws, &scope(2), &subnet(Exposure::Private, "10.0.144.0/20"))
        .await
        .unwrap();
    let public = create_subnet(aws, &scope(3), &subnet(Exposure::Public, "10.0.16.0/20"))
        .await
        .unwrap();
    let nat = create_nat_gateway(
        aws,
        &scope(4),
        &CreateNatGateway {
            infra_id: infra_id.clone(),
            zone: zone.into(),
            subnet_id: public.subnet_id.clone(),
            resource_tags: Default::default(),
        },
    )
    .await
    .unwrap();
    let private_table = CreateRouteTable {
        infra_id: infra_id.clone(),
        vpc_id: vpc.vpc_id.clone(),
        name: naming::private_route_table(&infra_id, zone),
        default_route: DefaultRoute::NatGateway(nat.nat_gateway_id.clone()),
        subnet_ids: vec![private.subnet_id.clone()],
        main: false,
        resource_tags: Default::default(),
    };
    let public_table = CreateRouteTable {
        infra_id: infra_id.clone(),
        vpc_id: vpc.vpc_id.clone(),
        name: naming::public_route_table(&infra_id),
        default_route: DefaultRoute::InternetGateway(gateway.internet_gateway_id.clone()),
        subnet_ids: vec![public.subnet_id.clone()],
        main: true,
        resource_tags: ResourceTags([("team".to_owned(), "platform".to_owned())].into()),
    };
    let vpc_tables = || async {
        stack
            .moto
            .ec2
            .describe_route_tables()
            .filters(
                aws_sdk_ec2::types::Filter::builder()
                    .name("vpc-id")
                    .values(&vpc.vpc_id)
                    .build(),
            )
            .send()
            .await
            .unwrap()
            .route_tables()
            .to_vec()
    };
    let main_of_vpc = || async {
        vpc_tables()
            .await
            .into_iter()
            .find(|t| t.associations().iter().any(|a| a.main() == Some(true)))
            .and_then(|t| t.route_table_id().map(str::to_owned))
    };
    let vpc_own_table = main_of_vpc().await.unwrap();
    let mut tables = Vec::new();
    let mut endpoints = Vec::new();
    for _ in 0..2 {
        let private_rt = create_route_table(aws, &scope(5), &private_table)
            .await
            .unwrap();
        let public_rt = create_route_table(aws, &scope(6), &public_table)
            .await
            .unwrap();
        let endpoint = create_s3_endpoint(
            aws,
            &scope(7),
            &CreateS3Endpoint {
                infra_id: infra_id.clone(),
                vpc_id: vpc.vpc_id.clone(),
                route_table_ids: vec![
                    private_rt.route_table_id.clone(),
                    public_rt.route_table_id.clone(),
                ],
                resource_tags: Default::default(),
            },
        )
        .await
        .unwrap();
        tables.push((private_rt, public_rt));
        endpoints.push(endpoint);
    }
    assert_eq!(tables[0], tables[1]);
    assert_eq!(endpoints[0], endpoints[1]);
    let (private_rt, public_rt) = tables.remove(0);
    // The public table is the VPC's main one (as `hypershift create infra aws` makes
    // it), and remembers the table the VPC came with; it carries the user's tag.
    assert_eq!(main_of_vpc().await, Some(public_rt.route_table_id.clone()));
    assert_eq!(
        public_rt.former_main_route_table_id.as_deref(),
        Some(vpc_own_table.as_str())
    );
    assert_eq!(private_rt.former_main_route_table_id, None);
    let public_tags: Vec<(String, String)> = vpc_tables()
        .await
        .into_iter()
        .find(|t| t.route_table_id() == Some(public_rt.route_table_id.as_str()))
        .unwrap()
        .tags()
        .iter()
        .map(|t| (t.key().unwrap().to_owned(), t.value().unwrap().to_owned()))
        .collect();
    assert!(public_tags.contains(&("team".into(), "platform".into())));
    let endpoint = endpoints.remove(0);

    // Independently: two tables, each with one default route and its subnet.
    let described = stack
        .moto
        .ec2
        .describe_route_tables()
        .filters(tags::owned_by(&infra_id))
        .send()
        .await
        .unwrap();
    assert_eq!(described.route_tables().len(), 2);
    for table in described.route_tables() {
        let defaults = table
            .routes()
            .iter()
            .filter(|r| r.destination_cidr_block() == Some("0.0.0.0/0"))
            .count();
        assert_eq!(defaults, 1, "{table:?}");
        let expected = if table.route_table_id() == Some(private_rt.route_table_id.as_str()) {
            &private.subnet_id
        } else {
            &public.subnet_id
        };
        let subnets: Vec<_> = table
            .associations()
            .iter()
            .filter_map(|a| a.subnet_id())
            .collect();
        assert_eq!(subnets, vec![expected.as_str()]);
    }
    let live_endpoints = || async {
        stack
            .moto
            .ec2
            .describe_vpc_endpoints()
            .filters(tags::owned_by(&infra_id))
            .send()
            .await
            .unwrap()
            .vpc_endpoints()
            .iter()
            .filter(|e| {
                let state = e.state().map(|s| s.as_str().to_ascii_lowercase());
                !matches!(state.as_deref(), Some("deleted" | "deleting"))
            })
            .count()
    };
    assert_eq!(live_endpoints().await, 1);

    // The compensations, newest first, each run twice.
    let before = stack.actions().len();
    for _ in 0..2 {
        delete_s3_endpoint(aws, &scope(7), &endpoint).await.unwrap();
    }
    for _ in 0..2 {
        delete_route_table(aws, &scope(6), &public_rt)
            .await
            .unwrap();
        delete_route_table(aws, &scope(5), &private_rt)
            .await
            .unwrap();
    }
    for _ in 0..2 {
        delete_nat_gateway(aws, &scope(4), &nat).await.unwrap();
    }
    for _ in 0..2 {
        delete_subnet(aws, &scope(3), &public).await.unwrap();
        delete_subnet(aws, &scope(2), &private).await.unwrap();
    }
    delete_internet_gateway(aws, &scope(1), &gateway)
        .await
        .unwrap();
    // AWS (and the stack's proxy) refuse to delete a main table: the delete gave the
    // main association back, so the VPC goes with only its own table left.
    assert_eq!(main_of_vpc().await, Some(vpc_own_table.clone()));
    delete_vpc(aws, &scope(0), &vpc).await.unwrap();

    assert_eq!(live_endpoints().await, 0);
    assert_eq!(owned(&stack, &infra_id).await, (0, 0, 0, 0));
    let tables_left = stack
        .moto
        .ec2
        .describe_route_tables()
        .filters(tags::owned_by(&infra_id))
        .send()
        .await
        .unwrap();
    assert!(tables_left.route_tables().is_empty());
    let mut deletes: Vec<String> = stack.actions()[before..]
        .iter()
        .filter(|a| a.starts_with("Delete") || a.starts_with("Detach") || a.starts_with("Release"))
        .cloned()
        .collect();
    deletes.dedup();
    assert_eq!(
        deletes,
        [
            "DeleteVpcEndpoints",
            "DeleteRouteTable",
            "DeleteNatGateway",
            "ReleaseAddress",
            "DeleteSubnet",
            "DetachInternetGateway",
            "DeleteInternetGateway",
            "DeleteVpc",
        ]
    );
}

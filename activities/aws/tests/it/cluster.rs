//! A whole cluster's AWS side in three zones, created twice over (as after crashes that
//! lost every result), checked on moto directly, then undone by its compensations in
//! reverse order — after which the tag sweep finds nothing of the infra id.

use hcpflow_aws::ec2::dhcp::{create_dhcp_options, delete_dhcp_options, CreateDhcpOptions};
use hcpflow_aws::ec2::internet_gateway::{
    create_internet_gateway, delete_internet_gateway, CreateInternetGateway,
};
use hcpflow_aws::ec2::nat_gateway::{create_nat_gateway, delete_nat_gateway, CreateNatGateway};
use hcpflow_aws::ec2::route_table::{
    create_route_table, delete_route_table, CreateRouteTable, DefaultRoute,
};
use hcpflow_aws::ec2::s3_endpoint::{create_s3_endpoint, delete_s3_endpoint, CreateS3Endpoint};
use hcpflow_aws::ec2::subnet::{create_subnet, delete_subnet, CreateSubnet, Exposure};
use hcpflow_aws::ec2::vpc::{create_vpc, delete_vpc, CreateVpc};
use hcpflow_aws::iam::oidc_provider::{
    create_oidc_provider, delete_oidc_provider, CreateOidcProvider,
};
use hcpflow_aws::iam::operator_role::{create_operator_role, CreateOperatorRole};
use hcpflow_aws::iam::role::delete_role;
use hcpflow_aws::iam::worker::{create_worker_profile, delete_worker_profile, CreateWorkerProfile};
use hcpflow_aws::oidc::documents::{
    delete_oidc_documents, publish_oidc_documents, PublishOidcDocuments,
};
use hcpflow_aws::oidc::signing_key::generate_signing_key;
use hcpflow_aws::privatelink::endpoint_service::{
    create_endpoint_service, delete_endpoint_service, CreateEndpointService,
};
use hcpflow_aws::privatelink::interface_endpoint::{
    create_interface_endpoint, delete_interface_endpoint, wait_endpoint_zone,
    CreateInterfaceEndpoint, WaitEndpointZone,
};
use hcpflow_aws::privatelink::load_balancer::{
    create_load_balancer, delete_load_balancer, CreateLoadBalancer,
};
use hcpflow_aws::privatelink::security_group::{
    create_endpoint_security_group, delete_security_group, CreateEndpointSecurityGroup,
};
use hcpflow_aws::privatelink::zone_offer::{check_zone_offer, CheckZoneOffer};
use hcpflow_aws::roles::OPERATOR_ROLES;
use hcpflow_aws::route53::records::{delete_cname, upsert_cname, Cname};
use hcpflow_aws::route53::zone::{create_private_zone, delete_zone, CreatePrivateZone};
use hcpflow_aws::sweep::{find_leftovers, FindLeftovers};
use hcpflow_aws::{naming, network_plan};
use hcpflow_engine::Ledger;

use crate::oidc_iam::{keyring, make_bucket};
use crate::support::{stack, unique, Stack};

const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];

/// The management VPC and a subnet in each of `zones`: a prerequisite, made outside.
async fn management_vpc(stack: &Stack, zones: &[&str]) -> (String, Vec<String>) {
    let ec2 = &stack.moto.ec2;
    let vpc = ec2
        .create_vpc()
        .cidr_block("10.200.0.0/16")
        .send()
        .await
        .unwrap();
    let vpc_id = vpc.vpc().unwrap().vpc_id().unwrap().to_owned();
    let mut subnets = Vec::new();
    for (index, zone) in zones.iter().enumerate() {
        let subnet = ec2
            .create_subnet()
            .vpc_id(&vpc_id)
            .availability_zone(*zone)
            .cidr_block(format!("10.200.{}.0/24", index))
            .send()
            .await
            .unwrap();
        subnets.push(subnet.subnet().unwrap().subnet_id().unwrap().to_owned());
    }
    (vpc_id, subnets)
}

async fn drop_management_vpc(stack: &Stack, vpc_id: &str, subnets: &[String]) {
    for subnet in subnets {
        stack
            .moto
            .ec2
            .delete_subnet()
            .subnet_id(subnet)
            .send()
            .await
            .unwrap();
    }
    stack
        .moto
        .ec2
        .delete_vpc()
        .vpc_id(vpc_id)
        .send()
        .await
        .unwrap();
}

/// What create made, kept for its compensations.
#[derive(Debug, PartialEq)]
struct Made {
    vpc: hcpflow_aws::ec2::vpc::Vpc,
    dhcp: hcpflow_aws::ec2::dhcp::DhcpOptions,
    igw: hcpflow_aws::ec2::internet_gateway::InternetGateway,
    private_subnets: Vec<hcpflow_aws::ec2::subnet::Subnet>,
    public_subnets: Vec<hcpflow_aws::ec2::subnet::Subnet>,
    nats: Vec<hcpflow_aws::ec2::nat_gateway::NatGateway>,
    private_tables: Vec<hcpflow_aws::ec2::route_table::RouteTable>,
    public_table: hcpflow_aws::ec2::route_table::RouteTable,
    s3_endpoint: hcpflow_aws::ec2::s3_endpoint::S3Endpoint,
    private_zone: hcpflow_aws::route53::zone::HostedZone,
    local_zone: hcpflow_aws::route53::zone::HostedZone,
    documents: hcpflow_aws::oidc::documents::OidcDocuments,
    provider: hcpflow_aws::iam::oidc_provider::OidcProvider,
    roles: Vec<hcpflow_aws::iam::role::Role>,
    worker: hcpflow_aws::iam::worker::WorkerProfile,
    load_balancer: hcpflow_aws::privatelink::load_balancer::LoadBalancer,
    service: hcpflow_aws::privatelink::endpoint_service::EndpointService,
    security_group: hcpflow_aws::privatelink::security_group::SecurityGroup,
    endpoint: hcpflow_aws::privatelink::interface_endpoint::InterfaceEndpoint,
    interfaces: Vec<String>,
    records: Vec<Cname>,
}

struct Cluster<'a> {
    stack: &'a Stack,
    infra_id: String,
    keys: Vec<String>,
    log: &'a Ledger,
    bucket: String,
    public_zone_id: String,
    management: (String, Vec<String>),
    jwk: hcpflow_aws::oidc::signing_key::Jwk,
}

impl Cluster<'_> {
    fn scope(&self, step: usize) -> hcpflow_aws::Scope<'_> {
        self.stack.scope(&self.keys[step], &self.infra_id, self.log)
    }

    /// Every create, in the workflow's order; each activity has its own key.
    async fn create(&self) -> Made {
        let aws = &self.stack.aws;
        let id = self.infra_id.clone();
        let plan = network_plan::plan("10.0.0.0/16", &ZONES.map(String::from)).unwrap();
        let vpc = create_vpc(
            aws,
            &self.scope(0),
            &CreateVpc {
                infra_id: id.clone(),
                cidr_block: "10.0.0.0/16".into(),
                resource_tags: Default::default(),
            },
        )
        .await
        .unwrap();
        let vpc_id = vpc.vpc_id.clone();
        let dhcp = create_dhcp_options(
            aws,
            &self.scope(1),
            &CreateDhcpOptions {
                infra_id: id.clone(),
                vpc_id: vpc_id.clone(),
                resource_tags: Default::default(),
            },
        )
        .await
        .unwrap();
        let igw = create_internet_gateway(
            aws,
            &self.scope(2),
            &CreateInternetGateway {
                infra_id: id.clone(),
                vpc_id: vpc_id.clone(),
                resource_tags: Default::default(),
            },
        )
        .await
        .unwrap();
        let (mut private_subnets, mut public_subnets, mut nats, mut private_tables) =
            (vec![], vec![], vec![], vec![]);
        for (index, zone) in plan.iter().enumerate() {
            let step = 10 + index * 4;
            let subnet = |exposure, cidr: &str| CreateSubnet {
                infra_id: id.clone(),
                vpc_id: vpc_id.clone(),
                zone: zone.zone.clone(),
                cidr_block: cidr.into(),
                exposure,
                resource_tags: Default::default(),
            };
            let private = create_subnet(
                aws,
                &self.scope(step),
                &subnet(Exposure::Private, &zone.private_cidr),
            )
            .await
            .unwrap();
            let public = create_subnet(
                aws,
                &self.scope(step + 1),
                &subnet(Exposure::Public, &zone.public_cidr),
            )
            .await
            .unwrap();
            let nat = create_nat_gateway(
                aws,
                &self.scope(step + 2),
                &CreateNatGateway {
                    infra_id: id.clone(),
                    zone: zone.zone.clone(),
                    subnet_id: public.subnet_id.clone(),
                    resource_tags: Default::default(),
                },
            )
            .await
            .unwrap();
            let table = create_route_table(
                aws,
                &self.scope(step + 3),
                &CreateRouteTable {
                    infra_id: id.clone(),
                    vpc_id: vpc_id.clone(),
                    name: naming::private_route_table(&id, &zone.zone),
                    default_route: DefaultRoute::NatGateway(nat.nat_gateway_id.clone()),
                    subnet_ids: vec![private.subnet_id.clone()],
                    main: false,
                    resource_tags: Default::default(),
                },
            )
            .await
            .unwrap();
            private_subnets.push(private);
            public_subnets.push(public);
            nats.push(nat);
            private_tables.push(table);
        }
        let public_table = create_route_table(
            aws,
            &self.scope(3),
            &CreateRouteTable {
                infra_id: id.clone(),
                vpc_id: vpc_id.clone(),
                name: naming::public_route_table(&id),
                default_route: DefaultRoute::InternetGateway(igw.internet_gateway_id.clone()),
                subnet_ids: public_subnets.iter().map(|s| s.subnet_id.clone()).collect(),
                main: false,
                resource_tags: Default::default(),
            },
        )
        .await
        .unwrap();
        let s3_endpoint = create_s3_endpoint(
            aws,
            &self.scope(4),
            &CreateS3Endpoint {
                infra_id: id.clone(),
                vpc_id: vpc_id.clone(),
                route_table_ids: private_tables
                    .iter()
                    .chain([&public_table])
                    .map(|t| t.route_table_id.clone())
                    .collect(),
                resource_tags: Default::default(),
            },
        )
        .await
        .unwrap();
        let zone = |name: String| CreatePrivateZone {
            infra_id: id.clone(),
            name,
            vpc_id: vpc_id.clone(),
            resource_tags: Default::default(),
        };
        let private_zone = create_private_zone(
            aws,
            &self.scope(5),
            &zone(naming::private_zone(&id, "example.com")),
        )
        .await
        .unwrap();
        let local_zone = create_private_zone(aws, &self.scope(6), &zone(naming::local_zone(&id)))
            .await
            .unwrap();

        let documents = publish_oidc_documents(
            aws,
            &self.scope(7),
            &PublishOidcDocuments {
                infra_id: id.clone(),
                bucket: self.bucket.clone(),
                bucket_region: "us-east-1".into(),
                jwk: self.jwk.clone(),
            },
        )
        .await
        .unwrap();
        let provider = create_oidc_provider(
            aws,
            &self.scope(8),
            &CreateOidcProvider {
                infra_id: id.clone(),
                issuer_url: documents.issuer_url.clone(),
                resource_tags: Default::default(),
            },
        )
        .await
        .unwrap();
        let mut roles = Vec::new();
        for (index, role) in OPERATOR_ROLES.iter().enumerate() {
            roles.push(
                create_operator_role(
                    aws,
                    &self.scope(30 + index),
                    &CreateOperatorRole {
                        infra_id: id.clone(),
                        role: role.suffix.into(),
                        provider_arn: provider.arn.clone(),
                        issuer: provider.issuer.clone(),
                        public_zone_id: self.public_zone_id.clone(),
                        private_zone_id: private_zone.zone_id.clone(),
                        local_zone_id: local_zone.zone_id.clone(),
                        resource_tags: Default::default(),
                    },
                )
                .await
                .unwrap(),
            );
        }
        let worker = create_worker_profile(
            aws,
            &self.scope(9),
            &CreateWorkerProfile {
                infra_id: id.clone(),
                resource_tags: Default::default(),
            },
        )
        .await
        .unwrap();

        let load_balancer = create_load_balancer(
            aws,
            &self.scope(40),
            &CreateLoadBalancer {
                infra_id: id.clone(),
                vpc_id: self.management.0.clone(),
                subnet_ids: self.management.1.clone(),
            },
        )
        .await
        .unwrap();
        let cpo = roles
            .iter()
            .find(|r| r.name.ends_with("-control-plane-operator"))
            .unwrap();
        let service = create_endpoint_service(
            aws,
            &self.scope(41),
            &CreateEndpointService {
                infra_id: id.clone(),
                load_balancer_arn: load_balancer.load_balancer_arn.clone(),
                allowed_principal: cpo.arn.clone(),
            },
        )
        .await
        .unwrap();
        let security_group = create_endpoint_security_group(
            aws,
            &self.scope(42),
            &CreateEndpointSecurityGroup {
                infra_id: id.clone(),
                vpc_id: vpc_id.clone(),
                machine_cidr: "10.0.0.0/16".into(),
            },
        )
        .await
        .unwrap();
        let candidates: Vec<String> = private_subnets
            .iter()
            .map(|s| s.subnet_id.clone())
            .collect();
        // Per zone, fanned out.
        let checks: Vec<CheckZoneOffer> = ZONES
            .iter()
            .map(|zone| CheckZoneOffer {
                service_name: service.service_name.clone(),
                zone: (*zone).into(),
                subnet_ids: candidates.clone(),
            })
            .collect();
        let offers =
            futures::future::try_join_all(checks.iter().map(|check| check_zone_offer(aws, check)))
                .await
                .unwrap();
        let endpoint = create_interface_endpoint(
            aws,
            &self.scope(43),
            &CreateInterfaceEndpoint {
                infra_id: id.clone(),
                vpc_id: vpc_id.clone(),
                service_name: service.service_name.clone(),
                security_group_id: security_group.group_id.clone(),
                subnet_ids: offers.iter().map(|o| o.subnet_id.clone()).collect(),
            },
        )
        .await
        .unwrap();
        let waits: Vec<WaitEndpointZone> = offers
            .iter()
            .map(|offer| WaitEndpointZone {
                vpc_endpoint_id: endpoint.vpc_endpoint_id.clone(),
                zone: offer.zone.clone(),
                subnet_id: offer.subnet_id.clone(),
            })
            .collect();
        let ready =
            futures::future::try_join_all(waits.iter().map(|wait| wait_endpoint_zone(aws, wait)))
                .await
                .unwrap();
        let mut records = Vec::new();
        for (index, name) in [
            format!("api.{}", local_zone.name),
            format!("*.apps.{}", local_zone.name),
        ]
        .into_iter()
        .enumerate()
        {
            records.push(
                upsert_cname(
                    aws,
                    &self.scope(44 + index),
                    &Cname {
                        zone_id: local_zone.zone_id.clone(),
                        name,
                        target: endpoint.dns_name.clone(),
                    },
                )
                .await
                .unwrap(),
            );
        }
        Made {
            vpc,
            dhcp,
            igw,
            private_subnets,
            public_subnets,
            nats,
            private_tables,
            public_table,
            s3_endpoint,
            private_zone,
            local_zone,
            documents,
            provider,
            roles,
            worker,
            load_balancer,
            service,
            security_group,
            endpoint,
            interfaces: ready.into_iter().map(|r| r.network_interface_id).collect(),
            records,
        }
    }

    /// The compensations, newest first.
    async fn undo(&self, made: &Made) {
        let aws = &self.stack.aws;
        for (index, record) in made.records.iter().enumerate().rev() {
            delete_cname(aws, &self.scope(44 + index), record)
                .await
                .unwrap();
        }
        delete_interface_endpoint(aws, &self.scope(43), &made.endpoint)
            .await
            .unwrap();
        delete_security_group(aws, &self.scope(42), &made.security_group)
            .await
            .unwrap();
        delete_endpoint_service(aws, &self.scope(41), &made.service)
            .await
            .unwrap();
        delete_load_balancer(aws, &self.scope(40), &made.load_balancer)
            .await
            .unwrap();
        delete_worker_profile(aws, &self.scope(9), &made.worker)
            .await
            .unwrap();
        for (index, role) in made.roles.iter().enumerate().rev() {
            delete_role(aws, &self.scope(30 + index), role)
                .await
                .unwrap();
        }
        delete_oidc_provider(aws, &self.scope(8), &made.provider)
            .await
            .unwrap();
        delete_oidc_documents(aws, &self.scope(7), &made.documents)
            .await
            .unwrap();
        delete_zone(aws, &self.scope(6), &made.local_zone)
            .await
            .unwrap();
        delete_zone(aws, &self.scope(5), &made.private_zone)
            .await
            .unwrap();
        delete_s3_endpoint(aws, &self.scope(4), &made.s3_endpoint)
            .await
            .unwrap();
        delete_route_table(aws, &self.scope(3), &made.public_table)
            .await
            .unwrap();
        for index in (0..ZONES.len()).rev() {
            let step = 10 + index * 4;
            delete_route_table(aws, &self.scope(step + 3), &made.private_tables[index])
                .await
                .unwrap();
            delete_nat_gateway(aws, &self.scope(step + 2), &made.nats[index])
                .await
                .unwrap();
            delete_subnet(aws, &self.scope(step + 1), &made.public_subnets[index])
                .await
                .unwrap();
            delete_subnet(aws, &self.scope(step), &made.private_subnets[index])
                .await
                .unwrap();
        }
        delete_internet_gateway(aws, &self.scope(2), &made.igw)
            .await
            .unwrap();
        delete_vpc(aws, &self.scope(0), &made.vpc).await.unwrap();
        delete_dhcp_options(aws, &self.scope(1), &made.dhcp)
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn a_three_zone_cluster_is_made_once_and_its_compensations_leave_nothing() {
    let Some(stack) =
        stack("a_three_zone_cluster_is_made_once_and_its_compensations_leave_nothing").await
    else {
        return;
    };
    let infra_id = unique("c3-");
    let log = Ledger::default();
    let bucket = make_bucket(&stack).await;
    let cluster = Cluster {
        stack: &stack,
        keys: (0..50).map(|n| format!("hf-{infra_id}-{n}")).collect(),
        infra_id: infra_id.clone(),
        log: &log,
        bucket: bucket.clone(),
        public_zone_id: "Z0PUBLICEXAMPLE".into(),
        management: management_vpc(&stack, &ZONES).await,
        jwk: generate_signing_key(&keyring(), &stack.workflow_id)
            .unwrap()
            .jwk,
    };
    let made = cluster.create().await;
    assert_eq!(
        cluster.create().await,
        made,
        "a second run of every create changed something"
    );

    // Independently, on moto.
    let ec2 = &stack.moto.ec2;
    let owned = || hcpflow_aws::ec2::tags::owned_by(&infra_id);
    let in_vpc = || {
        aws_sdk_ec2::types::Filter::builder()
            .name("vpc-id")
            .values(&made.vpc.vpc_id)
            .build()
    };
    assert_eq!(
        ec2.describe_vpcs()
            .filters(owned())
            .send()
            .await
            .unwrap()
            .vpcs()
            .len(),
        1
    );
    let subnets = ec2
        .describe_subnets()
        .filters(in_vpc())
        .send()
        .await
        .unwrap();
    assert_eq!(subnets.subnets().len(), 6);
    let nats = ec2
        .describe_nat_gateways()
        .filter(in_vpc())
        .send()
        .await
        .unwrap();
    let live = nats
        .nat_gateways()
        .iter()
        .filter(|n| n.state() == Some(&aws_sdk_ec2::types::NatGatewayState::Available))
        .count();
    assert_eq!(live, 3);
    assert_eq!(
        ec2.describe_addresses()
            .filters(owned())
            .send()
            .await
            .unwrap()
            .addresses()
            .len(),
        3
    );
    let endpoints = ec2
        .describe_vpc_endpoints()
        .filters(in_vpc())
        .send()
        .await
        .unwrap();
    assert_eq!(
        endpoints.vpc_endpoints().len(),
        2,
        "the S3 gateway and the interface endpoint"
    );
    let interfaces = ec2
        .describe_network_interfaces()
        .set_network_interface_ids(Some(made.interfaces.clone()))
        .send()
        .await
        .unwrap();
    let mut zones: Vec<&str> = interfaces
        .network_interfaces()
        .iter()
        .filter_map(|n| n.availability_zone())
        .collect();
    zones.sort_unstable();
    assert_eq!(zones, ZONES, "one endpoint interface in each zone");
    let roles = stack.moto.iam.list_roles().send().await.unwrap();
    let ours = roles
        .roles()
        .iter()
        .filter(|r| r.role_name().starts_with(&format!("{infra_id}-")))
        .count();
    assert_eq!(ours, 8, "seven operator roles and the worker role");
    for name in [
        naming::private_zone(&infra_id, "example.com"),
        naming::local_zone(&infra_id),
    ] {
        let listed = stack
            .moto
            .route53
            .list_hosted_zones_by_name()
            .dns_name(&name)
            .send()
            .await
            .unwrap();
        let count = listed
            .hosted_zones()
            .iter()
            .filter(|z| hcpflow_aws::route53::same_name(z.name(), &name))
            .count();
        assert_eq!(count, 1, "{name}");
    }
    let permissions = ec2
        .describe_vpc_endpoint_service_permissions()
        .service_id(&made.service.service_id)
        .send()
        .await
        .unwrap();
    let cpo = made
        .roles
        .iter()
        .find(|r| r.name.ends_with("-control-plane-operator"))
        .unwrap();
    assert_eq!(
        permissions.allowed_principals()[0].principal(),
        Some(cpo.arn.as_str())
    );

    let sweep = FindLeftovers {
        infra_id: infra_id.clone(),
        oidc_bucket: Some(bucket.clone()),
    };
    let before = find_leftovers(&stack.aws, &stack.aws, &sweep)
        .await
        .unwrap();
    let mut kinds: Vec<&str> = before.iter().map(|l| l.kind.as_str()).collect();
    kinds.dedup();
    for kind in [
        "ec2:vpc",
        "ec2:subnet",
        "ec2:nat-gateway",
        "ec2:elastic-ip",
        "ec2:route-table",
        "ec2:internet-gateway",
        "ec2:dhcp-options",
        "ec2:vpc-endpoint",
        "ec2:security-group",
        "ec2:vpc-endpoint-service",
        "elbv2:load-balancer",
        "elbv2:target-group",
        "iam:role",
        "iam:instance-profile",
        "iam:oidc-provider",
        "route53:hosted-zone",
        "s3:object",
    ] {
        assert!(kinds.contains(&kind), "the sweep missed {kind}: {before:?}");
    }

    let before_undo = stack.actions().len();
    cluster.undo(&made).await;
    // moto does not enforce dependencies on delete: the proxy's log shows our order.
    let actions = stack.actions()[before_undo..].to_vec();
    let first = |action: &str| {
        actions
            .iter()
            .position(|a| a == action)
            .unwrap_or_else(|| panic!("no {action} in {actions:?}"))
    };
    let last = |action: &str| actions.iter().rposition(|a| a == action).unwrap();
    for (earlier, later) in [
        ("ChangeResourceRecordSets", "DeleteVpcEndpoints"),
        ("DeleteVpcEndpoints", "DeleteSecurityGroup"),
        (
            "DeleteVpcEndpointServiceConfigurations",
            "DeleteLoadBalancer",
        ),
        ("DeleteListener", "DeleteTargetGroup"),
        ("RemoveRoleFromInstanceProfile", "DeleteInstanceProfile"),
        ("DeleteRolePolicy", "DeleteRole"),
        ("DeleteRole", "DeleteOpenIDConnectProvider"),
        ("DeleteHostedZone", "DeleteVpc"),
        ("DeleteNatGateway", "ReleaseAddress"),
        ("DeleteSubnet", "DeleteVpc"),
        ("DeleteVpc", "DeleteDhcpOptions"),
    ] {
        assert!(
            first(earlier) < first(later),
            "{earlier} after {later}: {actions:?}"
        );
    }
    assert!(
        last("DeleteRole") < first("DeleteOpenIDConnectProvider"),
        "the provider goes last among IAM objects"
    );
    // Twice: every compensation may run again after a crash.
    cluster.undo(&made).await;
    let after = find_leftovers(&stack.aws, &stack.aws, &sweep)
        .await
        .unwrap();
    assert!(after.is_empty(), "left behind: {after:?}");
    drop_management_vpc(&stack, &cluster.management.0, &cluster.management.1).await;
}

#[tokio::test]
async fn an_endpoint_service_not_offered_in_a_zone_is_a_permanent_failure_naming_the_zone() {
    let Some(stack) =
        stack("an_endpoint_service_not_offered_in_a_zone_is_a_permanent_failure_naming_the_zone")
            .await
    else {
        return;
    };
    let infra_id = unique("az-");
    let log = Ledger::default();
    let key = format!("hf-{infra_id}-1");
    let scope = stack.scope(&key, &infra_id, &log);
    // The management cluster has no subnet in us-east-1c.
    let (vpc_id, subnets) = management_vpc(&stack, &ZONES[..2]).await;
    let lb = create_load_balancer(
        &stack.aws,
        &scope,
        &CreateLoadBalancer {
            infra_id: infra_id.clone(),
            vpc_id: vpc_id.clone(),
            subnet_ids: subnets.clone(),
        },
    )
    .await
    .unwrap();
    let key2 = format!("hf-{infra_id}-2");
    let scope2 = stack.scope(&key2, &infra_id, &log);
    let service = create_endpoint_service(
        &stack.aws,
        &scope2,
        &CreateEndpointService {
            infra_id: infra_id.clone(),
            load_balancer_arn: lb.load_balancer_arn.clone(),
            allowed_principal: "arn:aws:iam::123456789012:role/x".into(),
        },
    )
    .await
    .unwrap();
    let check = |zone: &str| CheckZoneOffer {
        service_name: service.service_name.clone(),
        zone: zone.into(),
        subnet_ids: subnets.clone(),
    };
    let offered = check_zone_offer(&stack.aws, &check("us-east-1a"))
        .await
        .unwrap();
    assert_eq!(offered.subnet_id, subnets[0]);
    assert!(!offered.zone_id.is_empty());
    let refused = check_zone_offer(&stack.aws, &check("us-east-1c"))
        .await
        .unwrap_err();
    assert!(!refused.retryable);
    assert_eq!(refused.kind, "ServiceNotOfferedInZone");
    assert!(
        refused.message.contains("us-east-1c"),
        "{}",
        refused.message
    );

    delete_endpoint_service(&stack.aws, &scope2, &service)
        .await
        .unwrap();
    delete_load_balancer(&stack.aws, &scope, &lb).await.unwrap();
    drop_management_vpc(&stack, &vpc_id, &subnets).await;
    let left = find_leftovers(
        &stack.aws,
        &stack.aws,
        &FindLeftovers {
            infra_id,
            oidc_bucket: None,
        },
    )
    .await
    .unwrap();
    assert!(left.is_empty(), "{left:?}");
}

//! The operators' cloud side against the dev stack's moto (`HCPFLOW_DEV_MOTO_ENDPOINT`;
//! skipped without it, a failure under `make test`): the default security group and
//! PrivateLink of a PublicAndPrivate cluster with three NodePools, made as the
//! operators make them; a control-plane-operator role without a permission, refused as
//! AWS refuses it, and recovering when the policy is fixed; a cluster with made-up ids;
//! and everything gone once the HostedClusters (annotated
//! `hypershift.openshift.io/cleanup-cloud-resources`) are. Every name is this run's own; moto
//! is never reset (other tests share it), and what the test made for itself is removed.

use std::time::Duration;

use aws_sdk_ec2::types::{Filter, ResourceType, Tag, TagSpecification, VpcEndpoint};
use aws_sdk_route53::types::{HostedZoneConfig, RrType, Vpc, VpcRegion};
use hcpflow_kube_emulator::operator::cloud::{Settings, CLEANUP_CLOUD_RESOURCES};
use hcpflow_kube_emulator::server::{Handle, Install};
use serde_json::{json, Value};

use crate::support::*;

pub(crate) const REGION: &str = "us-east-1";
pub(crate) const ACCOUNT: &str = "123456789012";
pub(crate) const CPO_POLICY: &str =
    include_str!("../../../../../activities/aws/policies/control-plane-operator.json");

pub(crate) struct Moto {
    pub(crate) ec2: aws_sdk_ec2::Client,
    pub(crate) elb: aws_sdk_elasticloadbalancing::Client,
    pub(crate) elbv2: aws_sdk_elasticloadbalancingv2::Client,
    pub(crate) iam: aws_sdk_iam::Client,
    pub(crate) route53: aws_sdk_route53::Client,
    pub(crate) s3: aws_sdk_s3::Client,
}

/// The dev stack's moto endpoint; `None` (the test skips) outside the stack, which
/// `make test` (HCPFLOW_REQUIRE_STACK) turns into a failure.
pub(crate) fn moto_endpoint() -> Option<String> {
    let endpoint = std::env::var("HCPFLOW_DEV_MOTO_ENDPOINT").ok();
    if endpoint.is_none() {
        assert!(
            std::env::var_os("HCPFLOW_REQUIRE_STACK").is_none(),
            "the dev stack's HCPFLOW_DEV_MOTO_ENDPOINT must be set under make test"
        );
        eprintln!("skipping: it needs the dev stack's moto; run `make test` or load .dev/env");
    }
    endpoint
}

pub(crate) async fn moto(endpoint: &str) -> Moto {
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new(REGION))
        .endpoint_url(endpoint)
        .credentials_provider(aws_credential_types::Credentials::new(
            "testing", "testing", None, None, "test",
        ))
        .load()
        .await;
    let s3 = aws_sdk_s3::config::Builder::from(&sdk)
        .force_path_style(true)
        .build();
    Moto {
        ec2: aws_sdk_ec2::Client::new(&sdk),
        elb: aws_sdk_elasticloadbalancing::Client::new(&sdk),
        elbv2: aws_sdk_elasticloadbalancingv2::Client::new(&sdk),
        iam: aws_sdk_iam::Client::new(&sdk),
        route53: aws_sdk_route53::Client::new(&sdk),
        s3: aws_sdk_s3::Client::from_conf(s3),
    }
}

pub(crate) fn unique() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{}{}", std::process::id() % 10_000, nanos % 100_000)
}

pub(crate) fn filter(name: &str, value: &str) -> Filter {
    Filter::builder().name(name).values(value).build()
}

pub(crate) fn tagged(resource: ResourceType, tags: &[(&str, &str)]) -> TagSpecification {
    TagSpecification::builder()
        .resource_type(resource)
        .set_tags(Some(
            tags.iter()
                .map(|(k, v)| Tag::builder().key(*k).value(*v).build())
                .collect(),
        ))
        .build()
}

/// A VPC with one subnet per zone (`10.<second>.<i+1>.0/24`), tagged.
pub(crate) async fn network(
    moto: &Moto,
    second: u8,
    zones: &[&str],
    vpc_tags: &[(&str, &str)],
    subnet_tags: &[(&str, &str)],
) -> (String, Vec<String>) {
    let vpc = moto
        .ec2
        .create_vpc()
        .cidr_block(format!("10.{second}.0.0/16"))
        .tag_specifications(tagged(ResourceType::Vpc, vpc_tags))
        .send()
        .await
        .unwrap();
    let vpc_id = vpc.vpc().unwrap().vpc_id().unwrap().to_owned();
    let mut subnets = Vec::new();
    for (i, zone) in zones.iter().enumerate() {
        let subnet = moto
            .ec2
            .create_subnet()
            .vpc_id(&vpc_id)
            .cidr_block(format!("10.{second}.{}.0/24", i + 1))
            .availability_zone(*zone)
            .tag_specifications(tagged(ResourceType::Subnet, subnet_tags))
            .send()
            .await
            .unwrap();
        subnets.push(subnet.subnet().unwrap().subnet_id().unwrap().to_owned());
    }
    (vpc_id, subnets)
}

async fn private_zone(moto: &Moto, name: &str, vpc: &str) -> String {
    let zone = moto
        .route53
        .create_hosted_zone()
        .name(name)
        .caller_reference(format!("{name}-{}", unique()))
        .vpc(
            Vpc::builder()
                .vpc_id(vpc)
                .vpc_region(VpcRegion::UsEast1)
                .build(),
        )
        .hosted_zone_config(HostedZoneConfig::builder().private_zone(true).build())
        .send()
        .await
        .unwrap();
    zone.hosted_zone()
        .unwrap()
        .id()
        .trim_start_matches("/hostedzone/")
        .to_owned()
}

/// A role at path `/hcpflow/` with `document` as its inline policy; its ARN.
pub(crate) async fn role(moto: &Moto, name: &str, document: &str) -> String {
    let trust = json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
        "Principal": {"Federated": format!("arn:aws:iam::{ACCOUNT}:oidc-provider/example")},
        "Action": "sts:AssumeRoleWithWebIdentity"}]});
    let created = moto
        .iam
        .create_role()
        .role_name(name)
        .path("/hcpflow/")
        .assume_role_policy_document(trust.to_string())
        .send()
        .await
        .unwrap();
    put_policy(moto, name, document).await;
    created.role().unwrap().arn().to_owned()
}

pub(crate) async fn put_policy(moto: &Moto, role: &str, document: &str) {
    moto.iam
        .put_role_policy()
        .role_name(role)
        .policy_name(format!("{role}-policy"))
        .policy_document(document)
        .send()
        .await
        .unwrap();
}

pub(crate) fn hosted_cluster_in(
    name: &str,
    infra: &str,
    access: &str,
    vpc: &str,
    subnet: &str,
    cpo_role: &str,
) -> Value {
    let mut hc = hosted_cluster(name);
    hc["spec"]["infraID"] = json!(infra);
    let aws = &mut hc["spec"]["platform"]["aws"];
    aws["endpointAccess"] = json!(access);
    aws["rolesRef"]["controlPlaneOperatorARN"] = json!(cpo_role);
    aws["cloudProviderConfig"] =
        json!({"vpc": vpc, "subnet": {"id": subnet}, "zone": "us-east-1a"});
    aws["resourceTags"] = json!([{"key": "hcpflow.io/test", "value": name}]);
    hc
}

pub(crate) fn node_pool_in(name: &str, cluster: &str, subnet: &str) -> Value {
    let mut pool = node_pool(name, cluster, 1);
    pool["spec"]["platform"]["aws"]["subnet"]["id"] = json!(subnet);
    pool
}

pub(crate) fn condition<'a>(object: &'a Value, kind: &str) -> Option<&'a Value> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

pub(crate) fn is(object: &Value, kind: &str, status: &str) -> bool {
    condition(object, kind).is_some_and(|c| c["status"] == status)
}

/// Polls the object at `path` until `done`, for at most `secs`.
pub(crate) async fn wait(
    emu: &Handle,
    path: &str,
    secs: u64,
    done: impl Fn(u16, &Value) -> bool,
) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    loop {
        let (status, body) = get(emu, path).await;
        if done(status, &body) {
            return body;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{path} never reached the expected state: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls `look` until it returns `Some`, for at most `secs`.
pub(crate) async fn eventually<T, F, Fut>(what: &str, secs: u64, mut look: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    loop {
        match look().await {
            Ok(value) => return value,
            Err(why) => assert!(std::time::Instant::now() < deadline, "{what}: {why}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The live endpoint of `service` in `vpc` tagged for `name`.
async fn endpoint(moto: &Moto, vpc: &str, name: &str, service: &str) -> Option<VpcEndpoint> {
    let found = moto
        .ec2
        .describe_vpc_endpoints()
        .filters(filter("vpc-id", vpc))
        .filters(filter("tag:AWSEndpointService", service))
        .filters(filter("tag:hcpflow.io/test", name))
        .send()
        .await
        .unwrap();
    found
        .vpc_endpoints()
        .iter()
        .find(|e| e.state().map(|s| s.as_str()) != Some("deleted"))
        .cloned()
}

/// The endpoint has exactly `subnets`, each with an available interface.
async fn endpoint_in(
    moto: &Moto,
    vpc: &str,
    name: &str,
    service: &str,
    subnets: &[String],
) -> Result<VpcEndpoint, String> {
    let Some(found) = endpoint(moto, vpc, name, service).await else {
        return Err(format!("no endpoint for {service} yet"));
    };
    let mut have = found.subnet_ids().to_vec();
    have.sort();
    let mut want = subnets.to_vec();
    want.sort();
    if have != want {
        return Err(format!("{service}: subnets {have:?}, want {want:?}"));
    }
    let interfaces = moto
        .ec2
        .describe_network_interfaces()
        .set_network_interface_ids(Some(found.network_interface_ids().to_vec()))
        .send()
        .await
        .map_err(|e| format!("{e:?}"))?;
    for subnet in subnets {
        let ready = interfaces.network_interfaces().iter().any(|eni| {
            eni.subnet_id() == Some(subnet.as_str())
                && eni.status().map(|s| s.as_str()) == Some("available")
        });
        if !ready {
            return Err(format!("{service}: no available interface in {subnet}"));
        }
    }
    Ok(found)
}

pub(crate) async fn security_group(
    moto: &Moto,
    infra: &str,
    name: &str,
) -> Option<aws_sdk_ec2::types::SecurityGroup> {
    moto.ec2
        .describe_security_groups()
        .filters(filter(
            &format!("tag:kubernetes.io/cluster/{infra}"),
            "owned",
        ))
        .filters(filter("tag:Name", name))
        .send()
        .await
        .unwrap()
        .security_groups()
        .first()
        .cloned()
}

async fn cname(moto: &Moto, zone: &str, name: &str) -> Option<String> {
    let listed = moto
        .route53
        .list_resource_record_sets()
        .hosted_zone_id(zone)
        .send()
        .await
        .unwrap();
    listed
        .resource_record_sets()
        .iter()
        .find(|r| {
            r.r#type() == &RrType::Cname
                && r.name().trim_end_matches('.').replace("\\052", "*") == name
        })
        .and_then(|r| r.resource_records().first())
        .map(|r| r.value().to_owned())
}

/// The endpoint services in front of load balancers whose name is in `names`, with
/// their allowed principals.
async fn endpoint_services(moto: &Moto, lb_arns: &[String]) -> Vec<(String, Vec<String>, bool)> {
    let configurations = moto
        .ec2
        .describe_vpc_endpoint_service_configurations()
        .send()
        .await
        .unwrap();
    let mut found = Vec::new();
    for configuration in configurations.service_configurations() {
        if !configuration
            .network_load_balancer_arns()
            .iter()
            .any(|arn| lb_arns.contains(arn))
        {
            continue;
        }
        let id = configuration.service_id().unwrap().to_owned();
        let permissions = moto
            .ec2
            .describe_vpc_endpoint_service_permissions()
            .service_id(&id)
            .send()
            .await
            .unwrap();
        let principals = permissions
            .allowed_principals()
            .iter()
            .filter_map(|p| p.principal().map(str::to_owned))
            .collect();
        found.push((
            configuration.service_name().unwrap().to_owned(),
            principals,
            configuration.acceptance_required().unwrap_or(true),
        ));
    }
    found
}

/// Whether the ELB resource is tagged for a Service in `namespace`.
async fn for_namespace(moto: &Moto, arn: &str, namespace: &str) -> bool {
    let tags = moto
        .elbv2
        .describe_tags()
        .resource_arns(arn)
        .send()
        .await
        .unwrap();
    tags.tag_descriptions()
        .iter()
        .flat_map(|d| d.tags())
        .any(|t| {
            t.key() == Some("kubernetes.io/service-name")
                && t.value()
                    .is_some_and(|v| v.starts_with(&format!("{namespace}/")))
        })
}

/// The management cluster's load balancers (ARN, name) of Services in `namespace`.
async fn load_balancers(moto: &Moto, namespace: &str) -> Vec<(String, String)> {
    let all = moto.elbv2.describe_load_balancers().send().await.unwrap();
    let mut found = Vec::new();
    for lb in all.load_balancers() {
        let arn = lb.load_balancer_arn().unwrap().to_owned();
        if for_namespace(moto, &arn, namespace).await {
            found.push((arn, lb.load_balancer_name().unwrap().to_owned()));
        }
    }
    found
}

/// The target groups of Services in `namespace`.
async fn target_groups(moto: &Moto, namespace: &str) -> Vec<String> {
    let all = moto.elbv2.describe_target_groups().send().await.unwrap();
    let mut found = Vec::new();
    for tg in all.target_groups() {
        let arn = tg.target_group_arn().unwrap().to_owned();
        if for_namespace(moto, &arn, namespace).await {
            found.push(arn);
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_make_privatelink_and_the_default_security_group_in_moto_and_remove_them() {
    let Some(endpoint_url) = moto_endpoint() else {
        return;
    };
    let moto = moto(&endpoint_url).await;
    let u = unique();
    let name = format!("pl{u}");
    let infra = format!("{name}-x");
    let ns = format!("ns{u}");
    let management = format!("mgmt-{u}");
    let zones = ["us-east-1a", "us-east-1b", "us-east-1c"];

    // The management cluster's network, the guest's VPC, its private zone, the CPO role.
    let cluster_tag = format!("kubernetes.io/cluster/{management}");
    let (mgmt_vpc, mgmt_subnets) = network(
        &moto,
        251,
        &zones,
        &[("Name", &management), (&cluster_tag, "owned")],
        &[
            (&cluster_tag, "shared"),
            ("kubernetes.io/role/internal-elb", "1"),
        ],
    )
    .await;
    let (vpc, subnets) = network(&moto, 0, &zones, &[("Name", &name)], &[("Name", &name)]).await;
    let zone_name = format!("{name}.hypershift.local");
    let zone = private_zone(&moto, &zone_name, &vpc).await;
    let policy = CPO_POLICY.replace("${LOCAL_ZONE_ID}", &zone);
    let cpo_role_name = format!("{infra}-control-plane-operator");
    let cpo_role = role(&moto, &cpo_role_name, &policy).await;
    assert!(cpo_role.contains(":role/hcpflow/"), "{cpo_role}");
    let principal = format!("arn:aws:iam::{ACCOUNT}:role/{cpo_role_name}");

    let emu = emulator_installed(Install::with_cloud(Settings {
        endpoint: endpoint_url.clone(),
        region: REGION.into(),
        management_cluster: management.clone(),
        period: Duration::from_millis(200),
        guest_cleanup_timeout: Duration::from_secs(30),
    }))
    .await;
    let hcs = format!("/apis/hypershift.openshift.io/v1beta1/namespaces/{ns}/hostedclusters");
    let nps = format!("/apis/hypershift.openshift.io/v1beta1/namespaces/{ns}/nodepools");
    post(&emu, "/api/v1/namespaces", &namespace(&ns)).await;

    // Two NodePools first, then the cluster: its endpoints start in two zones.
    for (i, subnet) in subnets.iter().take(2).enumerate() {
        let (status, body) = post(
            &emu,
            &nps,
            &node_pool_in(&format!("{name}-{i}"), &name, subnet),
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    // Created as `hypershift create cluster` makes it: its control plane removes what it
    // and the guest made in the customer's account when it is deleted.
    let mut hc = hosted_cluster_in(
        &name,
        &infra,
        "PublicAndPrivate",
        &vpc,
        &subnets[0],
        &cpo_role,
    );
    hc["metadata"]["annotations"] = json!({CLEANUP_CLOUD_RESOURCES: "true"});
    post_pull_secret(&emu, &ns, &name).await;
    let (status, body) = post(&emu, &hcs, &hc).await;
    assert_eq!(status, 201, "{body}");
    let path = format!("{hcs}/{name}");
    let ready = wait(&emu, &path, 30, |_, hc| {
        is(hc, "AWSEndpointAvailable", "True") && is(hc, "AWSDefaultSecurityGroupCreated", "True")
    })
    .await;
    for kind in ["AWSEndpointAvailable", "AWSEndpointServiceAvailable"] {
        let c = condition(&ready, kind).unwrap();
        assert_eq!(
            (&c["reason"], &c["message"]),
            (&json!("AWSSuccess"), &json!("All is well")),
            "{kind}"
        );
    }
    let created = condition(&ready, "AWSDefaultSecurityGroupCreated").unwrap();
    assert_eq!(
        (&created["reason"], &created["message"]),
        (&json!("AsExpected"), &json!("All is well"))
    );
    let identity = condition(&ready, "ValidAWSIdentityProvider").unwrap();
    assert_eq!(
        (
            &identity["status"],
            &identity["reason"],
            &identity["message"]
        ),
        (&json!("True"), &json!("AsExpected"), &json!("All is well"))
    );
    // The NodePools get their nodes once the cluster has its default security group.
    for i in 0..2 {
        let pool = wait(&emu, &format!("{nps}/{name}-{i}"), 20, |_, np| {
            np["status"]["replicas"] == 1 && is(np, "Ready", "True")
        })
        .await;
        assert!(is(&pool, "AWSSecurityGroupAvailable", "True"), "{pool}");
    }
    for (service, _) in [("private-router", 443), ("kube-apiserver-private", 6443)] {
        eventually("two zones", 30, || {
            endpoint_in(&moto, &vpc, &name, service, &subnets[..2])
        })
        .await;
    }

    // The third NodePool: both endpoints gain its zone, with an interface there.
    post(
        &emu,
        &nps,
        &node_pool_in(&format!("{name}-2"), &name, &subnets[2]),
    )
    .await;
    let mut endpoints = Vec::new();
    for (service, port) in [("private-router", 443), ("kube-apiserver-private", 6443)] {
        let found = eventually("three zones", 45, || {
            endpoint_in(&moto, &vpc, &name, service, &subnets)
        })
        .await;
        // Its security group: ingress on the port from the machine network.
        let group = security_group(&moto, &infra, &format!("{infra}-vpce-{service}"))
            .await
            .unwrap_or_else(|| panic!("no endpoint security group for {service}"));
        assert_eq!(group.vpc_id(), Some(vpc.as_str()));
        assert_eq!(group.description(), Some("VPC endpoint security group"));
        assert!(group
            .tags()
            .iter()
            .any(|t| t.key() == Some("hcpflow.io/test")));
        assert!(
            group.ip_permissions().iter().any(|p| {
                p.from_port() == Some(port)
                    && p.ip_protocol() == Some("tcp")
                    && p.ip_ranges().iter().any(|r| {
                        r.cidr_ip() == Some("10.0.0.0/16")
                            && r.description() == Some("Control plane service")
                    })
            }),
            "{group:?}"
        );
        let groups: Vec<&str> = found.groups().iter().filter_map(|g| g.group_id()).collect();
        assert_eq!(groups, [group.group_id().unwrap()]);
        assert!(found
            .tags()
            .iter()
            .any(|t| t.key() == Some("hcpflow.io/test") && t.value() == Some(name.as_str())));
        endpoints.push(found);
    }
    let dns = |e: &VpcEndpoint| e.dns_entries()[0].dns_name().unwrap().to_owned();
    let records = eventually("the records", 10, || async {
        let apps = cname(&moto, &zone, &format!("*.apps.{zone_name}")).await;
        let api = cname(&moto, &zone, &format!("api.{zone_name}")).await;
        match (apps, api) {
            (Some(apps), Some(api)) if apps == dns(&endpoints[0]) && api == dns(&endpoints[1]) => {
                Ok((apps, api))
            }
            other => Err(format!("records {other:?}")),
        }
    })
    .await;
    assert!(records.1.contains(endpoints[1].vpc_endpoint_id().unwrap()));

    // The management side: an internal NLB per Service, its target, the endpoint services.
    let control_plane_ns = format!("{ns}-{name}");
    let lbs = load_balancers(&moto, &control_plane_ns).await;
    assert_eq!(lbs.len(), 2, "{lbs:?}");
    for (arn, lb_name) in &lbs {
        assert!(lb_name.starts_with('a') && lb_name.len() == 32, "{lb_name}");
        let described = moto
            .elbv2
            .describe_load_balancers()
            .load_balancer_arns(arn)
            .send()
            .await
            .unwrap();
        let lb = &described.load_balancers()[0];
        assert_eq!(lb.scheme().map(|s| s.as_str()), Some("internal"));
        assert_eq!(lb.r#type().map(|t| t.as_str()), Some("network"));
        assert_eq!(lb.vpc_id(), Some(mgmt_vpc.as_str()));
        let listeners = moto
            .elbv2
            .describe_listeners()
            .load_balancer_arn(arn)
            .send()
            .await
            .unwrap();
        let listener = &listeners.listeners()[0];
        let tg = listener.default_actions()[0].target_group_arn().unwrap();
        let health = moto
            .elbv2
            .describe_target_health()
            .target_group_arn(tg)
            .send()
            .await
            .unwrap();
        assert_eq!(health.target_health_descriptions().len(), 1);
        assert!(matches!(listener.port(), Some(443 | 6443)), "{listener:?}");
        let target = health.target_health_descriptions()[0]
            .target()
            .unwrap()
            .id()
            .unwrap();
        assert!(target.starts_with("10.251."), "{target}");
    }
    assert_eq!(target_groups(&moto, &control_plane_ns).await.len(), 2);
    let lb_arns: Vec<String> = lbs.iter().map(|(arn, _)| arn.clone()).collect();
    let services = endpoint_services(&moto, &lb_arns).await;
    assert_eq!(services.len(), 2, "{services:?}");
    for (service_name, principals, acceptance) in &services {
        assert_eq!(
            principals,
            std::slice::from_ref(&principal),
            "{service_name}"
        );
        assert!(!acceptance);
        assert!(endpoints
            .iter()
            .any(|e| e.service_name() == Some(service_name.as_str())));
    }

    // The default security group, in status and in moto.
    let group_id = ready["status"]["platform"]["aws"]["defaultWorkerSecurityGroupID"]
        .as_str()
        .unwrap()
        .to_owned();
    let default_group = security_group(&moto, &infra, &format!("{infra}-default-sg"))
        .await
        .unwrap();
    assert_eq!(default_group.group_id(), Some(group_id.as_str()));
    assert_eq!(
        default_group.description(),
        Some("default worker security group")
    );
    let from_itself = |port: i32, protocol: &str| {
        default_group.ip_permissions().iter().any(|p| {
            p.from_port() == Some(port)
                && p.ip_protocol() == Some(protocol)
                && p.user_id_group_pairs()
                    .iter()
                    .any(|g| g.group_id() == Some(group_id.as_str()))
        })
    };
    for (port, protocol) in [
        (4789, "udp"),
        (6081, "udp"),
        (500, "udp"),
        (4500, "udp"),
        (9000, "tcp"),
        (9000, "udp"),
        (10250, "tcp"),
        (30000, "tcp"),
        (30000, "udp"),
    ] {
        assert!(
            from_itself(port, protocol),
            "{port}/{protocol}: {default_group:?}"
        );
    }
    assert!(default_group
        .ip_permissions()
        .iter()
        .any(|p| p.from_port() == Some(22)
            && p.ip_ranges()
                .iter()
                .any(|r| r.cidr_ip() == Some("10.0.0.0/16"))));

    // A role without ec2:CreateSecurityGroup: refused as AWS refuses it; fixed, it heals.
    let denied_name = format!("{name}d");
    let denied_infra = format!("{denied_name}-x");
    let denied_role_name = format!("{denied_infra}-control-plane-operator");
    let without = {
        let mut document: Value = serde_json::from_str(&policy).unwrap();
        for statement in document["Statement"].as_array_mut().unwrap() {
            if let Some(actions) = statement["Action"].as_array_mut() {
                actions.retain(|a| a != "ec2:CreateSecurityGroup");
            }
        }
        document.to_string()
    };
    let denied_role = role(&moto, &denied_role_name, &without).await;
    let mut denied = hosted_cluster_in(
        &denied_name,
        &denied_infra,
        "PublicAndPrivate",
        &vpc,
        &subnets[0],
        &denied_role,
    );
    denied["metadata"]["annotations"] = json!({CLEANUP_CLOUD_RESOURCES: "true"});
    post_pull_secret(&emu, &ns, &denied_name).await;
    post(&emu, &hcs, &denied).await;
    let denied_path = format!("{hcs}/{denied_name}");
    let refused = wait(&emu, &denied_path, 30, |_, hc| {
        is(hc, "AWSDefaultSecurityGroupCreated", "False") && is(hc, "AWSEndpointAvailable", "False")
    })
    .await;
    let created = condition(&refused, "AWSDefaultSecurityGroupCreated").unwrap();
    assert_eq!(
        (&created["reason"], &created["message"]),
        (
            &json!("AWSError"),
            &json!("failed to create security group, code: UnauthorizedOperation")
        )
    );
    let endpoint_condition = condition(&refused, "AWSEndpointAvailable").unwrap();
    assert_eq!(
        (&endpoint_condition["reason"], &endpoint_condition["message"]),
        (
            &json!("AWSError"),
            &json!("failed to create security group, code: UnauthorizedOperation; failed to create security group, code: UnauthorizedOperation")
        )
    );
    assert!(
        is(&refused, "AWSEndpointServiceAvailable", "True"),
        "{refused}"
    );
    put_policy(&moto, &denied_role_name, &policy).await;
    let healed = wait(&emu, &denied_path, 30, |_, hc| {
        is(hc, "AWSDefaultSecurityGroupCreated", "True")
            && condition(hc, "AWSEndpointAvailable").is_some_and(|c| {
                c["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("hosted zone"))
            })
    })
    .await;
    // It has no private zone of its own: the CPO says so.
    assert_eq!(
        condition(&healed, "AWSEndpointAvailable").unwrap()["message"],
        format!("hosted zone {denied_name}.hypershift.local not found; hosted zone {denied_name}.hypershift.local not found")
    );

    // A Public cluster with made-up ids: the CPO cannot even get credentials. Its
    // identity provider is invalid, and the CPO skips the default security group.
    let fake_name = format!("{name}f");
    let fake = hosted_cluster_in(
        &fake_name,
        &format!("{fake_name}-x"),
        "Public",
        "vpc-0000000000000fake",
        "subnet-00000000000fake",
        &format!("arn:aws:iam::{ACCOUNT}:role/{fake_name}-missing"),
    );
    post_pull_secret(&emu, &ns, &fake_name).await;
    post(&emu, &hcs, &fake).await;
    let fake_path = format!("{hcs}/{fake_name}");
    // The cloud side reaches it after its pass over the other clusters: room for a slow pass.
    let failing = wait(&emu, &fake_path, 90, |_, hc| {
        is(hc, "ValidAWSIdentityProvider", "False")
    })
    .await;
    let identity = condition(&failing, "ValidAWSIdentityProvider").unwrap();
    assert_eq!(
        (&identity["reason"], &identity["message"]),
        (&json!("InvalidIdentityProvider"), &json!("WebIdentityErr"))
    );
    assert!(is(&failing, "AWSEndpointAvailable", "Unknown"), "{failing}");
    let failing = wait(&emu, &fake_path, 10, |_, hc| is(hc, "Available", "True")).await;
    assert!(
        condition(&failing, "AWSDefaultSecurityGroupCreated").is_none(),
        "{failing}"
    );

    // Deleting: the HostedClusters go once the operators removed what they made.
    for pool in 0..3 {
        delete(&emu, &format!("{nps}/{name}-{pool}")).await;
    }
    for path in [&path, &denied_path, &fake_path] {
        delete(&emu, path).await;
    }
    for path in [&path, &denied_path, &fake_path] {
        wait(&emu, path, 60, |status, _| status == 404).await;
    }
    for (service, _) in [("private-router", 443), ("kube-apiserver-private", 6443)] {
        assert!(
            endpoint(&moto, &vpc, &name, service).await.is_none(),
            "{service}"
        );
        assert!(
            endpoint(&moto, &vpc, &denied_name, service).await.is_none(),
            "{service}"
        );
        assert!(
            security_group(&moto, &infra, &format!("{infra}-vpce-{service}"))
                .await
                .is_none()
        );
        assert!(security_group(
            &moto,
            &denied_infra,
            &format!("{denied_infra}-vpce-{service}")
        )
        .await
        .is_none());
    }
    assert!(
        security_group(&moto, &infra, &format!("{infra}-default-sg"))
            .await
            .is_none()
    );
    assert!(
        security_group(&moto, &denied_infra, &format!("{denied_infra}-default-sg"))
            .await
            .is_none()
    );
    assert!(cname(&moto, &zone, &format!("*.apps.{zone_name}"))
        .await
        .is_none());
    assert!(cname(&moto, &zone, &format!("api.{zone_name}"))
        .await
        .is_none());
    assert!(endpoint_services(&moto, &lb_arns).await.is_empty());
    assert!(load_balancers(&moto, &control_plane_ns).await.is_empty());
    assert!(load_balancers(&moto, &format!("{ns}-{denied_name}"))
        .await
        .is_empty());
    assert!(target_groups(&moto, &control_plane_ns).await.is_empty());
    emu.stop();

    // What the test made for itself.
    let _ = moto.route53.delete_hosted_zone().id(&zone).send().await;
    for role in [&cpo_role_name, &denied_role_name] {
        let _ = moto
            .iam
            .delete_role_policy()
            .role_name(role.as_str())
            .policy_name(format!("{role}-policy"))
            .send()
            .await;
        let _ = moto.iam.delete_role().role_name(role.as_str()).send().await;
    }
    for subnet in subnets.iter().chain(&mgmt_subnets) {
        let _ = moto.ec2.delete_subnet().subnet_id(subnet).send().await;
    }
    for id in [&vpc, &mgmt_vpc] {
        let _ = moto.ec2.delete_vpc().vpc_id(id.as_str()).send().await;
    }
}

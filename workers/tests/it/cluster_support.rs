//! What the HyperShift end-to-end tests share: the prerequisites in moto, a create's
//! input, a server wired to moto and the emulator, and what moto and the emulator hold
//! of a cluster, counted with independent calls (not through our own code's view).

use aws_sdk_ec2::types::Filter;
use hcpflow_aws::{AwsClients, AwsSettings};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::Api;
use serde_json::{json, Value};

use crate::support::{env_value, say, stack, unique, Server};

pub(crate) const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];

/// Prerequisites a platform team has before any cluster: the OIDC bucket, the public
/// zone of the base domain, and the management cluster's VPC with a subnet in every
/// zone (the stack's: the emulated operators put their load balancers there).
pub(crate) struct Prerequisites {
    pub(crate) bucket: String,
    pub(crate) base_domain: String,
    pub(crate) management_vpc: String,
    pub(crate) management_subnets: Vec<String>,
}

pub(crate) async fn prerequisites(moto: &AwsClients, tag: &str) -> Prerequisites {
    let bucket = format!("oidc-{tag}");
    moto.s3
        .create_bucket()
        .bucket(&bucket)
        .send()
        .await
        .unwrap();
    let base_domain = format!("{tag}.example.com");
    moto.route53
        .create_hosted_zone()
        .name(&base_domain)
        .caller_reference(format!("prereq-{tag}"))
        .send()
        .await
        .unwrap();
    let management_vpc = std::env::var("HCPFLOW_MANAGEMENT_VPC_ID")
        .expect("HCPFLOW_MANAGEMENT_VPC_ID: the stack's management network (make dev-up)");
    let management_subnets = std::env::var("HCPFLOW_MANAGEMENT_SUBNET_IDS")
        .expect("HCPFLOW_MANAGEMENT_SUBNET_IDS: the stack's management network (make dev-up)")
        .split(',')
        .map(str::to_owned)
        .collect();
    Prerequisites {
        bucket,
        base_domain,
        management_vpc,
        management_subnets,
    }
}

pub(crate) fn create_input(name: &str, pre: &Prerequisites, replicas: i32) -> Value {
    json!({
        "name": name, "region": "us-east-1", "zones": ZONES,
        "base_domain": pre.base_domain, "endpoint_access": "PublicAndPrivate",
        "vpc_cidr": "10.0.0.0/16", "oidc_bucket": pre.bucket, "namespace": format!("ns-{name}"),
        "management": {"vpc_id": pre.management_vpc, "subnet_ids": pre.management_subnets},
        "release_image": "quay.io/openshift-release-dev/ocp-release:4.17.0-x86_64",
        "pull_secret": "{\"auths\": {\"quay.io\": {\"auth\": \"Y2FuYXJ5\"}}}",
        "ssh_public_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAItest hcpflow",
        "node_pools": ZONES.iter().map(|zone| json!({
            "name": format!("{name}-{zone}"), "zone": zone, "replicas": replicas
        })).collect::<Vec<_>>(),
    })
}

fn filter(name: &str, value: &str) -> Filter {
    Filter::builder().name(name).values(value).build()
}

pub(crate) fn hypershift(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("hypershift.openshift.io", "v1beta1", kind),
        plural,
    )
}

/// What moto and the emulator hold of `infra_id`, counted independently.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Holdings {
    pub(crate) vpcs: usize,
    pub(crate) private_subnets: usize,
    pub(crate) public_subnets: usize,
    pub(crate) nat_gateways: usize,
    pub(crate) elastic_ips: usize,
    /// Made by the operators: endpoints × their subnets, the endpoints' and the default
    /// security groups, the endpoint services (management side) and the local records.
    pub(crate) interface_endpoint_subnets: usize,
    pub(crate) endpoint_security_groups: usize,
    pub(crate) default_security_groups: usize,
    pub(crate) endpoint_services: usize,
    pub(crate) privatelink_records: usize,
    /// Made by the guest: load balancers (classic and v2), volumes, the registry
    /// bucket, the load balancer's security group (tagged `<infra>` owned).
    pub(crate) guest_load_balancers: usize,
    pub(crate) guest_volumes: usize,
    pub(crate) guest_buckets: usize,
    pub(crate) guest_security_groups: usize,
    pub(crate) gateway_endpoints: usize,
    pub(crate) roles: usize,
    pub(crate) oidc_providers: usize,
    pub(crate) documents: usize,
    pub(crate) private_zones: usize,
    pub(crate) local_zones: usize,
    pub(crate) kube_objects: usize,
}

pub(crate) async fn holdings(
    moto: &AwsClients,
    kube: &kube::Client,
    name: &str,
    infra_id: &str,
    pre: &Prerequisites,
) -> Holdings {
    let owned = filter(&format!("tag:kubernetes.io/cluster/{infra_id}"), "owned");
    let vpcs = moto
        .ec2
        .describe_vpcs()
        .filters(owned.clone())
        .send()
        .await
        .unwrap();
    let mut held = Holdings {
        vpcs: vpcs.vpcs().len(),
        ..Holdings::default()
    };
    for vpc in vpcs.vpcs() {
        let vpc_id = vpc.vpc_id().unwrap();
        let subnets = moto
            .ec2
            .describe_subnets()
            .filters(filter("vpc-id", vpc_id))
            .send()
            .await
            .unwrap();
        for subnet in subnets.subnets() {
            let name = subnet
                .tags()
                .iter()
                .find(|t| t.key() == Some("Name"))
                .and_then(|t| t.value())
                .unwrap_or_default();
            if name.contains("-private-") {
                held.private_subnets += 1;
            } else if name.contains("-public-") {
                held.public_subnets += 1;
            }
        }
        let nats = moto
            .ec2
            .describe_nat_gateways()
            .filter(filter("vpc-id", vpc_id))
            .send()
            .await
            .unwrap();
        held.nat_gateways = nats
            .nat_gateways()
            .iter()
            .filter(|n| n.state().map(|s| s.as_str()) == Some("available"))
            .count();
        let endpoints = moto
            .ec2
            .describe_vpc_endpoints()
            .filters(filter("vpc-id", vpc_id))
            .send()
            .await
            .unwrap();
        for endpoint in endpoints.vpc_endpoints() {
            if endpoint.state().map(|s| s.as_str().to_lowercase()) == Some("deleted".into()) {
                continue;
            }
            match endpoint.vpc_endpoint_type().map(|t| t.as_str()) {
                Some("Interface") => held.interface_endpoint_subnets += endpoint.subnet_ids().len(),
                Some("Gateway") => held.gateway_endpoints += 1,
                _ => {}
            }
        }
        let groups = moto
            .ec2
            .describe_security_groups()
            .filters(filter("vpc-id", vpc_id))
            .send()
            .await
            .unwrap();
        for group in groups.security_groups() {
            let name = group.group_name().unwrap_or_default();
            if name.starts_with(&format!("{infra_id}-vpce-")) {
                held.endpoint_security_groups += 1;
            } else if name == format!("{infra_id}-default-sg") {
                held.default_security_groups += 1;
            } else if name.starts_with("k8s-") {
                held.guest_security_groups += 1;
            }
        }
    }
    let owned_tag = format!("kubernetes.io/cluster/{infra_id}");
    held.endpoint_services = moto
        .ec2
        .describe_vpc_endpoint_service_configurations()
        .send()
        .await
        .unwrap()
        .service_configurations()
        .iter()
        .filter(|s| s.tags().iter().any(|t| t.key() == Some(owned_tag.as_str())))
        .filter(|s| {
            !s.service_state()
                .is_some_and(|state| state.as_str().eq_ignore_ascii_case("deleted"))
        })
        .count();
    held.elastic_ips = moto
        .ec2
        .describe_addresses()
        .filters(owned)
        .send()
        .await
        .unwrap()
        .addresses()
        .len();
    let guest = guest_holdings(moto, infra_id).await;
    held.guest_load_balancers = guest.0;
    held.guest_volumes = guest.1;
    held.guest_buckets = guest.2;
    let roles = moto.iam.list_roles().max_items(1000).send().await.unwrap();
    held.roles = roles
        .roles()
        .iter()
        .filter(|r| r.role_name().starts_with(&format!("{infra_id}-")))
        .count();
    let providers = moto
        .iam
        .list_open_id_connect_providers()
        .send()
        .await
        .unwrap();
    held.oidc_providers = providers
        .open_id_connect_provider_list()
        .iter()
        .filter(|p| {
            p.arn()
                .is_some_and(|arn| arn.ends_with(&format!("/{infra_id}")))
        })
        .count();
    let objects = moto
        .s3
        .list_objects_v2()
        .bucket(&pre.bucket)
        .prefix(format!("{infra_id}/"))
        .send()
        .await
        .unwrap();
    held.documents = objects.contents().len();
    let zones = moto.route53.list_hosted_zones().send().await.unwrap();
    for zone in zones.hosted_zones() {
        if zone.name() == format!("{name}.{}.", pre.base_domain) {
            held.private_zones += 1;
        }
        if zone.name() == format!("{name}.hypershift.local.") {
            held.local_zones += 1;
            let records = moto
                .route53
                .list_resource_record_sets()
                .hosted_zone_id(zone.id())
                .send()
                .await
                .unwrap();
            held.privatelink_records += records
                .resource_record_sets()
                .iter()
                .filter(|r| r.r#type().as_str() == "CNAME")
                .count();
        }
    }
    let namespace = format!("ns-{name}");
    let selector = ListParams::default().labels(&format!(
        "hypershift.openshift.io/auto-created-for-infra={infra_id}"
    ));
    for resource in [
        hypershift("HostedCluster", "hostedclusters"),
        hypershift("NodePool", "nodepools"),
    ] {
        let api: Api<DynamicObject> = Api::namespaced_with(kube.clone(), &namespace, &resource);
        held.kube_objects += api.list(&selector).await.unwrap().items.len();
    }
    let secrets: Api<Secret> = Api::namespaced(kube.clone(), &namespace);
    held.kube_objects += secrets.list(&selector).await.unwrap().items.len();
    held
}

/// The guest's load balancers (classic and v2), volumes and registry buckets of
/// `infra_id`, from their tags and names.
pub(crate) async fn guest_holdings(moto: &AwsClients, infra_id: &str) -> (usize, usize, usize) {
    let tag = format!("kubernetes.io/cluster/{infra_id}");
    let mut load_balancers = 0;
    let classic = moto.elb.describe_load_balancers().send().await.unwrap();
    for lb in classic.load_balancer_descriptions() {
        let name = lb.load_balancer_name().unwrap();
        let tags = moto
            .elb
            .describe_tags()
            .load_balancer_names(name)
            .send()
            .await
            .unwrap();
        if tags
            .tag_descriptions()
            .iter()
            .flat_map(|d| d.tags())
            .any(|t| t.key() == tag.as_str())
        {
            load_balancers += 1;
        }
    }
    let v2 = moto.elbv2.describe_load_balancers().send().await.unwrap();
    for lb in v2.load_balancers() {
        let tags = moto
            .elbv2
            .describe_tags()
            .resource_arns(lb.load_balancer_arn().unwrap())
            .send()
            .await
            .unwrap();
        if tags
            .tag_descriptions()
            .iter()
            .flat_map(|d| d.tags())
            .any(|t| t.key() == Some(tag.as_str()))
        {
            load_balancers += 1;
        }
    }
    let volumes = moto
        .ec2
        .describe_volumes()
        .filters(filter(&format!("tag:{tag}"), "owned"))
        .send()
        .await
        .unwrap()
        .volumes()
        .len();
    let buckets = moto
        .s3
        .list_buckets()
        .send()
        .await
        .unwrap()
        .buckets()
        .iter()
        .filter(|b| {
            b.name()
                .is_some_and(|n| n.starts_with(&format!("{infra_id}-image-registry-")))
        })
        .count();
    (load_balancers, volumes, buckets)
}

/// Waits (60 s at most) until the guest has made its load balancers, volume and
/// registry bucket: the emulated guest makes them once the NodePools are ready, at its
/// own pace, which is slow when other tests keep moto busy.
pub(crate) async fn wait_for_guest(moto: &AwsClients, infra_id: &str) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (load_balancers, volumes, buckets) = guest_holdings(moto, infra_id).await;
        if load_balancers >= 2 && volumes >= 1 && buckets >= 1 {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("in 60 s the guest of {infra_id} made {load_balancers} load balancers (2 expected), {volumes} volumes and {buckets} registry buckets (1 each)");
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

impl Holdings {
    /// One 3-zone PublicAndPrivate (or Private) cluster with three NodePools: one of
    /// each of ours; of the operators', two endpoints (private router, API server) with a
    /// subnet in each zone, their security groups, services and records; of the guest's,
    /// its ingress and workload load balancers, a volume, the registry bucket and the
    /// ingress load balancer's security group.
    pub(crate) fn one_cluster() -> Self {
        Holdings {
            vpcs: 1,
            private_subnets: 3,
            public_subnets: 3,
            nat_gateways: 3,
            elastic_ips: 3,
            interface_endpoint_subnets: 6,
            endpoint_security_groups: 2,
            default_security_groups: 1,
            endpoint_services: 2,
            privatelink_records: 2,
            guest_load_balancers: 2,
            guest_volumes: 1,
            guest_buckets: 1,
            guest_security_groups: 1,
            gateway_endpoints: 1,
            roles: 8,
            oidc_providers: 1,
            documents: 2,
            private_zones: 1,
            local_zones: 1,
            // the HostedCluster, 3 NodePools, 4 Secrets
            kube_objects: 8,
        }
    }
}

/// The clients a test checks with, and a server environment for the stack; `None`
/// (with a message) when the stack is not up.
pub(crate) struct ClusterStack {
    pub(crate) env: Vec<(String, String)>,
    pub(crate) moto: AwsClients,
    pub(crate) kube: kube::Client,
}

pub(crate) async fn cluster_stack(test: &str) -> Option<ClusterStack> {
    let mut env = stack(test)?;
    let (Ok(moto_url), Ok(_)) = (
        std::env::var("HCPFLOW_DEV_MOTO_ENDPOINT"),
        std::env::var("HCPFLOW_KUBE_URL"),
    ) else {
        assert!(
            std::env::var_os("HCPFLOW_REQUIRE_STACK").is_none(),
            "moto and the emulator must be up under make test"
        );
        say(&format!(
            "skipping {test}: needs the dev stack's moto and Kubernetes emulator"
        ));
        return None;
    };
    hcpflow_workers::runtime::tls::install_crypto_provider();
    for key in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"] {
        env.push((
            key.to_owned(),
            std::env::var(key).unwrap_or_else(|_| "testing".into()),
        ));
    }
    let moto = AwsClients::connect(&AwsSettings {
        region: "us-east-1".into(),
        endpoint: Some(moto_url),
        static_credentials: Some(("testing".into(), "testing".into())),
    })
    .await;
    let kube = hcpflow_kube::KubeSettings {
        url: Some(env_value(&env, "HCPFLOW_KUBE_URL")),
        kubeconfig: None,
    }
    .connect()
    .await
    .unwrap();
    Some(ClusterStack { env, moto, kube })
}

/// A server that signs its AWS calls with `access_key` (the fault proxy keys its rules
/// and logs by it).
pub(crate) async fn server_with_key(
    stack: &ClusterStack,
    prefix: &str,
    access_key: &str,
) -> Server {
    Server::start(env_with_key(stack, access_key), prefix, &[]).await
}

/// The stack's settings for a process whose AWS calls are signed with `access_key` and
/// whose Kubernetes requests carry a token of the same name (the fault proxy and the
/// emulator log each under it).
pub(crate) fn env_with_key(stack: &ClusterStack, access_key: &str) -> Vec<(String, String)> {
    let mut env = stack.env.clone();
    env.retain(|(k, _)| k != "AWS_ACCESS_KEY_ID" && k != "HCPFLOW_KUBE_URL");
    env.push(("AWS_ACCESS_KEY_ID".into(), access_key.to_owned()));
    env.push(("KUBECONFIG".into(), kubeconfig_for(access_key)));
    env
}

/// A kubeconfig for the stack's emulator whose bearer token names `user`: the emulator
/// logs each request under it (`GET /_emulator/requests?user=`). Written under `.dev/`.
fn kubeconfig_for(user: &str) -> String {
    let url = std::env::var("HCPFLOW_KUBE_URL").expect("HCPFLOW_KUBE_URL");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.dev/kubeconfigs");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{user}.yaml"));
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: emulator\n  cluster:\n    server: {url}\ncontexts:\n- name: emulator\n  context:\n    cluster: emulator\n    user: {user}\ncurrent-context: emulator\nusers:\n- name: {user}\n  user:\n    token: {user}\n"
    );
    std::fs::write(&path, kubeconfig).unwrap();
    path.display().to_string()
}

/// One request the emulator logged: a verb on a group's resource (`nodepools/scale`
/// for a subresource), in a namespace or cluster-wide, on a named object or not.
#[derive(Debug, Clone)]
pub(crate) struct KubeRequest {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

/// What the emulator logged of `user`'s requests.
pub(crate) async fn kube_requests(user: &str) -> Vec<KubeRequest> {
    let url = std::env::var("HCPFLOW_KUBE_URL").expect("HCPFLOW_KUBE_URL");
    let addr = url.trim_start_matches("http://").trim_end_matches('/');
    let response =
        crate::support::http_get(addr, &format!("/_emulator/requests?user={user}")).await;
    let body = response.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    let entries: Vec<Value> =
        serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {response}"));
    entries
        .iter()
        .map(|entry| {
            let text = |key: &str| entry[key].as_str().unwrap_or_default().to_owned();
            let optional = |key: &str| entry[key].as_str().map(str::to_owned);
            KubeRequest {
                verb: text("verb"),
                group: text("group"),
                resource: text("resource"),
                namespace: optional("namespace"),
                name: optional("name"),
            }
        })
        .collect()
}

/// A cluster name no other test uses (short enough for a derived infra id).
pub(crate) fn cluster_name(tag: &str) -> String {
    let tag = unique(tag).to_lowercase();
    format!("c{}", &tag[tag.len().saturating_sub(12)..])
}

/// One request to the fault proxy's control API (`HCPFLOW_DEV_AWS_FAULTS`).
async fn fault_control(method: &str, path: &str, body: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let base = std::env::var("HCPFLOW_DEV_AWS_FAULTS").expect("HCPFLOW_DEV_AWS_FAULTS");
    let rest = base.trim_start_matches("http://");
    let (addr, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "{method} /{prefix}{path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    assert!(
        response.starts_with("HTTP/1.1 2") || response.starts_with("HTTP/1.0 2"),
        "{response}"
    );
    response
}

/// Every AWS action signed with `key`, as `(service, action)` in the order sent.
pub(crate) async fn logged_actions(key: &str) -> Vec<(String, String)> {
    logged_calls(key)
        .await
        .into_iter()
        .map(|(service, action, _)| (service, action))
        .collect()
}

/// Every AWS action signed with `key` or with a role `key` assumed, as `(service,
/// action, assumed)` in the order sent.
pub(crate) async fn logged_calls(key: &str) -> Vec<(String, String, bool)> {
    let response = fault_control("GET", &format!("/log?key={key}"), "").await;
    let body = response.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    let log: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    log.as_array()
        .unwrap()
        .iter()
        .map(|entry| {
            (
                entry["service"].as_str().unwrap_or_default().to_owned(),
                entry["action"].as_str().unwrap_or_default().to_owned(),
                entry["assumed"].as_bool().unwrap_or(false),
            )
        })
        .collect()
}

/// Makes every `action` signed with `key` fail with a permanent AWS error `code`.
pub(crate) async fn fail_action(key: &str, action: &str, code: &str) {
    let rule = json!({"key": key, "action": action, "fault": "error", "code": code,
                      "status": 400, "message": "injected by the test"});
    fault_control("POST", "/rules", &rule.to_string()).await;
}

pub(crate) async fn clear_faults(key: &str) {
    fault_control("DELETE", &format!("/rules?key={key}"), "").await;
}

//! The HyperShift workflows end to end, through a real `hcpflow server` against the
//! stack's moto (behind the fault proxy) and Kubernetes emulator: create a 3-zone
//! PublicAndPrivate cluster, scale a NodePool, destroy it — every outcome checked with
//! independent calls to moto and to the emulator, not through our own code's view.

use std::time::Duration;

use aws_sdk_ec2::types::Filter;
use hcpflow_aws::{AwsClients, AwsSettings};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::Api;
use serde_json::{json, Value};

use crate::support::{env_value, say, stack, unique, Server};

const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];

/// Prerequisites a platform team has before any cluster: the OIDC bucket, the public
/// zone of the base domain, and the management VPC with a subnet in every zone.
struct Prerequisites {
    bucket: String,
    base_domain: String,
    management_vpc: String,
    management_subnets: Vec<String>,
}

async fn prerequisites(moto: &AwsClients, tag: &str) -> Prerequisites {
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
    let vpc = moto
        .ec2
        .create_vpc()
        .cidr_block("10.200.0.0/16")
        .send()
        .await
        .unwrap();
    let management_vpc = vpc.vpc().unwrap().vpc_id().unwrap().to_owned();
    let mut management_subnets = Vec::new();
    for (index, zone) in ZONES.iter().enumerate() {
        let subnet = moto
            .ec2
            .create_subnet()
            .vpc_id(&management_vpc)
            .availability_zone(*zone)
            .cidr_block(format!("10.200.{}.0/24", index))
            .send()
            .await
            .unwrap();
        management_subnets.push(subnet.subnet().unwrap().subnet_id().unwrap().to_owned());
    }
    Prerequisites {
        bucket,
        base_domain,
        management_vpc,
        management_subnets,
    }
}

fn create_input(name: &str, pre: &Prerequisites, replicas: i32) -> Value {
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

fn hypershift(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("hypershift.openshift.io", "v1beta1", kind),
        plural,
    )
}

/// What moto and the emulator hold of `infra_id`, counted independently.
#[derive(Debug, Default, PartialEq, Eq)]
struct Holdings {
    vpcs: usize,
    private_subnets: usize,
    public_subnets: usize,
    nat_gateways: usize,
    elastic_ips: usize,
    interface_endpoint_subnets: usize,
    gateway_endpoints: usize,
    roles: usize,
    oidc_providers: usize,
    documents: usize,
    private_zones: usize,
    local_zones: usize,
    kube_objects: usize,
}

async fn holdings(
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
    }
    held.elastic_ips = moto
        .ec2
        .describe_addresses()
        .filters(owned)
        .send()
        .await
        .unwrap()
        .addresses()
        .len();
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_is_created_scaled_and_destroyed_leaving_nothing() {
    let Some(mut env) = stack("a_cluster_is_created_scaled_and_destroyed_leaving_nothing") else {
        return;
    };
    let (Ok(moto_url), Ok(_)) = (
        std::env::var("HCPFLOW_DEV_MOTO_ENDPOINT"),
        std::env::var("HCPFLOW_KUBE_URL"),
    ) else {
        assert!(
            std::env::var_os("HCPFLOW_REQUIRE_STACK").is_none(),
            "moto and the emulator must be up under make test"
        );
        say("skipping: needs the dev stack's moto and Kubernetes emulator");
        return;
    };
    let _stack = crate::support::shared().await;
    hcpflow_workers::tls::install_crypto_provider();
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
    let tag = unique("hc").to_lowercase();
    let pre = prerequisites(&moto, &tag).await;
    let prefix = unique("hcp");
    let server = Server::start(env, &prefix, &[]).await;
    let name = format!("c{}", &tag[tag.len().saturating_sub(12)..]);

    // Create: 3 zones, PublicAndPrivate, 2 replicas per NodePool.
    let create_id = format!("{prefix}-create");
    let reply = server
        .start_workflow(
            "create_hosted_cluster",
            &create_id,
            create_input(&name, &pre, 2),
        )
        .await;
    assert_eq!(reply["ok"], true, "{reply}");
    let status = server
        .wait_terminal(&create_id, Duration::from_secs(300))
        .await;
    let described = server
        .api("describe", json!({"workflow_id": create_id}))
        .await;
    assert_eq!(status, "completed", "{described}");
    let output = &described["workflow"]["output"];
    let infra_id = output["infra_id"].as_str().unwrap().to_owned();
    assert!(
        infra_id.starts_with(&format!("{name}-")) && infra_id.len() <= 27,
        "{infra_id}"
    );
    let held = holdings(&moto, &kube, &name, &infra_id, &pre).await;
    assert_eq!(
        held,
        Holdings {
            vpcs: 1,
            private_subnets: 3,
            public_subnets: 3,
            nat_gateways: 3,
            elastic_ips: 3,
            interface_endpoint_subnets: 3,
            gateway_endpoints: 1,
            roles: 8,
            oidc_providers: 1,
            documents: 2,
            private_zones: 1,
            local_zones: 1,
            // the HostedCluster, 3 NodePools, 4 Secrets
            kube_objects: 8,
        }
    );
    // The OIDC documents are the issuer's.
    let discovery = moto
        .s3
        .get_object()
        .bucket(&pre.bucket)
        .key(format!("{infra_id}/.well-known/openid-configuration"))
        .send()
        .await
        .unwrap();
    let discovery: Value =
        serde_json::from_slice(&discovery.body.collect().await.unwrap().into_bytes()).unwrap();
    assert_eq!(discovery["issuer"], output["issuer_url"]);
    let clusters: Api<DynamicObject> = Api::namespaced_with(
        kube.clone(),
        &format!("ns-{name}"),
        &hypershift("HostedCluster", "hostedclusters"),
    );
    let hc = clusters.get(&name).await.unwrap();
    let available = hc.data["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["type"] == "Available" && c["status"] == "True");
    assert!(available, "{}", hc.data["status"]);
    let pools: Api<DynamicObject> = Api::namespaced_with(
        kube.clone(),
        &format!("ns-{name}"),
        &hypershift("NodePool", "nodepools"),
    );
    for zone in ZONES {
        assert_eq!(
            pools.get(&format!("{name}-{zone}")).await.unwrap().data["status"]["replicas"],
            2
        );
    }

    // A second create of the live name is refused at once.
    let again = server
        .start_workflow(
            "create_hosted_cluster",
            &format!("{prefix}-again"),
            create_input(&name, &pre, 1),
        )
        .await;
    assert_eq!(again["ok"], false, "{again}");
    assert_eq!(again["error"]["code"], "conflict", "{again}");

    // Scale one pool to 4.
    let pool = format!("{name}-us-east-1a");
    let scale_id = format!("{prefix}-scale");
    server
        .start_workflow(
            "scale_node_pool",
            &scale_id,
            json!({"cluster": name, "node_pool": pool, "replicas": 4}),
        )
        .await;
    assert_eq!(
        server
            .wait_terminal(&scale_id, Duration::from_secs(120))
            .await,
        "completed"
    );
    assert_eq!(
        pools.get(&pool).await.unwrap().data["status"]["replicas"],
        4
    );

    // Destroy: nothing of the infra id anywhere, and the name is free again.
    let destroy_id = format!("{prefix}-destroy");
    server
        .start_workflow(
            "destroy_hosted_cluster",
            &destroy_id,
            json!({"cluster": name}),
        )
        .await;
    let status = server
        .wait_terminal(&destroy_id, Duration::from_secs(300))
        .await;
    let described = server
        .api("describe", json!({"workflow_id": destroy_id}))
        .await;
    assert_eq!(status, "completed", "{described}");
    assert_eq!(described["workflow"]["output"]["leftovers"], json!([]));
    assert_eq!(
        holdings(&moto, &kube, &name, &infra_id, &pre).await,
        Holdings::default()
    );
    let recreate = server
        .start_workflow(
            "create_hosted_cluster",
            &format!("{prefix}-recreate"),
            create_input(&name, &pre, 1),
        )
        .await;
    assert_eq!(recreate["ok"], true, "{recreate}");
    server
        .api(
            "cancel",
            json!({"workflow_id": format!("{prefix}-recreate")}),
        )
        .await;
    let _ = server
        .wait_terminal(&format!("{prefix}-recreate"), Duration::from_secs(300))
        .await;
}

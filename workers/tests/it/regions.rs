//! A create's region is the region of every call it makes, whatever the server's own
//! region: a cluster in us-west-2 made by a server configured for us-east-1 has its
//! network, and what its guest makes, in us-west-2, and its destroy leaves nothing
//! there (issue 19).

use std::time::Duration;

use aws_sdk_ec2::types::Filter;
use serde_json::{json, Value};

use crate::cluster_support::{
    cluster_name, cluster_stack, create_input, prerequisites, server_with_key, wait_for_guest,
};
use crate::histories::{aws_targets, history};
use crate::support::unique;

const REGION: &str = "us-west-2";
const ZONES: [&str; 3] = ["us-west-2a", "us-west-2b", "us-west-2c"];

async fn vpcs(ec2: &aws_sdk_ec2::Client, infra_id: &str) -> usize {
    ec2.describe_vpcs()
        .filters(
            Filter::builder()
                .name(format!("tag:kubernetes.io/cluster/{infra_id}"))
                .values("owned")
                .build(),
        )
        .send()
        .await
        .unwrap()
        .vpcs()
        .len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_is_made_and_destroyed_in_its_own_region() {
    let Some(stack) = cluster_stack("a_cluster_is_made_and_destroyed_in_its_own_region").await
    else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("region");
    let pre = prerequisites(&stack.moto, &prefix.to_lowercase()).await;
    let server = server_with_key(&stack, &prefix, &format!("{prefix}-key")).await;
    let west = stack.moto.in_region(REGION);

    let name = cluster_name("west");
    let mut input = create_input(&name, &pre, 1);
    input["region"] = json!(REGION);
    input["zones"] = json!(ZONES);
    input["endpoint_access"] = json!("Public");
    input.as_object_mut().unwrap().remove("management");
    input["node_pools"] = Value::Array(
        ZONES
            .iter()
            .map(|zone| json!({"name": format!("{name}-{zone}"), "zone": zone, "replicas": 1}))
            .collect(),
    );
    let create = format!("{prefix}-create");
    let started = server
        .start_workflow("create_hosted_cluster", &create, input)
        .await;
    assert_eq!(started["ok"], true, "{started}");
    let status = server
        .wait_terminal(&create, Duration::from_secs(400))
        .await;
    let described = server.api("describe", json!({"workflow_id": create})).await;
    assert_eq!(status, "completed", "{described}");
    let infra_id = described["workflow"]["output"]["infra_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(described["workflow"]["output"]["region"], REGION);

    // Every AWS call named the region; the network is there, not in the server's.
    let targets = aws_targets(&server, &create).await;
    assert!(targets.len() > 10, "{targets:?}");
    for target in &targets {
        assert_eq!(target["region"], REGION, "{target}");
    }
    assert_eq!(vpcs(&west.ec2, &infra_id).await, 1);
    assert_eq!(vpcs(&stack.moto.ec2, &infra_id).await, 0);
    wait_for_guest(&west, &infra_id).await;

    let destroy = format!("{prefix}-destroy");
    server
        .start_workflow("destroy_hosted_cluster", &destroy, json!({"cluster": name}))
        .await;
    let status = server
        .wait_terminal(&destroy, Duration::from_secs(400))
        .await;
    let described = server
        .api("describe", json!({"workflow_id": destroy}))
        .await;
    assert_eq!(status, "completed", "{described}");
    assert_eq!(vpcs(&west.ec2, &infra_id).await, 0);
    // The destroy's own search for leftovers looked there too.
    let searched = history(&server, &destroy)
        .await
        .into_iter()
        .find(|e| {
            e["type"] == "ActivityScheduled" && e["data"]["activity_type"] == "aws.find_leftovers"
        })
        .expect("the destroy searched for leftovers");
    assert_eq!(
        searched["data"]["input"]["aws_target"]["region"], REGION,
        "{searched}"
    );
}

/// A Private cluster in a region the hypershift-operator does not serve privately (the
/// stack's serves us-east-1) is refused before anything of it is made: since the
/// `privatelink-checked-first` patch, PrivateLink's checks come before the network.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_cluster_the_operator_cannot_serve_is_refused_before_anything_is_made() {
    let Some(stack) = cluster_stack(
        "a_private_cluster_the_operator_cannot_serve_is_refused_before_anything_is_made",
    )
    .await
    else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("pvtwest");
    let mut pre = prerequisites(&stack.moto, &prefix.to_lowercase()).await;
    // A management network in us-west-2, so that the prerequisites pass there.
    let west = stack.moto.in_region(REGION);
    let vpc = west
        .ec2
        .create_vpc()
        .cidr_block("10.203.0.0/16")
        .send()
        .await
        .unwrap();
    let vpc_id = vpc.vpc().unwrap().vpc_id().unwrap().to_owned();
    let mut subnets = Vec::new();
    for (index, zone) in ZONES.iter().enumerate() {
        let subnet = west
            .ec2
            .create_subnet()
            .vpc_id(&vpc_id)
            .availability_zone(*zone)
            .cidr_block(format!("10.203.{index}.0/24"))
            .send()
            .await
            .unwrap();
        subnets.push(subnet.subnet().unwrap().subnet_id().unwrap().to_owned());
    }
    pre.management_vpc = vpc_id.clone();
    pre.management_subnets = subnets.clone();
    let server = server_with_key(&stack, &prefix, &format!("{prefix}-key")).await;

    let name = cluster_name("pvtw");
    let mut input = create_input(&name, &pre, 1);
    input["region"] = json!(REGION);
    input["zones"] = json!(ZONES);
    input["endpoint_access"] = json!("Private");
    input["node_pools"] = Value::Array(
        ZONES
            .iter()
            .map(|zone| json!({"name": format!("{name}-{zone}"), "zone": zone, "replicas": 1}))
            .collect(),
    );
    let create = format!("{prefix}-create");
    let started = server
        .start_workflow("create_hosted_cluster", &create, input)
        .await;
    assert_eq!(started["ok"], true, "{started}");
    let status = server
        .wait_terminal(&create, Duration::from_secs(120))
        .await;
    let described = server.api("describe", json!({"workflow_id": create})).await;
    assert_eq!(status, "compensated", "{described}");
    assert!(
        described["workflow"]["error"]
            .to_string()
            .contains("only supports private clusters in region us-east-1"),
        "{described}"
    );
    let scheduled: Vec<String> = history(&server, &create)
        .await
        .iter()
        .filter(|e| e["type"] == "ActivityScheduled")
        .filter_map(|e| e["data"]["activity_type"].as_str().map(str::to_owned))
        .collect();
    assert!(
        !scheduled.iter().any(|t| t.starts_with("aws.create")),
        "something was made before the refusal: {scheduled:?}"
    );

    for subnet in &subnets {
        west.ec2
            .delete_subnet()
            .subnet_id(subnet)
            .send()
            .await
            .unwrap();
    }
    west.ec2.delete_vpc().vpc_id(&vpc_id).send().await.unwrap();
}

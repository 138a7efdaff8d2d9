//! The HyperShift workflows end to end, through a real `hcpflow server` against the
//! stack's moto (behind the fault proxy) and Kubernetes emulator: create a 3-zone
//! PublicAndPrivate cluster, scale a NodePool, destroy it, and create the name again;
//! a 3-zone Private cluster with the operators' PrivateLink, created and destroyed.

use std::time::Duration;

use kube::api::DynamicObject;
use kube::Api;
use serde_json::{json, Value};

use crate::cluster_support::{
    cluster_name, cluster_stack, create_input, holdings, hypershift, prerequisites,
    server_with_key, wait_for_guest, Holdings, ZONES,
};
use crate::support::unique;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_is_created_scaled_and_destroyed_leaving_nothing() {
    let Some(stack) =
        cluster_stack("a_cluster_is_created_scaled_and_destroyed_leaving_nothing").await
    else {
        return;
    };
    let _shared = crate::support::shared().await;
    let (moto, kube) = (&stack.moto, &stack.kube);
    let tag = unique("hc").to_lowercase();
    let pre = prerequisites(moto, &tag).await;
    let prefix = unique("hcp");
    let server = server_with_key(&stack, &prefix, &format!("{prefix}-key")).await;
    let name = cluster_name("hc");

    // Create: 3 zones, PublicAndPrivate, 2 replicas per NodePool, a tag of the user's.
    let create_id = format!("{prefix}-create");
    let mut input = create_input(&name, &pre, 2);
    input["resource_tags"] = json!({"team": "platform"});
    let reply = server
        .start_workflow("create_hosted_cluster", &create_id, input)
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
    wait_for_guest(moto, &infra_id).await;
    let held = holdings(moto, kube, &name, &infra_id, &pre).await;
    assert_eq!(held, Holdings::one_cluster());
    assert_user_tag_everywhere(moto, &infra_id, ("team", "platform")).await;
    assert_public_table_is_main(moto, output["vpc_id"].as_str().unwrap(), &infra_id).await;
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
    let given_tags = &hc.data["spec"]["platform"]["aws"]["resourceTags"];
    assert!(
        given_tags
            .as_array()
            .unwrap()
            .contains(&json!({"key": "team", "value": "platform"})),
        "{given_tags}"
    );
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
        holdings(moto, kube, &name, &infra_id, &pre).await,
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

/// A 3-zone Private cluster: the operators build PrivateLink, the create observes it per
/// zone (recorded in the ledger as theirs), and the destroy leaves nothing, theirs
/// included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_cluster_gets_the_operators_privatelink_in_every_zone() {
    let Some(stack) =
        cluster_stack("a_private_cluster_gets_the_operators_privatelink_in_every_zone").await
    else {
        return;
    };
    let _shared = crate::support::shared().await;
    let (moto, kube) = (&stack.moto, &stack.kube);
    let tag = unique("pv").to_lowercase();
    let pre = prerequisites(moto, &tag).await;
    let prefix = unique("pvt");
    let server = server_with_key(&stack, &prefix, &format!("{prefix}-key")).await;
    let name = cluster_name("pv");
    let mut input = create_input(&name, &pre, 1);
    input["endpoint_access"] = json!("Private");

    let create_id = format!("{prefix}-create");
    let reply = server
        .start_workflow("create_hosted_cluster", &create_id, input)
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
    assert_eq!(
        output["privatelink"],
        Value::Null,
        "we build none of our own"
    );
    let observed = &output["observed_privatelink"];
    assert_eq!(observed["zones"].as_array().unwrap().len(), 3, "{observed}");
    assert_eq!(
        observed["zone_ids"].as_array().unwrap().len(),
        3,
        "{observed}"
    );
    let records: Vec<&str> = observed["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r[0].as_str().unwrap())
        .collect();
    assert_eq!(
        records,
        [
            format!("api.{name}.hypershift.local"),
            format!("*.apps.{name}.hypershift.local")
        ]
    );
    wait_for_guest(moto, &infra_id).await;
    assert_eq!(
        holdings(moto, kube, &name, &infra_id, &pre).await,
        Holdings::one_cluster()
    );
    // Each zone's interface of each endpoint, the endpoints and the records: observed,
    // owned by HyperShift.
    let history = server
        .api("history", json!({"workflow_id": create_id, "limit": 1000}))
        .await;
    let observed_events: Vec<&Value> = history["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "ResourceObserved")
        .collect();
    assert_eq!(observed_events.len(), 3 * 2 + 2 + 2, "{observed_events:?}");
    assert!(observed_events
        .iter()
        .all(|e| e["data"]["owner"] == "hypershift"));

    // A volume the operator's cleanup will not know of (a guest PV made late, say):
    // the destroy deletes it by its tag, as `hypershift destroy infra` does.
    let late = moto
        .ec2
        .create_volume()
        .availability_zone("us-east-1b")
        .size(1)
        .tag_specifications(
            aws_sdk_ec2::types::TagSpecification::builder()
                .resource_type(aws_sdk_ec2::types::ResourceType::Volume)
                .tags(
                    aws_sdk_ec2::types::Tag::builder()
                        .key(format!("kubernetes.io/cluster/{infra_id}"))
                        .value("owned")
                        .build(),
                )
                .build(),
        )
        .send()
        .await
        .unwrap();
    let late = late.volume_id().unwrap().to_owned();

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
    let volumes = moto.ec2.describe_volumes().volume_ids(&late).send().await;
    assert!(
        volumes.as_ref().map_or(true, |v| v.volumes().is_empty()),
        "{volumes:?}"
    );
    assert!(described["workflow"]["output"]["undone"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t == "aws.await_privatelink_removed"));
    assert!(described["workflow"]["output"]["undone"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t == "aws.delete_guest_resources"));
    assert_eq!(
        holdings(moto, kube, &name, &infra_id, &pre).await,
        Holdings::default()
    );
}

/// Every EC2 object with the cluster's tag (hcpflow's, the operators' and the guest's),
/// every IAM role and profile of the infra id, and the private zones carry the user's
/// tag: read from moto directly.
async fn assert_user_tag_everywhere(
    moto: &hcpflow_aws::AwsClients,
    infra_id: &str,
    tag: (&str, &str),
) {
    use aws_sdk_ec2::types::Filter;
    let resources_with = |key: String, value: String| async move {
        let mut ids = std::collections::BTreeSet::new();
        let mut pages = moto
            .ec2
            .describe_tags()
            .filters(Filter::builder().name("key").values(key).build())
            .filters(Filter::builder().name("value").values(value).build())
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            for found in page.unwrap().tags() {
                ids.insert(found.resource_id().unwrap_or_default().to_owned());
            }
        }
        ids
    };
    let owned = resources_with(format!("kubernetes.io/cluster/{infra_id}"), "owned".into()).await;
    let tagged = resources_with(tag.0.into(), tag.1.into()).await;
    assert!(owned.len() > 20, "{owned:?}");
    let untagged: Vec<_> = owned.difference(&tagged).collect();
    assert!(untagged.is_empty(), "without the user's tag: {untagged:?}");

    let roles = moto.iam.list_roles().send().await.unwrap();
    let ours: Vec<_> = roles
        .roles()
        .iter()
        .filter(|role| role.role_name().starts_with(&format!("{infra_id}-")))
        .collect();
    assert_eq!(ours.len(), 8, "seven operator roles and the worker's");
    for role in ours {
        let tags = moto
            .iam
            .list_role_tags()
            .role_name(role.role_name())
            .send()
            .await
            .unwrap();
        assert!(
            tags.tags().iter().any(|t| (t.key(), t.value()) == tag),
            "{}: {:?}",
            role.role_name(),
            tags.tags()
        );
    }
    let zones = moto.route53.list_hosted_zones().send().await.unwrap();
    let mut private_zones = 0;
    for zone in zones.hosted_zones() {
        let id = zone.id().trim_start_matches("/hostedzone/");
        let tags = moto
            .route53
            .list_tags_for_resource()
            .resource_type(aws_sdk_route53::types::TagResourceType::Hostedzone)
            .resource_id(id)
            .send()
            .await
            .unwrap();
        let tags = tags
            .resource_tag_set()
            .map(|set| set.tags())
            .unwrap_or_default();
        let theirs = tags
            .iter()
            .any(|t| t.key() == Some(&format!("kubernetes.io/cluster/{infra_id}")));
        if theirs {
            private_zones += 1;
            assert!(
                tags.iter()
                    .any(|t| (t.key(), t.value()) == (Some(tag.0), Some(tag.1))),
                "{}: {tags:?}",
                zone.name()
            );
        }
    }
    assert_eq!(
        private_zones, 2,
        "the private zone and the .hypershift.local zone"
    );
}

/// The VPC's main route table is the cluster's public one (`<infra-id>-public`), as
/// `hypershift create infra aws` makes it.
async fn assert_public_table_is_main(moto: &hcpflow_aws::AwsClients, vpc_id: &str, infra_id: &str) {
    use aws_sdk_ec2::types::Filter;
    let tables = moto
        .ec2
        .describe_route_tables()
        .filters(Filter::builder().name("vpc-id").values(vpc_id).build())
        .filters(
            Filter::builder()
                .name("association.main")
                .values("true")
                .build(),
        )
        .send()
        .await
        .unwrap();
    let names: Vec<_> = tables
        .route_tables()
        .iter()
        .flat_map(|table| table.tags())
        .filter(|t| t.key() == Some("Name"))
        .filter_map(|t| t.value())
        .collect();
    assert_eq!(names, [format!("{infra_id}-public")]);
}

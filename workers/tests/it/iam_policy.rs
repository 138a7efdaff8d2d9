//! The IAM policy hcpflow's own principal needs (`deploy/aws/hcpflow-policy.json`) is
//! exactly what hosted clusters' lives call: a PublicAndPrivate cluster created, scaled
//! and destroyed, and a Private one (the operators' PrivateLink) created and destroyed,
//! side by side, signed with an access key of their own. The fault proxy logs every
//! action that key sent: each must be in the policy's lifecycle statement (the policy is
//! enough), and each action of that statement must have been sent (it is no wider). The
//! policy's other statements — recovery paths a healthy lifecycle does not take, and
//! reading pull secrets by reference — must hold nothing the lifecycle called.
//!
//! The same life checks the RBAC rules of the activity workers
//! (`deploy/kubernetes/base/rbac.yaml`) against the Kubernetes emulator's log of that
//! server's requests (its kubeconfig's token names it), both ways (`rbac.rs`).

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{json, Value};

use crate::cluster_support::{
    cluster_name, cluster_stack, create_input, kube_requests, logged_actions, prerequisites,
    server_with_key, wait_for_guest, ClusterStack,
};
use crate::support::unique;

const POLICY: &str = include_str!("../../../deploy/aws/hcpflow-policy.json");

/// The statement every hosted cluster's life needs; the others (pull secrets by
/// reference) are granted per deployment and checked by their own tests.
pub(crate) const LIFECYCLE_SID: &str = "HostedClusterLifecycle";

/// The IAM action an API operation is authorised by, where the names differ (S3's).
pub(crate) fn iam_action(service: &str, operation: &str) -> String {
    let action = match (service, operation) {
        ("s3", "HeadObject") => "GetObject",
        ("s3", "HeadBucket" | "ListObjectsV2" | "ListObjects") => "ListBucket",
        ("s3", "DeleteObjects") => "DeleteObject",
        ("s3", "ListBuckets") => "ListAllMyBuckets",
        (_, operation) => operation,
    };
    format!("{service}:{action}")
}

/// The actions of the shipped policy's statement `sid`.
pub(crate) fn statement_actions(sid: &str) -> BTreeSet<String> {
    let policy: Value = serde_json::from_str(POLICY).expect("the shipped policy is JSON");
    policy["Statement"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|statement| statement["Sid"] == sid)
        .flat_map(|statement| statement["Action"].as_array().unwrap().iter())
        .map(|action| action.as_str().unwrap().to_owned())
        .collect()
}

/// `(lifecycle statement's actions, every other statement's actions)`.
fn shipped_actions() -> (BTreeSet<String>, BTreeSet<String>) {
    let policy: Value = serde_json::from_str(POLICY).expect("the shipped policy is JSON");
    assert_eq!(policy["Version"], "2012-10-17");
    let (mut lifecycle, mut others) = (BTreeSet::new(), BTreeSet::new());
    for statement in policy["Statement"].as_array().unwrap() {
        assert_eq!(statement["Effect"], "Allow", "{statement}");
        let actions = statement["Action"].as_array().unwrap().iter();
        let actions = actions.map(|a| a.as_str().unwrap().to_owned());
        if statement["Sid"] == LIFECYCLE_SID {
            lifecycle.extend(actions);
        } else {
            others.extend(actions);
        }
    }
    assert!(!lifecycle.is_empty(), "the lifecycle statement");
    (lifecycle, others)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_iam_policy_is_exactly_what_a_clusters_life_calls() {
    let Some(stack) =
        cluster_stack("the_shipped_iam_policy_is_exactly_what_a_clusters_life_calls").await
    else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("iam");
    let key = format!("{prefix}-key");
    let pre = prerequisites(&stack.moto, &prefix.to_lowercase()).await;
    let server = server_with_key(&stack, &prefix, &key).await;

    let public = cluster_name("iampub");
    let private = cluster_name("iampvt");
    // Both live in a namespace made beforehand, as the shipped manifests make `clusters`
    // (hcpflow then leaves the namespace itself alone).
    let namespace = format!("ns-{}", cluster_name("iam"));
    make_namespace(&stack, &namespace).await;
    let mut private_input = create_input(&private, &pre, 1);
    private_input["endpoint_access"] = json!("Private");
    private_input["namespace"] = json!(namespace);
    // The public one's control plane cannot reach its guest when deleted: it leaves
    // the guest's load balancers, volume and bucket to the destroy's own cleanup.
    let mut public_input = create_input(&public, &pre, 1);
    public_input["annotations"] = json!({"hcpflow.io/emulator-guest-unreachable": "true"});
    public_input["namespace"] = json!(namespace);
    for (name, input) in [(&public, public_input), (&private, private_input)] {
        let reply = server
            .start_workflow(
                "create_hosted_cluster",
                &format!("{prefix}-create-{name}"),
                input,
            )
            .await;
        assert_eq!(reply["ok"], true, "{reply}");
    }
    for name in [&public, &private] {
        let id = format!("{prefix}-create-{name}");
        assert_eq!(
            server.wait_terminal(&id, Duration::from_secs(400)).await,
            "completed",
            "{id}"
        );
        let described = server.api("describe", json!({"workflow_id": id})).await;
        let infra_id = described["workflow"]["output"]["infra_id"]
            .as_str()
            .unwrap();
        // What the guest makes (load balancers, volumes, its registry bucket) is there
        // for the destroy to remove.
        wait_for_guest(&stack.moto, infra_id).await;
    }
    let scale = format!("{prefix}-scale");
    server
        .start_workflow(
            "scale_node_pool",
            &scale,
            json!({"cluster": public, "node_pool": format!("{public}-us-east-1a"), "replicas": 2}),
        )
        .await;
    assert_eq!(
        server.wait_terminal(&scale, Duration::from_secs(300)).await,
        "completed"
    );
    for name in [&public, &private] {
        let id = format!("{prefix}-destroy-{name}");
        server
            .start_workflow("destroy_hosted_cluster", &id, json!({"cluster": name}))
            .await;
        assert_eq!(
            server.wait_terminal(&id, Duration::from_secs(400)).await,
            "completed",
            "{id}"
        );
    }
    let called: BTreeSet<String> = logged_actions(&key)
        .await
        .iter()
        .map(|(service, operation)| iam_action(service, operation))
        .collect();
    assert!(called.len() > 20, "{called:?}");
    let (shipped, others) = shipped_actions();
    let missing: Vec<&String> = called.difference(&shipped).collect();
    let unused: Vec<&String> = shipped.difference(&called).collect();
    let misplaced: Vec<&String> = called.intersection(&others).collect();
    assert!(
        misplaced.is_empty(),
        "called by the lifecycle, yet granted as a recovery path: {misplaced:?}"
    );
    assert!(
        missing.is_empty() && unused.is_empty(),
        "the shipped policy differs from what was called.\nnot granted: {missing:?}\nnever called: {unused:?}\nwhat was called: {}",
        serde_json::to_string_pretty(&called).unwrap()
    );

    // The same life, as the management cluster's API server saw it: the shipped RBAC
    // rules allow each request, and each rule was needed.
    let requests = kube_requests(&key).await;
    assert!(requests.len() > 20, "{requests:?}");
    let (refused, unused) = crate::rbac::diff(&requests, &namespace);
    assert!(
        refused.is_empty() && unused.is_empty(),
        "deploy/kubernetes/base/rbac.yaml differs from what was asked.\nnot granted: {refused:#?}\nnever asked: {unused:#?}"
    );
}

/// A namespace made as an installer makes one (not by hcpflow's identity).
async fn make_namespace(stack: &ClusterStack, name: &str) {
    use k8s_openapi::api::core::v1::Namespace;
    let api: kube::Api<Namespace> = kube::Api::all(stack.kube.clone());
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    api.create(&Default::default(), &namespace).await.unwrap();
}

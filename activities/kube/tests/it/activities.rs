//! The activities against the emulator: each run twice has the effect of once (checked
//! with plain kube-rs calls, not through the activities' own view), each injected
//! failure gives the right error, and the deletes undo everything.

use std::collections::BTreeMap;

use hcpflow_engine::{input_purpose, ActivityFailure, Binding, Ledger, WorkflowId};
use hcpflow_hypershift::kube::secrets::{PULL_SECRET_POINTER, SIGNING_KEY_PURPOSE};
use hcpflow_hypershift::kube::INFRA_LABEL;
use hcpflow_kube::resources::{hosted_clusters, node_pools};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{DynamicObject, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{json, Value};

use crate::support::{stack, unique, Stack};

const ROLES: [&str; 7] = [
    "ingressARN",
    "imageRegistryARN",
    "storageARN",
    "networkARN",
    "kubeCloudControllerARN",
    "nodePoolManagementARN",
    "controlPlaneOperatorARN",
];

/// The workflow these activities run for: what it seals opens only for it.
fn owner() -> WorkflowId {
    WorkflowId::new("kube-activities-test").unwrap()
}

async fn run(stack: &Stack, activity: &str, input: Value) -> Result<Value, ActivityFailure> {
    stack
        .activities
        .run(activity, input, &Ledger::default(), &owner())
        .await
}

/// Runs `activity` twice on the same input: both succeed with the same result.
async fn twice(stack: &Stack, activity: &str, input: Value) -> Value {
    let ledger = Ledger::default();
    let first = stack
        .activities
        .run(activity, input.clone(), &ledger, &owner())
        .await
        .unwrap();
    let second = run(stack, activity, input).await.unwrap();
    assert_eq!(first, second, "{activity} run twice");
    first
}

/// An RSA-2048 key in PKCS#8 form, as the key generator writes it; made for these tests
/// only and used nowhere else.
const TEST_SIGNING_KEY: &str = include_str!("fixtures/test-only-signing-key.pem");

fn secrets_input(
    stack: &Stack,
    infra_id: &str,
    ns: &str,
    cluster: &str,
    pull_secret: &str,
) -> Value {
    json!({
        "infra_id": infra_id, "cluster": cluster, "namespace": ns,
        "pull_secret": stack.keyring.seal(
            &pull_secret.to_owned(),
            &Binding::new(&owner(), &input_purpose(PULL_SECRET_POINTER)),
        ).unwrap(),
        "ssh_public_key": "ssh-ed25519 AAAA test",
        "signing_key": stack.keyring.seal(
            &TEST_SIGNING_KEY.to_owned(),
            &Binding::new(&owner(), SIGNING_KEY_PURPOSE),
        ).unwrap(),
    })
}

fn hosted_cluster_input(
    infra_id: &str,
    ns: &str,
    name: &str,
    secrets: &Value,
    annotations: Value,
) -> Value {
    let roles: BTreeMap<&str, String> = ROLES
        .iter()
        .map(|r| (*r, format!("arn:aws:iam::123456789012:role/{infra_id}-{r}")))
        .collect();
    json!({
        "infra_id": infra_id, "name": name, "namespace": ns,
        "release_image": "quay.io/openshift-release-dev/ocp-release:4.17.0-x86_64",
        // Public: this emulator runs without AWS, so its operator serves no private
        // clusters (as one installed without --private-platform would refuse them).
        "region": "us-east-1", "endpoint_access": "Public",
        "base_domain": "example.com", "public_zone_id": "ZPUB", "private_zone_id": "ZPRIV",
        "issuer_url": format!("https://oidc.s3.us-east-1.amazonaws.com/{infra_id}"),
        "vpc_id": "vpc-1", "vpc_cidr": "10.0.0.0/16", "zone": "us-east-1a",
        "subnet_id": "subnet-1", "roles_ref": roles, "secrets": secrets,
        "annotations": annotations,
    })
}

fn node_pool_input(
    infra_id: &str,
    ns: &str,
    cluster: &str,
    name: &str,
    annotations: Value,
) -> Value {
    json!({
        "infra_id": infra_id, "cluster": cluster, "namespace": ns, "name": name,
        "release_image": "quay.io/openshift-release-dev/ocp-release:4.17.0-x86_64",
        "zone": "us-east-1a", "subnet_id": "subnet-1", "instance_type": "m6i.xlarge",
        "instance_profile": format!("{infra_id}-worker"), "replicas": 0,
        "annotations": annotations,
    })
}

#[tokio::test]
async fn a_control_plane_applied_twice_exists_once_and_its_deletes_leave_nothing() {
    let stack = stack().await;
    let infra_id = unique("twice");
    let ns = unique("clusters");
    let name = "demo";

    let namespace = twice(
        &stack,
        "kube.apply_namespace",
        json!({"infra_id": infra_id, "namespace": ns}),
    )
    .await;
    assert_eq!(namespace["created_for_cluster"], true);
    let namespaces: Api<Namespace> = Api::all(stack.client.clone());
    assert_eq!(
        namespaces.get(&ns).await.unwrap().labels()[INFRA_LABEL],
        infra_id
    );

    // Secrets: the same four after two runs; the etcd key generated once.
    let input = secrets_input(&stack, &infra_id, &ns, name, "{\"auths\":{}}");
    let ledger = Ledger::default();
    let secrets = stack
        .activities
        .run("kube.apply_secrets", input.clone(), &ledger, &owner())
        .await
        .unwrap();
    assert_eq!(ledger.take().len(), 4);
    let secret_api: Api<Secret> = Api::namespaced(stack.client.clone(), &ns);
    let etcd_key = |s: Secret| s.data.unwrap()["key"].0.clone();
    let key_before = etcd_key(
        secret_api
            .get(&format!("{name}-etcd-encryption-key"))
            .await
            .unwrap(),
    );
    assert_eq!(
        run(&stack, "kube.apply_secrets", input).await.unwrap(),
        secrets
    );
    let key_after = etcd_key(
        secret_api
            .get(&format!("{name}-etcd-encryption-key"))
            .await
            .unwrap(),
    );
    assert_eq!(key_before.len(), 32);
    assert_eq!(key_before, key_after, "a second apply keeps the etcd key");
    let pull = secret_api
        .get(&format!("{name}-pull-secret"))
        .await
        .unwrap();
    assert_eq!(
        pull.type_.as_deref(),
        Some("kubernetes.io/dockerconfigjson")
    );
    assert_eq!(pull.data.unwrap()[".dockerconfigjson"].0, b"{\"auths\":{}}");
    let signing = secret_api
        .get(&format!("{name}-sa-token-issuer-key"))
        .await
        .unwrap();
    // The operator parses the key as PKCS#1: the PKCS#8 key sealed in history is
    // written unwrapped, the same key in the form the operator reads.
    let written = String::from_utf8(signing.data.unwrap()["key"].0.clone()).unwrap();
    assert!(
        written.starts_with("-----BEGIN RSA PRIVATE KEY-----\n"),
        "{}",
        written.lines().next().unwrap_or_default()
    );
    assert_eq!(
        written,
        include_str!("fixtures/test-only-signing-key.pkcs1.pem"),
        "the same key as `openssl rsa -traditional` writes it"
    );
    let labelled = secret_api
        .list(&kube::api::ListParams::default().labels(&format!("{INFRA_LABEL}={infra_id}")))
        .await
        .unwrap();
    assert_eq!(labelled.items.len(), 4);

    // The HostedCluster: created once, adopted by the second run, then Available.
    let hc_input = hosted_cluster_input(&infra_id, &ns, name, &secrets, json!({}));
    let hc = twice(&stack, "kube.create_hosted_cluster", hc_input).await;
    let clusters: Api<DynamicObject> =
        Api::namespaced_with(stack.client.clone(), &ns, &hosted_clusters());
    let found = clusters.get(name).await.unwrap();
    assert_eq!(found.uid().as_deref(), hc["uid"].as_str());
    assert_eq!(
        found.data["spec"]["serviceAccountSigningKey"]["name"],
        format!("{name}-sa-token-issuer-key")
    );
    assert_eq!(found.data["spec"]["infraID"], infra_id.as_str());
    let available = twice(
        &stack,
        "kube.wait_hosted_cluster_available",
        json!({"namespace": ns, "name": name, "timeout_secs": 20}),
    )
    .await;
    assert_eq!(
        available["kubeconfig_secret"],
        format!("{name}-admin-kubeconfig")
    );
    assert!(secret_api
        .get_opt(&format!("{name}-admin-kubeconfig"))
        .await
        .unwrap()
        .is_some());

    // A NodePool applied at 0, scaled to 2 (twice), ready; applying again keeps 2.
    let pool_input = node_pool_input(&infra_id, &ns, name, "demo-us-east-1a", json!({}));
    let pool = twice(&stack, "kube.apply_node_pool", pool_input.clone()).await;
    let scale = json!({"namespace": ns, "name": "demo-us-east-1a", "replicas": 2});
    assert_eq!(
        twice(&stack, "kube.scale_node_pool", scale).await["desired"],
        2
    );
    let ready = twice(
        &stack,
        "kube.wait_node_pool_ready",
        json!({"namespace": ns, "name": "demo-us-east-1a", "replicas": 2, "timeout_secs": 20}),
    )
    .await;
    assert_eq!(ready, json!({"desired": 2, "ready": 2}));
    run(&stack, "kube.apply_node_pool", pool_input)
        .await
        .unwrap();
    let pools: Api<DynamicObject> = Api::namespaced_with(stack.client.clone(), &ns, &node_pools());
    assert_eq!(
        pools.get("demo-us-east-1a").await.unwrap().data["spec"]["replicas"],
        2
    );
    assert_eq!(
        run(
            &stack,
            "kube.get_node_pool",
            json!({"namespace": ns, "name": "demo-us-east-1a"})
        )
        .await
        .unwrap(),
        json!({"desired": 2, "ready": 2})
    );

    // The compensations, in reverse, each twice; the finalizers are waited for.
    let ledger = Ledger::default();
    stack
        .activities
        .run("kube.delete_node_pool", pool.clone(), &ledger, &owner())
        .await
        .unwrap();
    assert_eq!(ledger.take().len(), 1);
    twice(&stack, "kube.delete_node_pool", pool).await;
    twice(&stack, "kube.delete_hosted_cluster", hc).await;
    assert!(clusters.get_opt(name).await.unwrap().is_none());
    assert!(secret_api
        .get_opt(&format!("{name}-admin-kubeconfig"))
        .await
        .unwrap()
        .is_none());
    twice(&stack, "kube.delete_secrets", secrets).await;
    twice(&stack, "kube.delete_namespace", namespace).await;
    assert!(namespaces.get_opt(&ns).await.unwrap().is_none());
}

#[tokio::test]
async fn a_hosted_cluster_made_for_another_cluster_is_not_adopted() {
    let stack = stack().await;
    let ns = unique("foreign");
    run(
        &stack,
        "kube.apply_namespace",
        json!({"infra_id": "other", "namespace": ns}),
    )
    .await
    .unwrap();
    let secrets = json!({"infra_id": "mine", "namespace": ns, "pull_secret": "p", "ssh_key": "s",
                         "etcd_encryption_key": "e", "service_account_signing_key": "k"});
    let clusters: Api<DynamicObject> =
        Api::namespaced_with(stack.client.clone(), &ns, &hosted_clusters());
    // Someone else's cluster of the same name: a complete HostedCluster of their infra id.
    let their_request: hcpflow_hypershift::kube::hosted_cluster::CreateHostedCluster =
        serde_json::from_value(hosted_cluster_input(
            "someone-else",
            &ns,
            "taken",
            &secrets,
            json!({}),
        ))
        .unwrap();
    let theirs: DynamicObject =
        serde_json::from_value(hcpflow_kube::manifest::hosted_cluster(&their_request).unwrap())
            .unwrap();
    clusters
        .create(&PostParams::default(), &theirs)
        .await
        .unwrap();
    let failure = run(
        &stack,
        "kube.create_hosted_cluster",
        hosted_cluster_input("mine", &ns, "taken", &secrets, json!({})),
    )
    .await
    .unwrap_err();
    assert_eq!(failure.kind, "AlreadyExists");
    assert!(!failure.retryable);
    assert!(
        failure.message.contains("someone-else"),
        "{}",
        failure.message
    );
    assert_eq!(
        clusters.get("taken").await.unwrap().data["spec"]["infraID"],
        "someone-else"
    );
}

#[tokio::test]
async fn injected_failures_give_the_blocking_reason_a_timeout_and_a_retryable_hang() {
    let mut stack = stack().await;
    stack.activities.timing.delete_wait = std::time::Duration::from_millis(400);
    let infra_id = unique("fail");
    let ns = unique("faults");
    run(
        &stack,
        "kube.apply_namespace",
        json!({"infra_id": infra_id, "namespace": ns}),
    )
    .await
    .unwrap();
    let secrets = run(
        &stack,
        "kube.apply_secrets",
        secrets_input(&stack, &infra_id, &ns, "bad", "{}"),
    )
    .await
    .unwrap();

    // A control plane that never becomes Available: Degraded is waited out (it is normal
    // during a rollout) until the deadline, whose failure carries the Degraded message.
    let annotations = json!({"hcpflow.io/emulator-fail-available": "EtcdQuorumLost",
                             "hcpflow.io/emulator-deletion-hangs": "true"});
    let hc = run(
        &stack,
        "kube.create_hosted_cluster",
        hosted_cluster_input(&infra_id, &ns, "bad", &secrets, annotations),
    )
    .await
    .unwrap();
    let failure = run(
        &stack,
        "kube.wait_hosted_cluster_available",
        json!({"namespace": ns, "name": "bad", "timeout_secs": 6}),
    )
    .await
    .unwrap_err();
    assert_eq!(failure.kind, "Timeout");
    assert!(!failure.retryable);
    assert!(
        failure.message.contains("Degraded=True (EtcdQuorumLost)"),
        "{}",
        failure.message
    );

    // Its deletion hangs: a retryable failure naming the finalizer, and it is still there.
    let failure = run(&stack, "kube.delete_hosted_cluster", hc)
        .await
        .unwrap_err();
    assert_eq!(failure.kind, "StillTerminating");
    assert!(failure.retryable);
    assert!(
        failure
            .message
            .contains("hypershift.openshift.io/finalizer"),
        "{}",
        failure.message
    );
    // Before its delete it was asked to clean up the guest's cloud resources, as
    // `hypershift destroy cluster` asks.
    let held: Api<DynamicObject> =
        Api::namespaced_with(stack.client.clone(), &ns, &hosted_clusters());
    let held = held.get("bad").await.unwrap();
    assert_eq!(
        held.annotations()
            .get("hypershift.openshift.io/cleanup-cloud-resources")
            .map(String::as_str),
        Some("true")
    );

    // A NodePool that stalls at 1 of 3: a timeout with the Ready condition's reason.
    run(
        &stack,
        "kube.apply_node_pool",
        node_pool_input(
            &infra_id,
            &ns,
            "bad",
            "stuck",
            json!({"hcpflow.io/emulator-stall-at": "1"}),
        ),
    )
    .await
    .unwrap();
    run(
        &stack,
        "kube.scale_node_pool",
        json!({"namespace": ns, "name": "stuck", "replicas": 3}),
    )
    .await
    .unwrap();
    let failure = run(
        &stack,
        "kube.wait_node_pool_ready",
        json!({"namespace": ns, "name": "stuck", "replicas": 3, "timeout_secs": 2}),
    )
    .await
    .unwrap_err();
    assert_eq!(failure.kind, "Timeout");
    assert!(!failure.retryable);
    assert!(
        failure.message.contains("1 of 3 ready"),
        "{}",
        failure.message
    );
    assert!(
        failure.message.contains("MachinesStalled"),
        "{}",
        failure.message
    );

    // A wait on something absent, and input that is not the request, fail permanently.
    let failure = run(
        &stack,
        "kube.wait_node_pool_ready",
        json!({"namespace": ns, "name": "absent", "replicas": 1, "timeout_secs": 2}),
    )
    .await
    .unwrap_err();
    assert_eq!(
        (failure.kind.as_str(), failure.retryable),
        ("NotFound", false)
    );
    let failure = run(&stack, "kube.scale_node_pool", json!({"namespace": ns}))
        .await
        .unwrap_err();
    assert_eq!(
        (failure.kind.as_str(), failure.retryable),
        ("InvalidInput", false)
    );
}

#[tokio::test]
async fn a_namespace_that_was_there_before_is_left_and_secrets_need_the_seal_key() {
    let mut stack = stack().await;
    let ns = unique("shared");
    let namespaces: Api<Namespace> = Api::all(stack.client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
        )
        .await
        .unwrap();
    let namespace = twice(
        &stack,
        "kube.apply_namespace",
        json!({"infra_id": "guest", "namespace": ns}),
    )
    .await;
    assert_eq!(namespace["created_for_cluster"], false);
    run(&stack, "kube.delete_namespace", namespace)
        .await
        .unwrap();
    let kept = namespaces.get(&ns).await.unwrap();
    assert!(kept.metadata.deletion_timestamp.is_none());
    assert!(!kept.labels().contains_key(INFRA_LABEL));

    // A pull secret sealed for another workflow (copied from its history) does not open
    // for this one: nothing is written.
    let mut copied = secrets_input(&stack, "guest", &ns, "guest", "{}");
    let elsewhere = WorkflowId::new("create-another-cluster").unwrap();
    copied["pull_secret"] = json!(stack
        .keyring
        .seal(
            &"{\"auths\":{\"theirs\":{}}}".to_owned(),
            &Binding::new(&elsewhere, &input_purpose(PULL_SECRET_POINTER)),
        )
        .unwrap());
    let failure = run(&stack, "kube.apply_secrets", copied).await.unwrap_err();
    assert_eq!(
        (failure.kind.as_str(), failure.retryable),
        ("Unseal", false),
        "{failure}"
    );

    let input = secrets_input(&stack, "guest", &ns, "guest", "{}");
    stack.activities.seal_keys = None;
    let failure = run(&stack, "kube.apply_secrets", input).await.unwrap_err();
    assert_eq!(
        (failure.kind.as_str(), failure.retryable),
        ("NoSealKey", false)
    );
    let secret_api: Api<Secret> = Api::namespaced(stack.client.clone(), &ns);
    assert!(secret_api
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .is_empty());
}

/// The operator's private platform is read from its Deployment, as `hypershift install`
/// leaves it: without `--private-platform=AWS` (this emulator's, started without AWS)
/// refused naming the fix; with it but another region, refused naming that region.
#[tokio::test]
async fn the_private_platform_is_checked_on_the_operator_deployment() {
    use k8s_openapi::api::apps::v1::Deployment;
    use kube::api::{Patch, PatchParams};

    let stack = stack().await;
    let check = |region: &str| json!({"region": region});
    let refused = run(&stack, "kube.check_private_platform", check("us-east-1"))
        .await
        .unwrap_err();
    assert!(!refused.retryable);
    assert_eq!(refused.kind, "PrivatePlatformMissing");
    assert!(
        refused.message.contains("--private-platform=AWS")
            && refused
                .message
                .contains("hypershift install --private-platform AWS"),
        "{}",
        refused.message
    );

    let deployments: Api<Deployment> = Api::namespaced(stack.client.clone(), "hypershift");
    let mut operator = deployments.get("operator").await.unwrap();
    let pod = operator.spec.template.spec.as_mut().unwrap();
    let container = &mut pod.containers[0];
    container
        .args
        .get_or_insert_with(Vec::new)
        .push("--private-platform=AWS".into());
    container.env = Some(
        [
            ("AWS_REGION", "us-east-2"),
            ("AWS_SHARED_CREDENTIALS_FILE", "/etc/provider/credentials"),
        ]
        .iter()
        .map(|(name, value)| k8s_openapi::api::core::v1::EnvVar {
            name: (*name).into(),
            value: Some((*value).into()),
            ..Default::default()
        })
        .collect(),
    );
    operator.metadata.managed_fields = None;
    deployments
        .patch(
            "operator",
            &PatchParams::default(),
            &Patch::Merge(&operator),
        )
        .await
        .unwrap();
    let elsewhere = run(&stack, "kube.check_private_platform", check("us-east-1"))
        .await
        .unwrap_err();
    assert!(
        elsewhere
            .message
            .contains("only supports private clusters in region us-east-2"),
        "{}",
        elsewhere.message
    );
    let served = run(&stack, "kube.check_private_platform", check("us-east-2"))
        .await
        .unwrap();
    assert_eq!(served["region"], "us-east-2");
}

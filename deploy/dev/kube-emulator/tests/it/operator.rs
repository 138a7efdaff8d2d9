//! The simulated HyperShift operator: conditions, kubeconfig, node counts, deletion,
//! and the failure-injection annotations.

use serde_json::{json, Value};

use crate::support::*;

fn condition<'a>(object: &'a Value, kind: &str) -> Option<&'a Value> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

fn is(object: &Value, kind: &str, status: &str) -> bool {
    condition(object, kind).is_some_and(|c| c["status"] == status)
}

#[tokio::test]
async fn a_hosted_cluster_becomes_available_with_its_kubeconfig_and_its_deletion_waits_for_the_finalizer(
) {
    let emu = emulator().await;
    post(&emu, "/api/v1/namespaces", &namespace("clusters")).await;
    post_pull_secret(&emu, "clusters", "demo").await;
    let (status, _) = post(&emu, HC, &hosted_cluster("demo")).await;
    assert_eq!(status, 201);
    let path = format!("{HC}/demo");
    let available = until(&emu, &path, |_, hc| is(hc, "Available", "True")).await;
    for kind in [
        "ValidConfiguration",
        "EtcdAvailable",
        "KubeAPIServerAvailable",
    ] {
        assert!(is(&available, kind, "True"), "{kind}");
    }
    assert!(is(&available, "Progressing", "False") && is(&available, "Degraded", "False"));
    assert_eq!(
        available["status"]["kubeconfig"]["name"],
        "demo-admin-kubeconfig"
    );
    assert_eq!(
        available["metadata"]["finalizers"][0],
        "hypershift.openshift.io/finalizer"
    );
    let (status, secret) = get(
        &emu,
        "/api/v1/namespaces/clusters/secrets/demo-admin-kubeconfig",
    )
    .await;
    assert_eq!(status, 200);
    assert!(secret["data"]["kubeconfig"].is_string());

    let (status, _) = delete(&emu, &path).await;
    assert_eq!(status, 202, "the finalizer holds the delete");
    until(&emu, &path, |status, _| status == 404).await;
    emu.stop();
}

#[tokio::test]
async fn annotations_make_the_cluster_fail_the_pool_stall_and_the_deletion_hang() {
    let emu = emulator().await;
    post(&emu, "/api/v1/namespaces", &namespace("clusters")).await;
    let mut broken = hosted_cluster("broken");
    broken["metadata"]["annotations"] = json!({"hcpflow.io/emulator-fail-available": "EtcdQuorumLost",
                                               "hcpflow.io/emulator-deletion-hangs": "true"});
    post_pull_secret(&emu, "clusters", "broken").await;
    post(&emu, HC, &broken).await;
    let path = format!("{HC}/broken");
    let degraded = until(&emu, &path, |_, hc| {
        condition(hc, "Available").is_some_and(|c| c["reason"] == "EtcdQuorumLost")
    })
    .await;
    assert!(is(&degraded, "Degraded", "True"));
    let available = condition(&degraded, "Available").unwrap();
    assert_eq!(
        (available["status"].as_str(), available["reason"].as_str()),
        (Some("False"), Some("EtcdQuorumLost"))
    );

    let mut pool = node_pool("pool", "broken", 2);
    pool["metadata"]["annotations"] = json!({"hcpflow.io/emulator-stall-at": "1"});
    post(&emu, NP, &pool).await;
    let np = format!("{NP}/pool");
    let stalled = until(&emu, &np, |_, np| {
        np["status"]["replicas"] == 1 && is(np, "Ready", "False")
    })
    .await;
    assert_eq!(
        condition(&stalled, "Ready").unwrap()["reason"],
        "MachinesStalled"
    );
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    let (_, still) = get(&emu, &np).await;
    assert_eq!(still["status"]["replicas"], 1);

    // Without the stall it reaches its replicas, one node at a time, and is Ready.
    patch(
        &emu,
        &np,
        "application/merge-patch+json",
        r#"{"metadata":{"annotations":null},"spec":{"replicas":3}}"#,
    )
    .await;
    until(&emu, &np, |_, np| {
        np["status"]["replicas"] == 3
            && is(np, "Ready", "True")
            && is(np, "AllNodesHealthy", "True")
    })
    .await;

    delete(&emu, &path).await;
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let (status, hanging) = get(&emu, &path).await;
    assert_eq!(status, 200, "the deletion hangs");
    assert!(hanging["metadata"]["deletionTimestamp"].is_string());
    emu.stop();
}

/// What the hypershift-operator refuses, the emulator refuses with the same condition:
/// an API server published by Route without a hostname, and a signing key in PKCS#8
/// form. Once both are fixed, the cluster rolls out — Degraded while it does.
#[tokio::test]
async fn a_configuration_the_operator_refuses_is_invalid_until_fixed() {
    use base64::Engine;
    let emu = emulator().await;
    post(&emu, "/api/v1/namespaces", &namespace("clusters")).await;
    let pem = |label: &str, der: &[u8]| {
        let body = base64::engine::general_purpose::STANDARD.encode(der);
        let text = format!("-----BEGIN {label}-----\n{body}\n-----END {label}-----\n");
        base64::engine::general_purpose::STANDARD.encode(text)
    };
    let mut ints = Vec::new();
    for v in [0u8, 11, 3, 7, 5, 3, 1, 1, 2] {
        ints.extend([0x02, 1, v]);
    }
    let mut pkcs1 = vec![0x30, ints.len() as u8];
    pkcs1.extend(&ints);
    let mut info = vec![0x02, 1, 0, 0x30, 2, 0x05, 0x00, 0x04, pkcs1.len() as u8];
    info.extend(&pkcs1);
    let mut pkcs8 = vec![0x30, info.len() as u8];
    pkcs8.extend(info);
    let secrets = "/api/v1/namespaces/clusters/secrets";
    let key_secret = |der: &[u8], label: &str| {
        json!({"metadata": {"name": "strict-sa-token-issuer-key"},
               "data": {"key": pem(label, der)}})
    };
    post(&emu, secrets, &key_secret(&pkcs8, "PRIVATE KEY")).await;

    let mut hc = hosted_cluster("strict");
    hc["spec"]["platform"]["aws"]["endpointAccess"] = json!("Private");
    hc["spec"]["services"][0]["servicePublishingStrategy"] = json!({"type": "Route"});
    hc["spec"]["issuerURL"] = json!("https://oidc.s3.us-east-1.amazonaws.com/strict-abcde");
    hc["spec"]["serviceAccountSigningKey"] = json!({"name": "strict-sa-token-issuer-key"});
    post_pull_secret(&emu, "clusters", "strict").await;
    let (status, _) = post(&emu, HC, &hc).await;
    assert_eq!(status, 201);
    let path = format!("{HC}/strict");
    let refused = until(&emu, &path, |_, hc| is(hc, "ValidConfiguration", "False")).await;
    let valid = condition(&refused, "ValidConfiguration").unwrap();
    assert_eq!(valid["reason"], "InvalidConfiguration");
    assert_eq!(
        valid["message"],
        "[invalid service account signing key: cannot decode private key in secret \
         strict-sa-token-issuer-key: x509: failed to parse private key (use \
         ParsePKCS8PrivateKey instead for this key format), if serviceType is 'APIServer' \
         and publishing strategy is 'Route', then hostname must be set]"
    );
    // A Private cluster, and the operator has no private platform: unsupported too.
    let unsupported = condition(&refused, "SupportedHostedCluster").unwrap();
    assert_eq!(
        (
            &unsupported["status"],
            &unsupported["reason"],
            &unsupported["message"]
        ),
        (
            &json!("False"),
            &json!("UnsupportedHostedCluster"),
            &json!("AWS_REGION environment variable is not set for the operator")
        )
    );
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let (_, still) = get(&emu, &path).await;
    assert!(
        is(&still, "Available", "False"),
        "nothing rolls out: {still}"
    );

    put(
        &emu,
        &format!("{secrets}/strict-sa-token-issuer-key"),
        &key_secret(&pkcs1, "RSA PRIVATE KEY"),
    )
    .await;
    let services = json!({"spec": {"services": [
        {"service": "APIServer", "servicePublishingStrategy": {"type": "LoadBalancer"}},
        {"service": "OAuthServer", "servicePublishingStrategy": {"type": "Route"}},
        {"service": "Konnectivity", "servicePublishingStrategy": {"type": "Route"}},
        {"service": "Ignition", "servicePublishingStrategy": {"type": "Route"}},
    ]}});
    let (status, _) = patch(
        &emu,
        &path,
        "application/merge-patch+json",
        &services.to_string(),
    )
    .await;
    assert_eq!(status, 200);
    // A valid configuration, but still not supported: blocked for good.
    let blocked = until(&emu, &path, |_, hc| is(hc, "ValidConfiguration", "True")).await;
    assert!(is(&blocked, "SupportedHostedCluster", "False"), "{blocked}");
    let available = condition(&blocked, "Available").unwrap();
    assert_eq!(
        available["message"],
        "SupportedHostedCluster condition is false: AWS_REGION environment variable is not set for the operator"
    );
    assert_eq!(
        condition(&blocked, "Progressing").unwrap()["reason"],
        "Blocked"
    );
    tokio::time::sleep(std::time::Duration::from_millis(1000)).await;
    let (_, still) = get(&emu, &path).await;
    assert!(is(&still, "Available", "False"), "{still}");
    assert!(
        !is(&still, "Degraded", "True"),
        "nothing rolls out: {still}"
    );

    // Public needs no private platform.
    let public = json!({"spec": {"platform": {"aws": {"endpointAccess": "Public"}}}});
    let (status, _) = patch(
        &emu,
        &path,
        "application/merge-patch+json",
        &public.to_string(),
    )
    .await;
    assert_eq!(status, 200);
    let rolling = until(&emu, &path, |_, hc| is(hc, "Degraded", "True")).await;
    assert!(is(&rolling, "SupportedHostedCluster", "True"), "{rolling}");
    assert!(is(&rolling, "ValidConfiguration", "True"), "{rolling}");
    assert!(is(&rolling, "Available", "False"));
    let available = until(&emu, &path, |_, hc| is(hc, "Available", "True")).await;
    assert!(is(&available, "Degraded", "False"), "{available}");
    emu.stop();
}

#[tokio::test]
async fn an_operator_with_a_private_platform_supports_private_clusters_of_its_region() {
    use hcpflow_kube_emulator::server::Install;
    let emu = emulator_installed(Install {
        private_region: Some("us-east-1".into()),
        cloud: None,
    })
    .await;
    let (_, operator) = get(
        &emu,
        "/apis/apps/v1/namespaces/hypershift/deployments/operator",
    )
    .await;
    let container = &operator["spec"]["template"]["spec"]["containers"][0];
    assert!(container["args"]
        .as_array()
        .unwrap()
        .contains(&json!("--private-platform=AWS")));
    assert!(container["env"]
        .as_array()
        .unwrap()
        .contains(&json!({"name": "AWS_REGION", "value": "us-east-1"})));
    let (status, _) = get(
        &emu,
        "/api/v1/namespaces/hypershift/secrets/hypershift-operator-aws-credentials",
    )
    .await;
    assert_eq!(status, 200);

    post(&emu, "/api/v1/namespaces", &namespace("clusters")).await;
    let mut hc = hosted_cluster("inside");
    hc["spec"]["platform"]["aws"]["endpointAccess"] = json!("PublicAndPrivate");
    post_pull_secret(&emu, "clusters", "inside").await;
    post(&emu, HC, &hc).await;
    let mut elsewhere = hosted_cluster("elsewhere");
    elsewhere["spec"]["platform"]["aws"]["endpointAccess"] = json!("Private");
    elsewhere["spec"]["platform"]["aws"]["region"] = json!("eu-west-1");
    post_pull_secret(&emu, "clusters", "elsewhere").await;
    post(&emu, HC, &elsewhere).await;

    let available = until(&emu, &format!("{HC}/inside"), |_, hc| {
        is(hc, "Available", "True")
    })
    .await;
    assert!(is(&available, "SupportedHostedCluster", "True"));
    // The cloud side is off: none of its conditions.
    assert!(condition(&available, "AWSEndpointAvailable").is_none());
    let refused = until(&emu, &format!("{HC}/elsewhere"), |_, hc| {
        is(hc, "SupportedHostedCluster", "False")
    })
    .await;
    assert_eq!(
        condition(&refused, "SupportedHostedCluster").unwrap()["message"],
        "operator only supports private clusters in region us-east-1"
    );
    emu.stop();
}

/// A NodePool makes no machines until its HostedCluster has a default security group
/// (the real NodePool controller's `AWSSecurityGroupAvailable`), and one whose
/// HostedCluster does not exist is left alone. Without a cloud side the operator stands
/// in for the control plane: `ValidAWSIdentityProvider` and a made-up default security
/// group once the API server is up; a blocked HostedCluster has neither.
#[tokio::test]
async fn node_pools_wait_for_the_default_security_group() {
    let emu = emulator().await;
    post(&emu, "/api/v1/namespaces", &namespace("clusters")).await;
    // The pool first: no HostedCluster, nothing happens to it.
    let (status, _) = post(&emu, NP, &node_pool("sg-pool", "sg", 2)).await;
    assert_eq!(status, 201);
    let np = format!("{NP}/sg-pool");
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let (_, alone) = get(&emu, &np).await;
    assert!(alone["status"]["replicas"].is_null(), "{alone}");
    assert!(
        condition(&alone, "AWSSecurityGroupAvailable").is_none(),
        "{alone}"
    );

    // A HostedCluster the operator refuses: no control plane, no security group.
    let mut hc = hosted_cluster("sg");
    hc["spec"]["services"][0]["servicePublishingStrategy"] = json!({"type": "Route"});
    post_pull_secret(&emu, "clusters", "sg").await;
    post(&emu, HC, &hc).await;
    let path = format!("{HC}/sg");
    let refused = until(&emu, &path, |_, hc| {
        is(hc, "ValidConfiguration", "False") && is(hc, "ValidAWSIdentityProvider", "Unknown")
    })
    .await;
    let identity = condition(&refused, "ValidAWSIdentityProvider").unwrap();
    assert_eq!(
        (&identity["reason"], &identity["message"]),
        (&json!("StatusUnknown"), &json!(""))
    );
    let waiting = until(&emu, &np, |_, np| {
        is(np, "AWSSecurityGroupAvailable", "False")
    })
    .await;
    let group = condition(&waiting, "AWSSecurityGroupAvailable").unwrap();
    assert_eq!(
        (&group["reason"], &group["message"]),
        (
            &json!("DefaultSGNotReady"),
            &json!("Waiting for AWS default security group to be created for hosted cluster")
        )
    );
    let machines = condition(&waiting, "AllMachinesReady").unwrap();
    assert_eq!(
        (
            &machines["status"],
            &machines["reason"],
            &machines["message"]
        ),
        (
            &json!("False"),
            &json!("NotFound"),
            &json!("No Machines are created")
        )
    );
    assert!(is(&waiting, "AllNodesHealthy", "False"), "{waiting}");
    assert!(
        condition(&waiting, "Ready").is_none(),
        "no MachineDeployment: {waiting}"
    );
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let (_, still) = get(&emu, &np).await;
    assert_eq!(still["status"]["replicas"], 0, "{still}");
    let (_, cluster) = get(&emu, &path).await;
    assert!(
        cluster["status"]["platform"].is_null(),
        "no default security group: {cluster}"
    );
    assert!(condition(&cluster, "AWSDefaultSecurityGroupCreated").is_none());

    // Fixed: the control plane comes up, its identity and security group with it, and
    // the pool gets its nodes.
    let fixed = json!({"spec": {"services": [
        {"service": "APIServer", "servicePublishingStrategy": {"type": "LoadBalancer"}},
        {"service": "OAuthServer", "servicePublishingStrategy": {"type": "Route"}},
        {"service": "Konnectivity", "servicePublishingStrategy": {"type": "Route"}},
        {"service": "Ignition", "servicePublishingStrategy": {"type": "Route"}},
    ]}});
    patch(
        &emu,
        &path,
        "application/merge-patch+json",
        &fixed.to_string(),
    )
    .await;
    let available = until(&emu, &path, |_, hc| is(hc, "Available", "True")).await;
    let identity = condition(&available, "ValidAWSIdentityProvider").unwrap();
    assert_eq!(
        (
            &identity["status"],
            &identity["reason"],
            &identity["message"]
        ),
        (&json!("True"), &json!("AsExpected"), &json!("All is well"))
    );
    assert!(is(&available, "AWSDefaultSecurityGroupCreated", "True"));
    let id = available["status"]["platform"]["aws"]["defaultWorkerSecurityGroupID"]
        .as_str()
        .unwrap();
    assert!(id.starts_with("sg-") && id.len() == 20, "{id}");
    let ready = until(&emu, &np, |_, np| {
        np["status"]["replicas"] == 2 && is(np, "Ready", "True")
    })
    .await;
    let group = condition(&ready, "AWSSecurityGroupAvailable").unwrap();
    assert_eq!(
        (&group["status"], &group["reason"], &group["message"]),
        (
            &json!("True"),
            &json!("AsExpected"),
            &json!("NodePool has a default security group")
        )
    );
    let (_, again) = get(&emu, &path).await;
    assert_eq!(
        again["status"]["platform"]["aws"]["defaultWorkerSecurityGroupID"], id,
        "the same group"
    );
    emu.stop();
}

/// The hypershift-operator reads the HostedCluster's pull secret (`spec.pullSecret`, in
/// the HostedCluster's namespace) before it looks up the release: while the Secret is
/// missing or has no `.dockerconfigjson`, `ValidReleaseImage` is False `SecretNotFound`
/// with `GetPullSecretBytes`' message, Progressing is blocked by it, the reconciliation
/// fails, and no control plane rolls out. Once the Secret is there the rollout
/// proceeds; a control plane that runs keeps running when the Secret goes away.
#[tokio::test]
async fn a_hosted_cluster_waits_for_its_pull_secret() {
    let emu = emulator().await;
    post(&emu, "/api/v1/namespaces", &namespace("clusters")).await;
    let (status, _) = post(&emu, HC, &hosted_cluster("nopull")).await;
    assert_eq!(status, 201);
    let path = format!("{HC}/nopull");
    let secrets = "/api/v1/namespaces/clusters/secrets";
    let of = |object: &Value, kind: &str| {
        let c = condition(object, kind).unwrap_or_else(|| panic!("no {kind}: {object}"));
        (
            c["status"].as_str().unwrap().to_owned(),
            c["reason"].as_str().unwrap().to_owned(),
            c["message"].as_str().unwrap().to_owned(),
        )
    };
    let triple = |status: &str, reason: &str, message: &str| {
        (status.to_owned(), reason.to_owned(), message.to_owned())
    };
    let blocked_operations = "blocked operations: [KubeconfigAndPasswordSync, \
        MonitoringAndCLISecrets, OperatorDeployments, PlatformOIDCAndCSI, \
        PublicEndpointExposed, RBACAndPolicies]";

    let missing = r#"pull secret unavailable: secrets "nopull-pull-secret" not found"#;
    let blocked = until(&emu, &path, |_, hc| is(hc, "ValidReleaseImage", "False")).await;
    assert_eq!(
        of(&blocked, "ValidReleaseImage"),
        triple("False", "SecretNotFound", missing)
    );
    assert_eq!(
        of(&blocked, "Progressing"),
        triple("False", "Blocked", missing)
    );
    assert_eq!(
        of(&blocked, "Available"),
        triple("False", "WaitingForAvailable", missing)
    );
    assert_eq!(
        of(&blocked, "Degraded"),
        triple(
            "Unknown",
            "StatusUnknown",
            "The hosted control plane is not found"
        )
    );
    assert_eq!(
        of(&blocked, "ReconciliationSucceeded"),
        triple(
            "False",
            "ReconciliationError",
            &format!(
                "critical error: [failed to get pull secret: {missing}, failed to get pull \
                 secret nopull-pull-secret: secrets \"nopull-pull-secret\" not found, release \
                 image is not available]; {blocked_operations}"
            )
        )
    );
    assert!(is(&blocked, "ValidConfiguration", "True"), "{blocked}");
    assert!(is(&blocked, "SupportedHostedCluster", "True"), "{blocked}");
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    let (_, still) = get(&emu, &path).await;
    assert!(!is(&still, "Available", "True"), "{still}");
    assert!(!is(&still, "KubeAPIServerAvailable", "True"), "{still}");
    assert!(
        !is(&still, "Degraded", "True"),
        "nothing rolls out: {still}"
    );
    assert!(still["status"]["kubeconfig"].is_null(), "{still}");
    let (status, _) = get(&emu, &format!("{secrets}/nopull-admin-kubeconfig")).await;
    assert_eq!(status, 404);

    // A Secret of that name without `.dockerconfigjson`: refused all the same.
    let (status, body) = post(
        &emu,
        secrets,
        &json!({"metadata": {"name": "nopull-pull-secret"}, "data": {"config.json": "e30="}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let keyless =
        r#"pull secret unavailable: expected .dockerconfigjson key in secret "nopull-pull-secret""#;
    let blocked = until(&emu, &path, |_, hc| {
        condition(hc, "ValidReleaseImage").is_some_and(|c| c["message"] == keyless)
    })
    .await;
    assert_eq!(
        of(&blocked, "ValidReleaseImage"),
        triple("False", "SecretNotFound", keyless)
    );
    assert_eq!(
        of(&blocked, "ReconciliationSucceeded").2,
        format!(
            "critical error: [failed to get pull secret: {keyless}, hostedcluster pull secret \
             \"nopull-pull-secret\" must have a .dockerconfigjson key, release image is not \
             available]; {blocked_operations}"
        )
    );
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let (_, still) = get(&emu, &path).await;
    assert!(!is(&still, "Available", "True"), "{still}");

    // The pull secret as it should be: the control plane rolls out.
    delete(&emu, &format!("{secrets}/nopull-pull-secret")).await;
    post_pull_secret(&emu, "clusters", "nopull").await;
    let available = until(&emu, &path, |_, hc| is(hc, "Available", "True")).await;
    assert_eq!(
        of(&available, "ValidReleaseImage"),
        triple("True", "AsExpected", "Release image is valid")
    );
    assert!(
        is(&available, "ReconciliationSucceeded", "True"),
        "{available}"
    );
    assert!(is(&available, "Degraded", "False"), "{available}");
    let (status, _) = get(&emu, &format!("{secrets}/nopull-admin-kubeconfig")).await;
    assert_eq!(status, 200);

    // Gone again: the operator says so, and the control plane it made runs on.
    delete(&emu, &format!("{secrets}/nopull-pull-secret")).await;
    let degraded = until(&emu, &path, |_, hc| is(hc, "ValidReleaseImage", "False")).await;
    assert_eq!(
        of(&degraded, "ValidReleaseImage"),
        triple("False", "SecretNotFound", missing)
    );
    assert_eq!(
        of(&degraded, "Progressing"),
        triple("False", "Blocked", missing)
    );
    assert!(is(&degraded, "Available", "True"), "{degraded}");
    assert!(
        is(&degraded, "ReconciliationSucceeded", "False"),
        "{degraded}"
    );
    emu.stop();
}

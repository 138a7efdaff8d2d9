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
    post(&emu, HC, &broken).await;
    let path = format!("{HC}/broken");
    let degraded = until(&emu, &path, |_, hc| is(hc, "Degraded", "True")).await;
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

//! A create that fails in any phase rolls back everything it made: the status is
//! `compensated`, moto and the emulator hold nothing of the cluster, and the name is
//! free again. AWS phases fail through the fault proxy, the control plane and the
//! NodePools through the emulator's annotations, PrivateLink by a management cluster
//! that does not cover a zone and by an operator role that may not make endpoints.

use std::time::Duration;

use serde_json::json;

use crate::cluster_support::{
    clear_faults, cluster_name, cluster_stack, create_input, fail_action, holdings, prerequisites,
    server_with_key, ClusterStack, Holdings, Prerequisites,
};
use crate::support::{unique, Server};

async fn create_and_expect_rollback(
    stack: &ClusterStack,
    server: &Server,
    pre: &Prerequisites,
    case: &str,
    mut input: serde_json::Value,
) -> String {
    let name = input["name"].as_str().unwrap().to_owned();
    input["node_pools"] = json!([input["node_pools"][0].clone()]);
    let id = format!("{}-{case}", server.prefix);
    let reply = server
        .start_workflow("create_hosted_cluster", &id, input)
        .await;
    assert_eq!(reply["ok"], true, "{case}: {reply}");
    let status = server.wait_terminal(&id, Duration::from_secs(300)).await;
    let described = server.api("describe", json!({"workflow_id": id})).await;
    assert_eq!(status, "compensated", "{case}: {described}");
    let error = described["workflow"]["error"].to_string();
    let infra_id = {
        let history = server
            .api("history", json!({"workflow_id": id, "limit": 20}))
            .await;
        history["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["data"]["activity_type"] == "registry.register_cluster")
            .map(|e| e["data"]["input"]["infra_id"].as_str().unwrap().to_owned())
            .unwrap_or_else(|| panic!("{case}: no registration in {history}"))
    };
    assert_eq!(
        holdings(&stack.moto, &stack.kube, &name, &infra_id, pre).await,
        Holdings::default(),
        "{case} ({error}) left something"
    );
    println!("{case}: compensated after {error}");
    error
}

/// As soon as the create has written the control-plane-operator role, an administrator
/// denies it `ec2:CreateVpcEndpoint` (an inline policy of its own, as a guardrail
/// would): the operator then cannot make the PrivateLink endpoint.
async fn deny_endpoints_to_the_operator(stack: &ClusterStack, infra_id: &str) {
    let role = format!("{infra_id}-control-plane-operator");
    let deny = json!({"Version": "2012-10-17", "Statement": [
        {"Effect": "Deny", "Action": "ec2:CreateVpcEndpoint", "Resource": "*"}]});
    for _ in 0..3000 {
        let policies = stack
            .moto
            .iam
            .list_role_policies()
            .role_name(&role)
            .send()
            .await;
        if policies.is_ok_and(|p| !p.policy_names().is_empty()) {
            stack
                .moto
                .iam
                .put_role_policy()
                .role_name(&role)
                .policy_name("deny-vpc-endpoints")
                .policy_document(deny.to_string())
                .send()
                .await
                .unwrap();
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the create never made {role}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_in_any_phase_rolls_back_everything() {
    let Some(stack) = cluster_stack("a_failure_in_any_phase_rolls_back_everything").await else {
        return;
    };
    // Seven creates whose failures are deadlines on the operator's conditions: on a
    // machine shared with the scale-out and failover tests those deadlines were missed
    // for load, not for a fault; the test takes the stack alone.
    let _alone = crate::support::exclusive().await;
    let tag = unique("rb").to_lowercase();
    let pre = prerequisites(&stack.moto, &tag).await;

    // AWS phases, one after the other on one server whose calls a rule fails.
    let prefix = unique("rba");
    let key = format!("{prefix}-key");
    let aws_server = server_with_key(&stack, &prefix, &key).await;
    for (case, action, code) in [
        ("network", "CreateNatGateway", "InvalidParameterValue"),
        ("oidc", "CreateOpenIDConnectProvider", "InvalidInput"),
        ("iam", "CreateInstanceProfile", "InvalidInput"),
    ] {
        fail_action(&key, action, code).await;
        let input = create_input(&cluster_name(case), &pre, 1);
        create_and_expect_rollback(&stack, &aws_server, &pre, case, input).await;
        clear_faults(&key).await;
    }

    // Kubernetes phases, at once on another server.
    let prefix = unique("rbk");
    let kube_server = server_with_key(&stack, &prefix, &format!("{prefix}-key")).await;
    let mut control_plane = create_input(&cluster_name("cp"), &pre, 1);
    control_plane["annotations"] = json!({"hcpflow.io/emulator-fail-available": "EtcdQuorumLost"});
    // Degraded is waited out until the deadline: keep it short.
    control_plane["control_plane_timeout_secs"] = json!(5);
    let mut node_pool = create_input(&cluster_name("np"), &pre, 2);
    node_pool["node_pools"][0]["annotations"] = json!({"hcpflow.io/emulator-stall-at": "1"});
    node_pool["node_pool_timeout_secs"] = json!(3);
    // The management cluster has no subnet in the third zone: refused before anything
    // of the control plane is made.
    let mut uncovered = create_input(&cluster_name("pl"), &pre, 1);
    uncovered["management"]["subnet_ids"] = json!(pre.management_subnets[..2]);
    // The operator may not create endpoints: its condition says so, the wait reports it.
    let mut denied = create_input(&cluster_name("op"), &pre, 1);
    let denied_infra_id = format!("{}-dny", denied["name"].as_str().unwrap());
    denied["infra_id"] = json!(denied_infra_id);
    // The wait runs to its deadline (a refusal may heal) and reports the condition as
    // it last saw it: long enough for the operator to have tried, even on a loaded box.
    denied["control_plane_timeout_secs"] = json!(60);
    let (_, _, uncovered_error, (denied_error, ())) = tokio::join!(
        create_and_expect_rollback(&stack, &kube_server, &pre, "control-plane", control_plane),
        create_and_expect_rollback(&stack, &kube_server, &pre, "node-pool", node_pool),
        create_and_expect_rollback(&stack, &kube_server, &pre, "privatelink-zones", uncovered),
        async {
            tokio::join!(
                create_and_expect_rollback(&stack, &kube_server, &pre, "privatelink", denied),
                deny_endpoints_to_the_operator(&stack, &denied_infra_id),
            )
        },
    );
    assert!(
        uncovered_error.contains("ZoneNotCovered") && uncovered_error.contains("us-east-1c"),
        "{uncovered_error}"
    );
    assert!(
        denied_error.contains("AWSEndpointAvailable")
            && denied_error.contains("UnauthorizedOperation"),
        "the operator's condition is reported: {denied_error}"
    );
}

/// A cancel at random points of a create — including while a create call runs, which
/// the cancel waits for — ends `cancelled` with nothing of the cluster left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_mid_create_undoes_everything() {
    use rand::Rng;
    let Some(stack) = cluster_stack("a_cancel_mid_create_undoes_everything").await else {
        return;
    };
    let _shared = crate::support::shared().await;
    let tag = unique("cx").to_lowercase();
    let pre = prerequisites(&stack.moto, &tag).await;
    let prefix = unique("cxl");
    let server = server_with_key(&stack, &prefix, &format!("{prefix}-key")).await;
    for round in 0..2 {
        let name = cluster_name(&format!("cx{round}"));
        let id = format!("{prefix}-{round}");
        let reply = server
            .start_workflow("create_hosted_cluster", &id, create_input(&name, &pre, 1))
            .await;
        assert_eq!(reply["ok"], true, "{reply}");
        let at = rand::thread_rng().gen_range(8..150);
        println!("round {round}: cancel after {at} events");
        loop {
            let history = server
                .api("history", json!({"workflow_id": id, "limit": 1000}))
                .await;
            if history["events"].as_array().map_or(0, Vec::len) >= at {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let reply = server
            .api("cancel", json!({"workflow_id": id, "reason": "test"}))
            .await;
        assert_eq!(reply["ok"], true, "{reply}");
        let status = server.wait_terminal(&id, Duration::from_secs(300)).await;
        let described = server.api("describe", json!({"workflow_id": id})).await;
        assert_eq!(status, "cancelled", "cancel after {at} events: {described}");
        let history = server
            .api("history", json!({"workflow_id": id, "limit": 30}))
            .await;
        let infra_id = history["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["data"]["activity_type"] == "registry.register_cluster")
            .map(|e| e["data"]["input"]["infra_id"].as_str().unwrap().to_owned())
            .unwrap();
        assert_eq!(
            holdings(&stack.moto, &stack.kube, &name, &infra_id, &pre).await,
            Holdings::default(),
            "a cancel after {at} events left something"
        );
    }
}

//! Two clusters created at once by one server, which is killed with SIGKILL in the
//! middle of the creates and again in the middle of the destroys: after each restart
//! both workflows finish, and moto and the emulator hold exactly one of everything
//! (nothing duplicated), then nothing (nothing leaked).

use std::time::Duration;

use serde_json::json;

use crate::cluster_support::{
    cluster_name, cluster_stack, create_input, holdings, prerequisites, server_with_key, Holdings,
};
use crate::support::{unique, Server};

/// Waits until `id` has at least `events` events, so a kill lands mid-run.
async fn wait_for_progress(server: &Server, id: &str, events: usize) {
    for _ in 0..600 {
        let history = server
            .api("history", json!({"workflow_id": id, "limit": 1000}))
            .await;
        if history["events"].as_array().map_or(0, Vec::len) >= events {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{id} made no progress");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clusters_survive_kill_9_during_create_and_destroy() {
    let Some(stack) = cluster_stack("two_clusters_survive_kill_9_during_create_and_destroy").await
    else {
        return;
    };
    let _shared = crate::support::shared().await;
    let tag = unique("kc").to_lowercase();
    let pre = prerequisites(&stack.moto, &tag).await;
    let prefix = unique("kcs");
    let mut server = server_with_key(&stack, &prefix, &format!("{prefix}-key")).await;
    let names = [cluster_name("ka"), cluster_name("kb")];

    let creates: Vec<String> = names
        .iter()
        .map(|n| format!("{prefix}-{n}-create"))
        .collect();
    for (name, id) in names.iter().zip(&creates) {
        let reply = server
            .start_workflow("create_hosted_cluster", id, create_input(name, &pre, 1))
            .await;
        assert_eq!(reply["ok"], true, "{reply}");
    }
    // Killed in the middle of the network phase of the first.
    wait_for_progress(&server, &creates[0], 30).await;
    server.kill9().await;
    server.restart().await;
    let mut infra_ids = Vec::new();
    for id in &creates {
        let status = server.wait_terminal(id, Duration::from_secs(300)).await;
        let described = server.api("describe", json!({"workflow_id": id})).await;
        assert_eq!(status, "completed", "{described}");
        infra_ids.push(
            described["workflow"]["output"]["infra_id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    let one_of_everything = Holdings::one_cluster();
    for (name, infra_id) in names.iter().zip(&infra_ids) {
        assert_eq!(
            holdings(&stack.moto, &stack.kube, name, infra_id, &pre).await,
            one_of_everything,
            "{name} after a kill -9 during its create"
        );
    }

    let destroys: Vec<String> = names
        .iter()
        .map(|n| format!("{prefix}-{n}-destroy"))
        .collect();
    for (name, id) in names.iter().zip(&destroys) {
        server
            .start_workflow("destroy_hosted_cluster", id, json!({"cluster": name}))
            .await;
    }
    wait_for_progress(&server, &destroys[1], 12).await;
    server.kill9().await;
    server.restart().await;
    for id in &destroys {
        let status = server.wait_terminal(id, Duration::from_secs(300)).await;
        let described = server.api("describe", json!({"workflow_id": id})).await;
        assert_eq!(status, "completed", "{described}");
    }
    for (name, infra_id) in names.iter().zip(&infra_ids) {
        assert_eq!(
            holdings(&stack.moto, &stack.kube, name, infra_id, &pre).await,
            Holdings::default(),
            "{name} after a kill -9 during its destroy"
        );
    }
}

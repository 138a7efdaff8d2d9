//! Two clusters created at once by one server, which is killed with SIGKILL twice at
//! random points of the creates and twice at random points of the destroys: after the
//! restarts both workflows finish, and moto and the emulator hold exactly one of
//! everything (nothing duplicated), then nothing (nothing leaked).
//!
//! The points are event counts of the first workflow, drawn anew each run and printed;
//! `HCPFLOW_CRASH_POINTS=c1,c2/d1,d2` replays a run's points.

use std::time::Duration;

use serde_json::json;

use crate::cluster_support::{
    cluster_name, cluster_stack, create_input, holdings, prerequisites, server_with_key,
    wait_for_guest, Holdings,
};
use crate::support::{say, unique, Server};

/// Event counts of a 3-zone create (213 events) and destroy (145) to kill at, two each,
/// ascending: random, or `HCPFLOW_CRASH_POINTS`.
fn kill_points() -> ([usize; 2], [usize; 2]) {
    use rand::Rng;
    let parse = |part: &str| -> Option<[usize; 2]> {
        let mut points = part.split(',').map(|p| p.trim().parse::<usize>().ok());
        let mut pair = [points.next()??, points.next()??];
        pair.sort_unstable();
        Some(pair)
    };
    if let Ok(given) = std::env::var("HCPFLOW_CRASH_POINTS") {
        if let Some((create, destroy)) = given.split_once('/') {
            if let (Some(create), Some(destroy)) = (parse(create), parse(destroy)) {
                return (create, destroy);
            }
        }
        panic!("HCPFLOW_CRASH_POINTS={given:?}: expected c1,c2/d1,d2");
    }
    let mut rng = rand::thread_rng();
    let mut draw = |most: usize| {
        let mut pair = [rng.gen_range(3..=most), rng.gen_range(3..=most)];
        pair.sort_unstable();
        pair
    };
    (draw(200), draw(135))
}

/// Kills the server once `id` has each number of events in `points`, restarting it
/// after each kill.
async fn kill_at(server: &mut Server, id: &str, points: [usize; 2]) {
    for events in points {
        wait_for_progress(server, id, events).await;
        server.kill9().await;
        server.restart().await;
    }
}

/// Waits until `id` has at least `events` events (or has ended), so a kill lands
/// mid-run.
pub(crate) async fn wait_for_progress(server: &Server, id: &str, events: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(240);
    while tokio::time::Instant::now() < deadline {
        let history = server
            .api("history", json!({"workflow_id": id, "limit": 1000}))
            .await;
        let recorded = history["events"].as_array().map_or(0, Vec::len);
        let ended = history["events"]
            .as_array()
            .and_then(|e| e.last())
            .and_then(|e| e["type"].as_str())
            .is_some_and(|t| t.starts_with("Workflow") && t != "WorkflowStarted");
        if recorded >= events || ended {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{id} did not reach {events} events");
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
    let (create_points, destroy_points) = kill_points();
    say(&format!(
        "kill -9 points: HCPFLOW_CRASH_POINTS={},{}/{},{}",
        create_points[0], create_points[1], destroy_points[0], destroy_points[1]
    ));
    kill_at(&mut server, &creates[0], create_points).await;
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
        wait_for_guest(&stack.moto, infra_id).await;
        assert_eq!(
            holdings(&stack.moto, &stack.kube, name, infra_id, &pre).await,
            one_of_everything,
            "{name} after kill -9 at {create_points:?} events of a create"
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
    kill_at(&mut server, &destroys[0], destroy_points).await;
    for id in &destroys {
        let status = server.wait_terminal(id, Duration::from_secs(300)).await;
        let described = server.api("describe", json!({"workflow_id": id})).await;
        assert_eq!(status, "completed", "{described}");
    }
    for (name, infra_id) in names.iter().zip(&infra_ids) {
        assert_eq!(
            holdings(&stack.moto, &stack.kube, name, infra_id, &pre).await,
            Holdings::default(),
            "{name} after kill -9 at {destroy_points:?} events of a destroy"
        );
    }
}

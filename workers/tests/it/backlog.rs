//! The local backlog: with every activity slot taken, a step keeps the activity it
//! schedules for its own process (claimed in its commit) and it waits for a slot — or,
//! after half its claim's lease, goes through NATS. Nothing is run twice or lost, and a
//! `kill -9` with tasks waiting loses none of them.

use std::time::Duration;

use serde_json::json;

use crate::scale_out::assert_each_step_recorded_once;
use crate::support::{free_port, http_get, shared, stack, unique, Server};

/// A counter's value in the server's metrics.
async fn counter(addr: &str, name: &str) -> u64 {
    let text = http_get(addr, "/metrics").await;
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} not in the metrics:\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_waits_for_a_slot_or_goes_through_nats_and_runs_once() {
    let Some(env) = stack("a_task_waits_for_a_slot_or_goes_through_nats_and_runs_once") else {
        return;
    };
    let _shared = shared().await;
    let prefix = unique("backlog");
    let metrics = format!("127.0.0.1:{}", free_port());
    let server = Server::start(
        env,
        &prefix,
        &["--activity-concurrency", "1", "--metrics-addr", &metrics],
    )
    .await;
    // One slot, 24 chains of three 400 ms steps: ~29 s of work in a line, so the line
    // outgrows the backlog's wait (7.5 s) and some tasks go through NATS.
    let ids: Vec<String> = (0..24).map(|n| format!("{prefix}-{n}")).collect();
    for id in &ids {
        let reply = server
            .start_workflow("noop_chain", id, json!({"steps": 3, "sleep_ms": 400}))
            .await;
        assert_eq!(reply["ok"], true, "{reply}");
    }
    for id in &ids {
        assert_eq!(
            server.wait_terminal(id, Duration::from_secs(180)).await,
            "completed",
            "{id}"
        );
        assert_each_step_recorded_once(&server, id, 3).await;
    }
    let local = counter(&metrics, "hcpflow_eager_activity_tasks_total").await;
    let to_nats = counter(&metrics, "hcpflow_backlog_handed_to_nats_total").await;
    let all = counter(&metrics, "hcpflow_activity_tasks_total").await;
    assert!(
        to_nats > 0,
        "no backlog task waited its longest ({local} local of {all})"
    );
    assert!(local > 24, "the backlog kept none: {local} local of {all}");
    let mut server = server;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_with_tasks_in_the_backlog_loses_and_doubles_nothing() {
    let Some(env) = stack("kill_9_with_tasks_in_the_backlog_loses_and_doubles_nothing") else {
        return;
    };
    let _shared = shared().await;
    let prefix = unique("backlogkill");
    let mut server = Server::start(env, &prefix, &["--activity-concurrency", "2"]).await;
    let ids: Vec<String> = (0..20).map(|n| format!("{prefix}-{n}")).collect();
    for id in &ids {
        let reply = server
            .start_workflow("noop_chain", id, json!({"steps": 4, "sleep_ms": 150}))
            .await;
        assert_eq!(reply["ok"], true, "{reply}");
    }
    // Mid-run: 2 running, the rest of the 20 waiting in the backlog, claimed.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    server.restart().await;
    for id in &ids {
        assert_eq!(
            server.wait_terminal(id, Duration::from_secs(180)).await,
            "completed",
            "{id}"
        );
        assert_each_step_recorded_once(&server, id, 4).await;
    }
    server.stop().await;
}

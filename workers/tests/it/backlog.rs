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

/// Runs `chains` noop chains of `steps` steps of `sleep_ms` on a server with one
/// activity slot and the backlog waiting at most `wait_secs`; each completes with each
/// step recorded once. Returns the server's (local runs, handed to NATS, all runs).
async fn one_slot_run(
    test: &str,
    chains: usize,
    steps: u64,
    sleep_ms: u64,
    wait_secs: &str,
) -> Option<(u64, u64, u64)> {
    let env = stack(test)?;
    let _shared = shared().await;
    let prefix = unique("backlog");
    let metrics = format!("127.0.0.1:{}", free_port());
    let mut server = Server::start(
        env,
        &prefix,
        &[
            "--activity-concurrency",
            "1",
            "--activity-backlog-wait-secs",
            wait_secs,
            "--metrics-addr",
            &metrics,
        ],
    )
    .await;
    let ids: Vec<String> = (0..chains).map(|n| format!("{prefix}-{n}")).collect();
    for id in &ids {
        let input = json!({"steps": steps, "sleep_ms": sleep_ms});
        let reply = server.start_workflow("noop_chain", id, input).await;
        assert_eq!(reply["ok"], true, "{reply}");
    }
    for id in &ids {
        assert_eq!(
            server.wait_terminal(id, Duration::from_secs(180)).await,
            "completed",
            "{id}"
        );
        assert_each_step_recorded_once(&server, id, steps).await;
    }
    let local = counter(&metrics, "hcpflow_eager_activity_tasks_total").await;
    let to_nats = counter(&metrics, "hcpflow_backlog_handed_to_nats_total").await;
    let all = counter(&metrics, "hcpflow_activity_tasks_total").await;
    server.stop().await;
    Some((local, to_nats, all))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_waited_its_longest_goes_through_nats_and_runs_once() {
    // One slot, 16 chains of three 300 ms steps: ~14 s of work in a line, and a wait of
    // 3 s at most.
    let Some((local, to_nats, all)) = one_slot_run(
        "a_task_that_waited_its_longest_goes_through_nats_and_runs_once",
        16,
        3,
        300,
        "3",
    )
    .await
    else {
        return;
    };
    assert!(
        to_nats > 0,
        "no backlog task waited its longest ({local} local of {all})"
    );
    assert!(local > 16, "the backlog kept none: {local} local of {all}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_tasks_keep_their_claims_past_a_lease() {
    // One slot, 12 chains of two 1 s steps: the last tasks wait ~20 s, longer than a
    // claim's 15 s lease. Their claims are extended while they wait, so none lapses (the
    // sweeper would publish its task, and the run would be refused its record) and
    // none leaves for NATS.
    let Some((local, to_nats, all)) = one_slot_run(
        "waiting_tasks_keep_their_claims_past_a_lease",
        12,
        2,
        1000,
        "60",
    )
    .await
    else {
        return;
    };
    assert_eq!(to_nats, 0, "{local} local of {all}");
    assert_eq!(local, all, "every run was local");
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

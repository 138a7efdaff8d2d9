//! Crashes: `kill -9` of the server at many points, then a restart. Every workflow
//! completes, every activity seq is recorded once, every history verifies, and every
//! event reaches the events stream.

use std::time::Duration;

use hcpflow_engine::event::Event;
use hcpflow_engine::WorkflowId;
use serde_json::json;

use crate::support::{say, stack, unique, Server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_at_many_points_then_restart_loses_and_duplicates_nothing() {
    let Some(env) = stack("kill_9_at_many_points_then_restart_loses_and_duplicates_nothing") else {
        return;
    };
    let _stack = crate::support::shared().await;
    let prefix = unique("crash");
    let mut server = Server::start(env, &prefix, &[]).await;
    let ids: Vec<String> = (0..6).map(|n| format!("{prefix}-w{n}")).collect();
    for (n, id) in ids.iter().enumerate() {
        // Activities that take a while (killed mid-activity) and some that do not
        // (killed between an append and its publish).
        let sleep_ms = if n % 2 == 0 { 150 } else { 0 };
        let reply = server
            .start_workflow("noop_chain", id, json!({"steps": 12, "sleep_ms": sleep_ms}))
            .await;
        assert_eq!(reply["ok"], true, "{reply}");
    }
    for kill in 0..5u64 {
        tokio::time::sleep(Duration::from_millis(120 + kill * 90)).await;
        say(&format!("crash test: kill -9 #{kill}"));
        server.restart().await;
    }
    for id in &ids {
        assert_eq!(
            server.wait_terminal(id, Duration::from_secs(120)).await,
            "completed",
            "{id}"
        );
    }
    for id in &ids {
        let wid = WorkflowId::new(id.clone()).unwrap();
        server.store.verify_history(&wid).await.unwrap();
        let history: Vec<Event> = server
            .store
            .read_full_history(&wid)
            .await
            .unwrap()
            .iter()
            .map(|e| e.to_history_event().unwrap().event)
            .collect();
        let scheduled: Vec<u64> = history
            .iter()
            .filter_map(|e| match e {
                Event::ActivityScheduled(s) if s.compensation_of.is_none() => {
                    s.input["step"].as_u64()
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            scheduled,
            (1..=12).collect::<Vec<_>>(),
            "{id}: each step scheduled once, in order"
        );
        let mut completed: Vec<u64> = history
            .iter()
            .filter_map(|e| match e {
                Event::ActivityCompleted(c) => Some(c.scheduled_seq.get()),
                _ => None,
            })
            .collect();
        let count = completed.len();
        completed.dedup();
        assert_eq!(
            completed.len(),
            count,
            "{id}: an activity outcome was recorded twice"
        );
        assert_eq!(count, 12, "{id}");
        // Every event reached the events stream exactly once, whichever process
        // appended it and whether or not it died before publishing (what the relay
        // publishes after a crash may come after newer events: entries carry their seq).
        let head = history.len();
        let mut on_stream = server.events_on_stream(id, head).await;
        on_stream.sort_unstable();
        assert_eq!(
            on_stream,
            (1..=head as u64).collect::<Vec<_>>(),
            "{id}: the events stream"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_shuts_down_cleanly_and_work_resumes() {
    let Some(env) = stack("sigterm_shuts_down_cleanly_and_work_resumes") else {
        return;
    };
    let _stack = crate::support::shared().await;
    let prefix = unique("term");
    let mut server = Server::start(env, &prefix, &[]).await;
    let id = format!("{prefix}-w");
    server
        .start_workflow("noop_chain", &id, json!({"steps": 20, "sleep_ms": 50}))
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let status = server.stop().await;
    assert!(status.success(), "SIGTERM exit: {status:?}");
    server.restart().await;
    assert_eq!(
        server.wait_terminal(&id, Duration::from_secs(60)).await,
        "completed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_and_postgres_restarts_mid_run_lose_nothing() {
    let Some(env) = stack("nats_and_postgres_restarts_mid_run_lose_nothing") else {
        return;
    };
    let _stack = crate::support::exclusive().await;
    let prefix = unique("restart");
    let server = Server::start(env, &prefix, &[]).await;
    let ids: Vec<String> = (0..4).map(|n| format!("{prefix}-w{n}")).collect();
    for id in &ids {
        let reply = server
            .start_workflow("noop_chain", id, json!({"steps": 20, "sleep_ms": 60}))
            .await;
        assert_eq!(reply["ok"], true, "{reply}");
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    say("restart test: restarting NATS");
    crate::support::restart_stack_server("nats").await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    say("restart test: restarting Postgres");
    crate::support::restart_stack_server("postgres").await;
    for id in &ids {
        assert_eq!(
            server.wait_terminal(id, Duration::from_secs(120)).await,
            "completed",
            "{id}"
        );
        let wid = WorkflowId::new(id.clone()).unwrap();
        server.store.verify_history(&wid).await.unwrap();
        let steps: Vec<u64> = server
            .store
            .read_full_history(&wid)
            .await
            .unwrap()
            .iter()
            .filter_map(|e| match e.to_history_event().unwrap().event {
                Event::ActivityScheduled(s) if s.compensation_of.is_none() => {
                    s.input["step"].as_u64()
                }
                _ => None,
            })
            .collect();
        assert_eq!(steps, (1..=20).collect::<Vec<_>>(), "{id}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocked_workflows_are_retried_when_a_server_starts() {
    let Some(env) = stack("blocked_workflows_are_retried_when_a_server_starts") else {
        return;
    };
    let _stack = crate::support::shared().await;
    let prefix = unique("blocked");
    let mut server = Server::start(env, &prefix, &[]).await;
    let id = format!("{prefix}-w");
    server
        .start_workflow("noop_chain", &id, json!({"steps": 10, "sleep_ms": 100}))
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.kill9().await;
    // As if the code had failed to replay the history: blocked, waiting for a fix.
    let wid = WorkflowId::new(id.clone()).unwrap();
    server
        .store
        .set_blocked(&wid, "test: pretend nondeterminism")
        .await
        .unwrap();
    server.restart().await;
    // The step in flight at the kill comes back after its lease or ack wait.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while server.status(&id).await != "completed" {
        assert!(
            std::time::Instant::now() < deadline,
            "the blocked workflow was not retried"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let summary = server.store.get_workflow(&wid).await.unwrap();
    assert_eq!(summary.blocked_reason, None);
}

/// A process that dies between its commit and its publish leaves events the events
/// stream has not seen; the relay of any server publishes them after its grace period.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_a_crash_left_unpublished_reach_the_stream() {
    use hcpflow_engine::event::{WorkflowCompleted, WorkflowStarted};
    use hcpflow_engine::{Seq, WorkflowStatus};
    use hcpflow_eventstore::{AppendBatch, NewEvent, NewWorkflow};

    let Some(env) = stack("events_a_crash_left_unpublished_reach_the_stream") else {
        return;
    };
    let _stack = crate::support::shared().await;
    let prefix = unique("relayev");
    let server = Server::start(env, &prefix, &[]).await;
    // Written as an append would, and never published: what a kill -9 right after the
    // commit leaves.
    let id = WorkflowId::new(format!("{prefix}-w")).unwrap();
    let events: Vec<Event> = vec![
        WorkflowStarted {
            workflow_type: "noop_chain".into(),
            input: json!({"steps": 0}),
            concurrency_key: None,
            parent: None,
        }
        .into(),
        WorkflowCompleted { output: json!({}) }.into(),
    ];
    let workflow = NewWorkflow {
        workflow_type: "noop_chain".into(),
        status: WorkflowStatus::Completed,
        concurrency_key: None,
        parent_id: None,
        input_digest: None,
        events_subject: Some(format!("{prefix}.events.{id}")),
        tenant: hcpflow_engine::TenantId::default_tenant(),
    };
    let batch = AppendBatch::new(
        id.clone(),
        Seq::FIRST,
        events.iter().map(NewEvent::from).collect(),
    );
    server
        .store
        .create_workflow(&workflow, batch)
        .await
        .unwrap();
    assert_eq!(server.events_on_stream(id.as_str(), 2).await, vec![1, 2]);
}

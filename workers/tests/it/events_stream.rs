//! The events stream: what a process appends it publishes itself, in batches
//! (`runtime/event_batches.rs`), and marks as published, so that the relay has
//! nothing of it left to publish.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::{stack, unique, Server};

/// With no relay in the deployment, every event of a workflow still reaches the
/// stream once, in history order, and its watermark comes to the head of its history:
/// the batches hand back what NATS acknowledged, run by run, to be marked. Events of a
/// workflow that has not ended reach it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_s_events_reach_the_stream_in_order_and_are_marked_by_their_publisher() {
    let Some(env) =
        stack("a_workflow_s_events_reach_the_stream_in_order_and_are_marked_by_their_publisher")
    else {
        return;
    };
    let _stack = crate::support::shared().await;
    let prefix = unique("evbatch");
    let mut server = Server::start_worker(env, &prefix, "api,workflow,activity,timer", &[]).await;
    let ids: Vec<String> = (0..4).map(|n| format!("{prefix}-w{n}")).collect();
    for id in &ids {
        let reply = server
            .start_workflow("noop_chain", id, json!({"steps": 8}))
            .await;
        assert_eq!(reply["ok"], true, "{reply}");
    }
    for id in &ids {
        assert_eq!(
            server.wait_terminal(id, Duration::from_secs(60)).await,
            "completed",
            "{id}"
        );
    }
    for id in &ids {
        let head = head_of(&server, id).await;
        let expected: Vec<u64> = (1..=head).collect();
        let on_stream = server.events_on_stream(id, expected.len()).await;
        assert_eq!(on_stream, expected, "{id}: the events stream");
        // Marked within a few of the publisher's flushes (twice a second).
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let marked: i64 = sqlx::query_scalar(
                "SELECT events_published_seq FROM workflows WHERE workflow_id = $1",
            )
            .bind(id)
            .fetch_one(server.store.pool())
            .await
            .unwrap();
            if u64::try_from(marked).unwrap() == head {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{id}: events marked published up to {marked} of {head}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    // A history with no end yet (started, then a ten-minute timer): its events go when
    // their wait is over, not only when a terminal event sends what waits.
    let waiting = format!("{prefix}-waits");
    let reply = server
        .start_workflow("noop_wait", &waiting, json!({"timer_ms": 600_000}))
        .await;
    assert_eq!(reply["ok"], true, "{reply}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let head = loop {
        let head = head_of(&server, &waiting).await;
        if head >= 2 {
            break head;
        }
        assert!(Instant::now() < deadline, "{waiting}: {head} events");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let expected: Vec<u64> = (1..=head).collect();
    assert_eq!(
        server.events_on_stream(&waiting, expected.len()).await,
        expected,
        "{waiting}: the events stream"
    );
    let cancelled = server
        .api("cancel", json!({"workflow_id": waiting, "reason": "test"}))
        .await;
    assert_eq!(cancelled["ok"], true, "{cancelled}");
    assert_eq!(
        server
            .wait_terminal(&waiting, Duration::from_secs(60))
            .await,
        "cancelled"
    );
    assert!(server.stop().await.success());
}

/// The seq of the last event of `id`'s history.
async fn head_of(server: &Server, id: &str) -> u64 {
    let head: i64 = sqlx::query_scalar("SELECT next_seq - 1 FROM workflows WHERE workflow_id = $1")
        .bind(id)
        .fetch_one(server.store.pool())
        .await
        .unwrap();
    u64::try_from(head).unwrap()
}

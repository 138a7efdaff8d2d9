//! The events stream: what a process appends it publishes itself, in batches
//! (`runtime/event_batches.rs`), and marks as published, so that the relay has
//! nothing of it left to publish.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::{stack, unique, Server};

/// With no relay in the deployment, every event of a workflow still reaches the
/// stream once, in history order, and its watermark comes to the head of its history:
/// the batches hand back what NATS acknowledged, run by run, to be marked.
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
        let head: i64 =
            sqlx::query_scalar("SELECT next_seq - 1 FROM workflows WHERE workflow_id = $1")
                .bind(id)
                .fetch_one(server.store.pool())
                .await
                .unwrap();
        let head = u64::try_from(head).unwrap();
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
    assert!(server.stop().await.success());
}

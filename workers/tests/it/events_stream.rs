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
        // Marked within a few of the publisher's flushes (every 100 ms).
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

/// One publish of more messages than the JetStream context has acknowledgement permits
/// (what a batch of events from a thousand workflows in flight is, beside the default
/// 5,000): every message is acknowledged. Sent all before any acknowledgement was
/// awaited, the sends past the permits waited for acknowledgements no one awaited, and
/// the process's publishing stood still (`make bench`'s 1,000 in flight: 975 never
/// heard of).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publish_larger_than_the_ack_permits_completes() {
    use hcpflow_eventstore::{EventStore, OutboxMessage};
    use hcpflow_protocol::subjects::Subjects;
    use hcpflow_workers::runtime::journal::Journal;
    use hcpflow_workers::runtime::metrics::Metrics;
    use std::sync::Arc;

    let Some(env) = stack("a_publish_larger_than_the_ack_permits_completes") else {
        return;
    };
    let _stack = crate::support::shared().await;
    let prefix = unique("permits");
    let nats = async_nats::connect(crate::support::env_value(&env, "HCPFLOW_NATS_URL"))
        .await
        .unwrap();
    let stream = format!("{prefix}_permits");
    let subject = format!("{prefix}.permits");
    let plain = async_nats::jetstream::new(nats.clone());
    plain
        .create_stream(async_nats::jetstream::stream::Config {
            name: stream.clone(),
            subjects: vec![subject.clone()],
            ..Default::default()
        })
        .await
        .unwrap();
    // Fewer permits than messages, more than a publish window.
    let js = async_nats::jetstream::ContextBuilder::new()
        .max_ack_inflight(300)
        .build(nats);
    let store = EventStore::connect(&crate::support::env_value(&env, "HCPFLOW_DATABASE_URL"), 1)
        .await
        .unwrap();
    let journal = Journal::new(
        store,
        js,
        Subjects::new(&prefix).unwrap(),
        Arc::new(Metrics::default()),
        None,
    );
    let messages: Vec<OutboxMessage> = (0..1000)
        .map(|n| OutboxMessage {
            subject: subject.clone(),
            msg_id: format!("{prefix}-{n}"),
            payload: n.to_string().into_bytes(),
        })
        .collect();
    let acked = tokio::time::timeout(Duration::from_secs(60), journal.publish_all(&messages))
        .await
        .expect("the publish stood still");
    assert!(
        acked.iter().all(|acked| *acked),
        "some were not acknowledged"
    );
    let mut stream = plain.get_stream(&stream).await.unwrap();
    assert_eq!(stream.info().await.unwrap().state.messages, 1000);
    plain
        .delete_stream(&stream.cached_info().config.name)
        .await
        .unwrap();
}

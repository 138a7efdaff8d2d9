//! A burst of starts against a small API queue: every request is answered within its
//! deadline — accepted, or `overloaded` with a pause to wait — none left to time out;
//! and once the client has sent the refused ones again (same ids), every workflow is
//! recorded exactly once.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sqlx::Row;

use crate::support::{exclusive, say, stack, unique, Server};

const BURST: usize = 2000;
/// The client's deadline for each request (the CLI's).
const DEADLINE: Duration = Duration::from_secs(30);

/// One start, sent once: the reply, or `None` when none came before the deadline.
async fn start_once(server: &Server, id: &str) -> Option<Value> {
    let body = json!({"workflow_type": "noop_chain", "workflow_id": id, "input": {"steps": 1}});
    let request = async_nats::Request::new()
        .payload(serde_json::to_vec(&body).unwrap().into())
        .timeout(Some(DEADLINE));
    let reply = server
        .client
        .send_request(format!("{}.api.v1.start", server.prefix), request)
        .await
        .ok()?;
    serde_json::from_slice(&reply.payload).ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_starts_is_answered_and_none_is_lost_or_doubled() {
    let Some(env) = stack("a_burst_of_starts_is_answered_and_none_is_lost_or_doubled") else {
        return;
    };
    // A load test: it takes the stack alone, so that the tests with deadlines (the
    // operator's conditions, say) do not run against a Postgres it keeps busy.
    let _alone = exclusive().await;
    let prefix = unique("burst");
    let server = Server::start(
        env,
        &prefix,
        &[
            "--api-concurrency",
            "4",
            "--api-queue",
            "64",
            "--api-queue-wait-ms",
            "2000",
        ],
    )
    .await;
    let ids: Vec<String> = (0..BURST).map(|n| format!("{prefix}-{n}")).collect();

    let started = Instant::now();
    let replies =
        futures::future::join_all(ids.iter().map(|id| start_once(&server, id.as_str()))).await;
    let answered_in = started.elapsed();
    let mut refused = Vec::new();
    for (id, reply) in ids.iter().zip(&replies) {
        let reply = reply
            .as_ref()
            .unwrap_or_else(|| panic!("start {id} got no answer in {DEADLINE:?}"));
        if reply["ok"] == true {
            continue;
        }
        assert_eq!(reply["error"]["code"], "overloaded", "{id}: {reply}");
        let pause = reply["error"]["retry_after_ms"].as_u64().unwrap();
        assert!((50..=10_000).contains(&pause), "{reply}");
        refused.push((id.clone(), pause));
    }
    say(&format!(
        "burst: {BURST} starts answered in {answered_in:?}, {} of them overloaded",
        refused.len()
    ));
    assert!(!refused.is_empty(), "a queue of 64 took a burst of {BURST}");

    // The client's part: each refused start again after its pause, until accepted.
    let retries = refused.iter().map(|(id, pause)| {
        let server = &server;
        async move {
            let mut pause = Duration::from_millis(*pause);
            loop {
                tokio::time::sleep(pause).await;
                let reply = start_once(server, id).await.expect("an answer");
                if reply["ok"] == true {
                    return;
                }
                assert_eq!(reply["error"]["code"], "overloaded", "{id}: {reply}");
                pause = Duration::from_millis(reply["error"]["retry_after_ms"].as_u64().unwrap());
            }
        }
    });
    futures::future::join_all(retries).await;

    let pattern = format!("{prefix}-%");
    let row = sqlx::query(
        "SELECT count(DISTINCT w.workflow_id), count(e.seq) FROM workflows w \
         LEFT JOIN events e ON e.workflow_id = w.workflow_id AND e.event_type = 'WorkflowStarted' \
         WHERE w.workflow_id LIKE $1",
    )
    .bind(&pattern)
    .fetch_one(server.store.pool())
    .await
    .unwrap();
    let (workflows, starts): (i64, i64) = (row.get(0), row.get(1));
    assert_eq!(workflows, BURST as i64, "workflows recorded");
    assert_eq!(starts, BURST as i64, "WorkflowStarted events");
    for id in ids.iter().step_by(200) {
        assert_eq!(
            server.wait_terminal(id, Duration::from_secs(180)).await,
            "completed",
            "{id}"
        );
    }
    let mut server = server;
    server.stop().await;
}

//! Reading and writing histories around a running server: what the API returns, what
//! the store holds when another process (of this build or another) wrote it, and the
//! messages anyone on NATS could publish.

use std::time::{Duration, Instant};

use hcpflow_engine::{Event, Seq, WorkflowId, WorkflowStatus};
use hcpflow_eventstore::{AppendBatch, NewEvent, NewWorkflow};
use hcpflow_protocol::subjects::Subjects;
use serde_json::{json, Value};

use crate::support::Server;

/// Publishes `task` on the activity task subject of `queue`, as anyone on NATS could.
pub(crate) async fn publish_task(server: &Server, queue: &str, task: &Value) {
    let subjects = Subjects::new(&server.prefix).unwrap();
    let js = async_nats::jetstream::new(server.client.clone());
    js.publish(
        subjects.activity_tasks(queue),
        serde_json::to_vec(task).unwrap().into(),
    )
    .await
    .unwrap()
    .await
    .unwrap();
}

/// The history of `id` as the API returns it.
pub(crate) async fn history(server: &Server, id: &str) -> Vec<Value> {
    let reply = server
        .api("history", json!({"workflow_id": id, "limit": 1000}))
        .await;
    reply["events"].as_array().cloned().unwrap_or_default()
}

/// The `aws_target` of every AWS call `id` scheduled, in order (`null` for a call
/// recorded without one).
pub(crate) async fn aws_targets(server: &Server, id: &str) -> Vec<Value> {
    history(server, id)
        .await
        .into_iter()
        .filter(|e| e["type"] == "ActivityScheduled")
        .filter(|e| {
            e["data"]["activity_type"]
                .as_str()
                .is_some_and(|t| t.starts_with("aws."))
        })
        .map(|e| e["data"]["input"]["aws_target"].clone())
        .collect()
}

/// The seq of the first step `id` schedules, once it is recorded.
pub(crate) async fn first_step(server: &Server, id: &str) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let scheduled = history(server, id)
            .await
            .into_iter()
            .find(|e| e["type"] == "ActivityScheduled" && e["data"]["compensation_of"].is_null());
        if let Some(event) = scheduled {
            return event["seq"].as_u64().unwrap();
        }
        assert!(Instant::now() < deadline, "the step was never scheduled");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The value of a counter on the metrics endpoint.
pub(crate) async fn counter(metrics_addr: &str, name: &str) -> u64 {
    let metrics = crate::support::http_get(metrics_addr, "/metrics").await;
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|n| n.trim().parse::<u64>().ok())
        .unwrap_or(0)
}

/// Writes a history straight to the store, as a server (of this build or another)
/// would have recorded it.
pub(crate) async fn record_events(
    server: &Server,
    id: &str,
    workflow_type: &str,
    status: WorkflowStatus,
    events: Vec<NewEvent>,
    recorded_at: Option<chrono::DateTime<chrono::Utc>>,
) {
    record_for(server, None, id, workflow_type, status, events, recorded_at).await;
}

/// [`record_events`] for the deployment whose events go to `events_subject`.
pub(crate) async fn record_for(
    server: &Server,
    events_subject: Option<String>,
    id: &str,
    workflow_type: &str,
    status: WorkflowStatus,
    events: Vec<NewEvent>,
    recorded_at: Option<chrono::DateTime<chrono::Utc>>,
) {
    let mut batch =
        AppendBatch::new(WorkflowId::new(id).unwrap(), Seq::FIRST, events).with_status(status);
    batch.recorded_at = recorded_at;
    server
        .store
        .create_workflow(
            &NewWorkflow {
                workflow_type: workflow_type.to_owned(),
                status,
                concurrency_key: None,
                parent_id: None,
                input_digest: None,
                events_subject,
                tenant: hcpflow_engine::TenantId::default_tenant(),
            },
            batch,
        )
        .await
        .unwrap();
}

/// [`record_events`] of engine events.
pub(crate) async fn record_history(
    server: &Server,
    id: &str,
    status: WorkflowStatus,
    events: &[Event],
) {
    let workflow_type = match &events[0] {
        Event::WorkflowStarted(started) => started.workflow_type.clone(),
        _ => unreachable!("a history starts with WorkflowStarted"),
    };
    record_events(server, id, &workflow_type, status, new_events(events), None).await;
}

pub(crate) fn new_events(events: &[Event]) -> Vec<NewEvent> {
    events
        .iter()
        .map(|event| {
            let (kind, data) = event.to_record();
            NewEvent::new(kind, data)
        })
        .collect()
}

/// Wakes `id` with a workflow task that names no child — as the pass a coalesced
/// wake-up turns into.
pub(crate) async fn wake(server: &Server, id: &str) {
    let subjects = Subjects::new(&server.prefix).unwrap();
    let js = async_nats::jetstream::new(server.client.clone());
    let task = json!({"workflow_id": id});
    js.publish(
        subjects.workflow_tasks(),
        serde_json::to_vec(&task).unwrap().into(),
    )
    .await
    .unwrap()
    .await
    .unwrap();
}

/// The first `count` records on the server's dead-letter stream, waiting up to `wait`
/// for them (fewer if they do not come).
pub(crate) async fn dead_letters(server: &Server, count: usize, wait: Duration) -> Vec<Value> {
    use futures::StreamExt;
    let js = async_nats::jetstream::new(server.client.clone());
    let stream = js
        .get_stream(format!("{}_DEADLETTER", server.prefix.to_uppercase()))
        .await
        .unwrap();
    let consumer = stream
        .create_consumer(async_nats::jetstream::consumer::pull::Config::default())
        .await
        .unwrap();
    let mut records = Vec::new();
    let deadline = Instant::now() + wait;
    while records.len() < count && Instant::now() < deadline {
        let mut messages = consumer
            .fetch()
            .max_messages(count - records.len())
            .expires(Duration::from_secs(2))
            .messages()
            .await
            .unwrap();
        while let Some(Ok(message)) = messages.next().await {
            records.push(serde_json::from_slice::<Value>(&message.payload).unwrap());
            let _ = message.ack().await;
        }
    }
    records
}

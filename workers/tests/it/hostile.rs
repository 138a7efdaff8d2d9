//! What a hostile publisher cannot make the server do (issue 18). Anyone able to
//! publish on the internal task subjects must not be able to run work the history did
//! not schedule, nor run an attempt the history cannot vouch for.

use std::time::{Duration, Instant};

use hcpflow_engine::event::{
    ActivityScheduled, ChildStarted, ParentRef, WorkflowCompleted, WorkflowStarted,
};
use hcpflow_engine::{ActivityOptions, Event, Seq, WorkflowId, WorkflowStatus};
use hcpflow_eventstore::{AppendBatch, NewEvent, NewWorkflow};
use hcpflow_protocol::subjects::Subjects;
use serde_json::{json, Value};

use crate::support::{stack, unique, Server};

/// Publishes `task` on the activity task subject of `queue`, as anyone on NATS could.
async fn publish_task(server: &Server, queue: &str, task: &Value) {
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
async fn history(server: &Server, id: &str) -> Vec<Value> {
    let reply = server
        .api("history", json!({"workflow_id": id, "limit": 1000}))
        .await;
    reply["events"].as_array().cloned().unwrap_or_default()
}

/// The seq of the first step `id` schedules, once it is recorded.
async fn first_step(server: &Server, id: &str) -> u64 {
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
async fn counter(metrics_addr: &str, name: &str) -> u64 {
    let metrics = crate::support::http_get(metrics_addr, "/metrics").await;
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|n| n.trim().parse::<u64>().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_activity_task_runs_only_what_the_history_recorded() {
    let Some(env) = stack("a_forged_activity_task_runs_only_what_the_history_recorded") else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("forge");
    let server = Server::start(env, &prefix, &[]).await;
    let id = format!("{prefix}-chain");
    // One step that takes seconds and returns an empty string.
    let started = server
        .start_workflow("noop_chain", &id, json!({"steps": 1, "sleep_ms": 3000}))
        .await;
    assert_eq!(started["ok"], true, "{started}");
    let scheduled_seq = first_step(&server, &id).await;
    // The same attempt, with the input of the forger's choice: done at once, five bytes.
    let forged = json!({
        "workflow_id": id, "scheduled_seq": scheduled_seq, "attempt": 1,
        "activity_type": "noop.step",
        "input": {"step": 1, "sleep_ms": 0, "fail": false, "payload_bytes": 5},
        "options": ActivityOptions::default(),
    });
    publish_task(&server, "default", &forged).await;
    assert_eq!(
        server.wait_terminal(&id, Duration::from_secs(60)).await,
        "completed"
    );
    let events = history(&server, &id).await;
    let completed = events
        .iter()
        .find(|e| e["type"] == "ActivityCompleted" && e["data"]["scheduled_seq"] == scheduled_seq)
        .expect("the step completed");
    assert_eq!(
        completed["data"]["result"],
        json!(""),
        "the recorded result is the scheduled input's, not the forged one's: {completed}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_activity_task_whose_history_does_not_decode_is_not_run() {
    let Some(env) = stack("an_activity_task_whose_history_does_not_decode_is_not_run") else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("undec");
    let metrics_addr = format!("127.0.0.1:{}", crate::support::free_port());
    let server = Server::start(env, &prefix, &["--metrics-addr", &metrics_addr]).await;
    // A history this code cannot read: a step scheduled, then an event of a kind from
    // a newer build. Written straight to the store, as a newer server would have.
    let id = format!("{prefix}-future");
    let input = json!({"step": 1, "sleep_ms": 0, "fail": false, "payload_bytes": 0});
    let events = [
        Event::from(WorkflowStarted {
            workflow_type: "noop_chain".into(),
            input: json!({"steps": 1}),
            concurrency_key: None,
            parent: None,
        }),
        Event::from(ActivityScheduled {
            activity_type: "noop.step".into(),
            input_digest: hcpflow_engine::event::digest(&input),
            input: input.clone(),
            options: ActivityOptions::default(),
            compensation_of: None,
        }),
    ];
    let mut written = new_events(&events);
    written.push(NewEvent::new("FromTheFuture", json!({"v": 1})));
    record_events(
        &server,
        &id,
        "noop_chain",
        WorkflowStatus::Running,
        written,
        None,
    )
    .await;
    let task = json!({
        "workflow_id": id, "scheduled_seq": 2, "attempt": 1,
        "activity_type": "noop.step", "input": input, "options": ActivityOptions::default(),
    });
    publish_task(&server, "default", &task).await;
    // The task is settled by blocking the workflow, without running the attempt.
    assert_eq!(
        server.wait_terminal(&id, Duration::from_secs(30)).await,
        "blocked"
    );
    assert_eq!(
        counter(&metrics_addr, "hcpflow_activity_tasks_total").await,
        0,
        "an attempt ran although its history could not vouch for it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_runs_once_at_a_time() {
    let Some(env) = stack("an_attempt_runs_once_at_a_time") else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("once");
    let metrics_addr = format!("127.0.0.1:{}", crate::support::free_port());
    let server = Server::start(env, &prefix, &["--metrics-addr", &metrics_addr]).await;
    let id = format!("{prefix}-chain");
    // One step of a few seconds, run at once in the server that scheduled it (eager).
    let started = server
        .start_workflow("noop_chain", &id, json!({"steps": 1, "sleep_ms": 3000}))
        .await;
    assert_eq!(started["ok"], true, "{started}");
    let scheduled_seq = first_step(&server, &id).await;
    // A second copy of the same attempt's task while the first run holds it — as a
    // sweeper republishing past JetStream's duplicate window would send.
    let copy = json!({"workflow_id": id, "scheduled_seq": scheduled_seq, "attempt": 1});
    publish_task(&server, "default", &copy).await;
    assert_eq!(
        server.wait_terminal(&id, Duration::from_secs(60)).await,
        "completed"
    );
    // Long enough for a second run, had one started, to have finished.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        counter(&metrics_addr, "hcpflow_activity_tasks_total").await,
        1,
        "the attempt ran twice at once"
    );
}

/// Writes a history straight to the store, as a server (of this build or another)
/// would have recorded it.
async fn record_events(
    server: &Server,
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
                events_subject: None,
            },
            batch,
        )
        .await
        .unwrap();
}

/// [`record_events`] of engine events.
async fn record_history(server: &Server, id: &str, status: WorkflowStatus, events: &[Event]) {
    let workflow_type = match &events[0] {
        Event::WorkflowStarted(started) => started.workflow_type.clone(),
        _ => unreachable!("a history starts with WorkflowStarted"),
    };
    record_events(server, id, &workflow_type, status, new_events(events), None).await;
}

fn new_events(events: &[Event]) -> Vec<NewEvent> {
    events
        .iter()
        .map(|event| {
            let (kind, data) = event.to_record();
            NewEvent::new(kind, data)
        })
        .collect()
}

/// A `noop_parent` that started its one child and waits for it; the child's id.
async fn parent_waiting(server: &Server, parent: &str) -> WorkflowId {
    let parent_id = WorkflowId::new(parent).unwrap();
    let child_id = hcpflow_engine::child_id(&parent_id, Seq::new(2).unwrap());
    let child_input = json!({"steps": 0});
    record_history(
        server,
        parent,
        WorkflowStatus::Running,
        &[
            WorkflowStarted {
                workflow_type: "noop_parent".into(),
                input: json!({"children": 1, "steps": 0}),
                concurrency_key: None,
                parent: None,
            }
            .into(),
            ChildStarted {
                child_id: child_id.clone(),
                workflow_type: "noop_chain".into(),
                input_digest: hcpflow_engine::event::digest(&child_input),
                input: child_input,
            }
            .into(),
        ],
    )
    .await;
    child_id
}

/// A child history that ended with `end`.
async fn ended_child(server: &Server, child_id: &WorkflowId, start: WorkflowStarted, end: Event) {
    record_history(
        server,
        child_id.as_str(),
        WorkflowStatus::Completed,
        &[start.into(), end],
    )
    .await;
}

/// Wakes `id` with a workflow task that names no child — as the pass a coalesced
/// wake-up turns into.
async fn wake(server: &Server, id: &str) {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_ended_while_its_parent_was_busy_is_not_lost() {
    let Some(env) = stack("a_child_that_ended_while_its_parent_was_busy_is_not_lost") else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("child");
    let server = Server::start(env, &prefix, &[]).await;
    let parent = format!("{prefix}-parent");
    let parent_id = WorkflowId::new(&parent).unwrap();
    // The child ended; its wake-up reached the parent while the parent was being
    // processed, so the next pass runs without it.
    let child_id = parent_waiting(&server, &parent).await;
    ended_child(
        &server,
        &child_id,
        WorkflowStarted {
            workflow_type: "noop_chain".into(),
            input: json!({"steps": 0}),
            concurrency_key: None,
            parent: Some(ParentRef {
                workflow_id: parent_id.clone(),
                seq: Seq::new(2).unwrap(),
            }),
        },
        WorkflowCompleted {
            output: json!({"steps": 0}),
        }
        .into(),
    )
    .await;
    wake(&server, &parent).await;
    assert_eq!(
        server.wait_terminal(&parent, Duration::from_secs(30)).await,
        "completed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_id_taken_by_a_client_is_a_failure_not_a_result() {
    let Some(env) = stack("a_child_id_taken_by_a_client_is_a_failure_not_a_result") else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("imp");
    let server = Server::start(env, &prefix, &[]).await;
    let parent = format!("{prefix}-parent");
    let child_id = parent_waiting(&server, &parent).await;

    // Through the API, a client can neither claim to be the child with its own input,
    // nor take the child's id without a claim.
    let forged = server
        .api(
            "start",
            json!({"workflow_type": "noop_chain", "workflow_id": child_id.as_str(),
                   "input": {"steps": 3}, "parent": {"workflow_id": parent, "seq": 2}}),
        )
        .await;
    assert_eq!(forged["error"]["code"], "invalid_request", "{forged}");
    let reserved = server
        .api(
            "start",
            json!({"workflow_type": "noop_chain", "workflow_id": child_id.as_str(),
                   "input": {"steps": 3}}),
        )
        .await;
    assert_eq!(reserved["error"]["code"], "conflict", "{reserved}");

    // An impostor recorded under the child's id (before these checks, say) with its own
    // input: the parent records the child's failure, not the impostor's output.
    ended_child(
        &server,
        &child_id,
        WorkflowStarted {
            workflow_type: "noop_chain".into(),
            input: json!({"steps": 3}),
            concurrency_key: None,
            parent: None,
        },
        WorkflowCompleted {
            output: json!({"steps": 3, "stolen": true}),
        }
        .into(),
    )
    .await;
    let taken = server
        .api(
            "start",
            json!({"workflow_type": "noop_chain", "workflow_id": format!("{parent}-c9"),
                   "input": {"steps": 1}}),
        )
        .await;
    assert_eq!(
        taken["ok"], true,
        "an id no ChildStarted reserved is free: {taken}"
    );
    wake(&server, &parent).await;
    let status = server.wait_terminal(&parent, Duration::from_secs(30)).await;
    assert_ne!(status, "completed");
    let completed = history(&server, &parent)
        .await
        .into_iter()
        .find(|e| e["type"] == "ChildCompleted")
        .expect("the child's outcome is recorded");
    let text = completed["data"].to_string();
    assert!(
        !text.contains("stolen") && text.contains("another workflow holds"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_activity_blocks_its_workflow_and_shutdown_still_finishes() {
    let Some(env) = stack("a_panicking_activity_blocks_its_workflow_and_shutdown_still_finishes")
    else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("panic");
    let mut server = Server::start(env, &prefix, &[]).await;
    let id = format!("{prefix}-chain");
    let started = server
        .start_workflow("noop_chain", &id, json!({"steps": 2, "panic_at": 1}))
        .await;
    assert_eq!(started["ok"], true, "{started}");
    // Retried a few times, then blocked with the panic's message — not stuck running.
    assert_eq!(
        server.wait_terminal(&id, Duration::from_secs(60)).await,
        "blocked"
    );
    let described = server.api("describe", json!({"workflow_id": id})).await;
    let reason = described["workflow"]["error"]["message"].to_string();
    assert!(reason.contains("panics by request"), "{described}");
    // The panics leaked no slot: other work runs, and SIGTERM ends the server promptly.
    let other = format!("{prefix}-other");
    server
        .start_workflow("noop_chain", &other, json!({"steps": 2}))
        .await;
    assert_eq!(
        server.wait_terminal(&other, Duration::from_secs(30)).await,
        "completed"
    );
    let stopping = Instant::now();
    let status = server.stop().await;
    assert!(status.success(), "{status:?}");
    assert!(
        stopping.elapsed() < Duration::from_secs(30),
        "shutdown took {:?}",
        stopping.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_metrics_connection_is_let_go() {
    use tokio::io::AsyncReadExt;
    let Some(env) = stack("an_idle_metrics_connection_is_let_go") else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("idle");
    let metrics_addr = format!("127.0.0.1:{}", crate::support::free_port());
    let _server = Server::start(env, &prefix, &["--metrics-addr", &metrics_addr]).await;
    // Connections that never send a request: each would hold a task for ever.
    let mut idle = Vec::new();
    for _ in 0..8 {
        idle.push(tokio::net::TcpStream::connect(&metrics_addr).await.unwrap());
    }
    for mut socket in idle {
        let mut buffer = [0u8; 16];
        let read = tokio::time::timeout(Duration::from_secs(15), socket.read(&mut buffer)).await;
        assert!(
            matches!(read, Ok(Ok(0)) | Ok(Err(_))),
            "an idle connection was kept open: {read:?}"
        );
    }
    let metrics = crate::support::http_get(&metrics_addr, "/metrics").await;
    assert!(metrics.starts_with("HTTP/1.1 200"), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_history_never_goes_back_in_time() {
    let Some(env) = stack("a_history_never_goes_back_in_time") else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("clock");
    let server = Server::start(env, &prefix, &[]).await;
    // Started by a process whose clock runs an hour ahead.
    let id = format!("{prefix}-ahead");
    let started = Event::from(WorkflowStarted {
        workflow_type: "noop_chain".into(),
        input: json!({"steps": 0}),
        concurrency_key: None,
        parent: None,
    });
    // Whole milliseconds, as every append writes them.
    let ahead =
        chrono::SubsecRound::trunc_subsecs(chrono::Utc::now(), 3) + chrono::Duration::hours(1);
    record_events(
        &server,
        &id,
        "noop_chain",
        WorkflowStatus::Running,
        new_events(&[started]),
        Some(ahead),
    )
    .await;
    wake(&server, &id).await;
    assert_eq!(
        server.wait_terminal(&id, Duration::from_secs(30)).await,
        "completed"
    );
    let times: Vec<String> = history(&server, &id)
        .await
        .iter()
        .map(|e| e["recorded_at"].as_str().unwrap().to_owned())
        .collect();
    assert!(times.len() >= 2, "{times:?}");
    assert!(
        times.windows(2).all(|pair| pair[0] <= pair[1]),
        "recorded_at went backwards: {times:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_builtin_workflows_run_only_when_asked_for() {
    let Some(env) = stack("the_builtin_workflows_run_only_when_asked_for") else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("nobuiltin");
    let server = Server::start(env, &prefix, &["--builtin-workflows=false"]).await;
    let refused = server
        .start_workflow("noop_chain", &format!("{prefix}-x"), json!({"steps": 1}))
        .await;
    assert_eq!(
        refused["error"]["code"], "unknown_workflow_type",
        "{refused}"
    );
    let message = refused["error"]["message"].as_str().unwrap_or("");
    assert!(
        message.contains("create_hosted_cluster") && !message.contains("noop_fanout"),
        "{refused}"
    );
}

/// One hostile API message: its verb, its body, and the id of the start it carries
/// when it is one (which must never be recorded).
struct Hostile {
    verb: String,
    body: Vec<u8>,
    start_id: Option<String>,
}

/// The `n`th message of the storm: every verb, wrong types, truncated and huge bodies,
/// unicode, sealed-looking secrets, unknown verbs and types.
fn hostile(n: u64, prefix: &str, rng: &mut impl rand::Rng) -> Hostile {
    const VERBS: [&str; 9] = [
        "start", "describe", "list", "history", "signal", "cancel", "clusters", "verify", "nope",
    ];
    let verb = VERBS[rng.gen_range(0..VERBS.len())].to_owned();
    let id = format!("{prefix}-h{n}");
    let wrong = [
        json!(null),
        json!(7),
        json!(-1),
        json!(1e300),
        json!("\u{202e}ünï\u{0}côdé"),
        json!([1, 2, 3]),
        json!({"nested": {"deep": [null]}}),
        json!("sealed:v2:dev:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"),
        json!("a".repeat(300)),
    ];
    let pick = |rng: &mut dyn rand::RngCore| wrong[(rng.next_u32() as usize) % wrong.len()].clone();
    let (body, start_id) = match rng.gen_range(0..8) {
        // A start of a real type with a wrong input, or a secret already sealed.
        0 => (
            json!({"workflow_type": "create_hosted_cluster", "workflow_id": id,
                   "input": {"name": pick(rng), "pull_secret": "sealed:v2:dev:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}}),
            Some(id.clone()),
        ),
        1 => (
            {
                let steps = [json!(null), json!(-1), json!(1e300), json!("7"), json!([7])];
                let steps = steps[rng.gen_range(0..steps.len())].clone();
                json!({"workflow_type": "noop_chain", "workflow_id": id, "input": {"steps": steps}})
            },
            Some(id.clone()),
        ),
        2 => (
            json!({"workflow_type": pick(rng), "workflow_id": id, "input": {}}),
            Some(id.clone()),
        ),
        // A start claiming a parent that did not start it.
        3 => (
            json!({"workflow_type": "noop_chain", "workflow_id": id, "input": {"steps": 1},
                   "parent": {"workflow_id": format!("{prefix}-nobody"), "seq": 2}}),
            Some(id.clone()),
        ),
        // Every field of every verb with a value of the wrong type.
        4 => (
            json!({"workflow_id": pick(rng), "limit": pick(rng), "cursor": pick(rng),
                   "from_seq": pick(rng), "raw": pick(rng), "signal": pick(rng),
                   "status": pick(rng), "include_destroyed": pick(rng)}),
            None,
        ),
        // Truncated JSON.
        5 => {
            let text =
                json!({"workflow_type": "noop_chain", "workflow_id": id, "input": {"steps": 1}})
                    .to_string();
            let cut = rng.gen_range(1..text.len() - 1);
            return Hostile {
                body: text.as_bytes()[..cut].to_vec(),
                start_id: Some(id).filter(|_| verb == "start"),
                verb,
            };
        }
        // Bytes that are not UTF-8.
        6 => {
            let bytes = (0..rng.gen_range(1..64)).map(|_| rng.gen::<u8>()).collect();
            return Hostile {
                verb,
                body: bytes,
                start_id: None,
            };
        }
        // Over the size limit (a few of them).
        _ if n.is_multiple_of(500) => {
            let mut body = format!("{{\"workflow_type\": \"noop_chain\", \"workflow_id\": \"{id}\", \"input\": {{\"pad\": \"");
            body.push_str(&"x".repeat(1024 * 1024 + 1));
            body.push_str("\"}}");
            return Hostile {
                verb,
                body: body.into_bytes(),
                start_id: Some(id),
            };
        }
        _ => (json!(pick(rng)), None),
    };
    Hostile {
        body: serde_json::to_vec(&body).unwrap(),
        start_id: start_id.filter(|_| verb == "start"),
        verb,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_hostile_messages_get_documented_answers_and_record_nothing() {
    use futures::StreamExt;
    use rand::SeedableRng;

    let Some(env) =
        stack("ten_thousand_hostile_messages_get_documented_answers_and_record_nothing")
    else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("storm");
    let server = Server::start(env, &prefix, &[]).await;
    let mut rng = rand::rngs::StdRng::seed_from_u64(18);
    let messages: Vec<Hostile> = (0..10_000).map(|n| hostile(n, &prefix, &mut rng)).collect();
    // Forged tasks on the internal subjects too, for workflows that do not exist.
    let subjects = Subjects::new(&server.prefix).unwrap();
    for n in 0..200 {
        let forged =
            json!({"workflow_id": format!("{prefix}-ghost{n}"), "scheduled_seq": 1, "attempt": 1});
        server
            .client
            .publish(
                subjects.activity_tasks("default"),
                serde_json::to_vec(&forged).unwrap().into(),
            )
            .await
            .unwrap();
        server
            .client
            .publish(
                subjects.workflow_tasks(),
                format!("{{\"workflow_id\": {n}").into(),
            )
            .await
            .unwrap();
    }
    const DOCUMENTED: [&str; 8] = [
        "invalid_json",
        "invalid_request",
        "unknown_workflow_type",
        "too_large",
        "conflict",
        "not_found",
        "unavailable",
        "internal",
    ];
    let replies: Vec<(Option<String>, Result<Value, String>)> = futures::stream::iter(messages)
        .map(|message| {
            let client = server.client.clone();
            let subject = format!("{}.api.v1.{}", server.prefix, message.verb);
            async move {
                let reply = tokio::time::timeout(
                    Duration::from_secs(30),
                    client.request(subject, message.body.into()),
                )
                .await;
                let reply = match reply {
                    Ok(Ok(reply)) => serde_json::from_slice::<Value>(&reply.payload)
                        .map_err(|e| format!("the reply is not JSON: {e}")),
                    Ok(Err(error)) => Err(format!("no reply: {error}")),
                    Err(_) => Err("no reply in 30 s".to_owned()),
                };
                (message.start_id, reply)
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    let mut refused_starts = Vec::new();
    for (start_id, reply) in &replies {
        let reply = reply.as_ref().unwrap_or_else(|e| panic!("{e}"));
        if reply["ok"] == json!(true) {
            // Only a read may succeed (its unknown fields ignored); never a start.
            assert!(start_id.is_none(), "a hostile start was accepted: {reply}");
            continue;
        }
        let code = reply["error"]["code"].as_str().unwrap_or("");
        assert!(DOCUMENTED.contains(&code), "an undocumented reply: {reply}");
        assert_ne!(code, "internal", "{reply}");
        if let Some(id) = start_id {
            refused_starts.push(id.clone());
        }
    }
    assert!(refused_starts.len() > 500, "{}", refused_starts.len());
    // Nothing a refused request carried was recorded.
    for id in refused_starts
        .iter()
        .filter(|id| hcpflow_engine::WorkflowId::new(id.as_str()).is_ok())
    {
        let found = server
            .store
            .get_workflow(&hcpflow_engine::WorkflowId::new(id.as_str()).unwrap())
            .await;
        assert!(
            matches!(found, Err(hcpflow_eventstore::Error::NotFound(_))),
            "{id} was recorded although its start was refused"
        );
    }
    // And the server still works.
    let id = format!("{prefix}-after");
    server
        .start_workflow("noop_chain", &id, json!({"steps": 2}))
        .await;
    assert_eq!(
        server.wait_terminal(&id, Duration::from_secs(30)).await,
        "completed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_bounds_every_stream() {
    let Some(env) = stack("migrate_bounds_every_stream") else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("bounds");
    // The server migrates at start (it has the owner's URL): the streams are made.
    let server = Server::start(env, &prefix, &[]).await;
    let subjects = Subjects::new(&server.prefix).unwrap();
    let js = async_nats::jetstream::new(server.client.clone());
    let limits = |js: async_nats::jetstream::Context, name: String| async move {
        let mut stream = js.get_stream(&name).await.unwrap();
        let config = stream.info().await.unwrap().config.clone();
        (config.max_bytes, config.num_replicas, config.discard)
    };
    use async_nats::jetstream::stream::DiscardPolicy;
    for role in hcpflow_protocol::StreamRole::ALL {
        let (_, replicas, _) = limits(js.clone(), subjects.stream(role)).await;
        assert_eq!(replicas, 1, "{role:?}");
    }
    // Full, the witness refuses new checkpoints rather than drop old ones.
    let (_, _, discard) = limits(
        js.clone(),
        subjects.stream(hcpflow_protocol::StreamRole::Audit),
    )
    .await;
    assert_eq!(discard, DiscardPolicy::New);
    // `migrate` brings the limits to what it is told.
    let mut env: Vec<(String, String)> = server.env.clone();
    env.retain(|(k, _)| k.starts_with("HCPFLOW_"));
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_hcpflow"))
        .args([
            "migrate",
            "--prefix",
            &server.prefix,
            "--stream-max-bytes",
            "10000000",
        ])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env)
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for role in hcpflow_protocol::StreamRole::ALL {
        let (max_bytes, _, _) = limits(js.clone(), subjects.stream(role)).await;
        assert_eq!(max_bytes, 10_000_000, "{role:?}");
    }
    // NATS reserves a bounded stream's bytes in its store: give them back.
    drop(server);
    for role in hcpflow_protocol::StreamRole::ALL {
        let _ = js.delete_stream(subjects.stream(role)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_beyond_the_servers_policy_is_refused_before_anything_is_recorded() {
    let Some(env) =
        stack("a_create_beyond_the_servers_policy_is_refused_before_anything_is_recorded")
    else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("policy");
    let server = Server::start(env, &prefix, &["--max-node-pools", "1"]).await;
    let name = format!("p{}", &prefix[prefix.len().saturating_sub(8)..]).to_lowercase();
    let input = |extra: Value| {
        let mut input = json!({"name": name, "region": "us-east-1", "zones": ["us-east-1a"],
            "base_domain": "example.com", "endpoint_access": "Public", "vpc_cidr": "10.0.0.0/16",
            "oidc_bucket": "hcpflow-oidc",
            "release_image": "quay.io/openshift-release-dev/ocp-release:4.17.0-x86_64",
            "pull_secret": "{\"auths\": {}}", "ssh_public_key": "ssh-ed25519 AAAA",
            "node_pools": [{"name": format!("{name}-a"), "zone": "us-east-1a", "replicas": 1}]});
        for (key, value) in extra.as_object().unwrap() {
            input[key] = value.clone();
        }
        input
    };
    let cases = [
        (
            json!({"namespace": "kube-system"}),
            "belongs to the management cluster",
        ),
        (
            json!({"namespace": "elsewhere"}),
            "not one this server allows",
        ),
        (
            json!({"annotations": {"hypershift.openshift.io/control-plane-operator-image": "x"}}),
            "not an annotation this server allows",
        ),
        (
            json!({"release_image": "registry.example.com/ocp-release:4.17.0"}),
            "not from a registry this server allows",
        ),
        (
            json!({"node_pools": [
                {"name": format!("{name}-a"), "zone": "us-east-1a", "replicas": 1},
                {"name": format!("{name}-b"), "zone": "us-east-1a", "replicas": 1}]}),
            "at most 1",
        ),
    ];
    for (n, (extra, expected)) in cases.into_iter().enumerate() {
        let id = format!("{prefix}-{n}");
        let reply = server
            .start_workflow("create_hosted_cluster", &id, input(extra))
            .await;
        assert_eq!(reply["error"]["code"], "invalid_request", "{reply}");
        let message = reply["error"]["message"].as_str().unwrap_or("");
        assert!(message.contains(expected), "{expected}: {reply}");
        assert_eq!(server.status(&id).await, "?", "{id} was recorded");
    }
}

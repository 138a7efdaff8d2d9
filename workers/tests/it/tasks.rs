//! What a message on the task subjects can and cannot make a worker do (issue 18): run
//! only what the history scheduled, once at a time, nothing for a history it cannot
//! read; a panicking task blocks its workflow instead of sticking; a history's times
//! never go backwards.

use std::time::{Duration, Instant};

use hcpflow_engine::event::{ActivityScheduled, WorkflowStarted};
use hcpflow_engine::{ActivityOptions, Event, WorkflowStatus};
use hcpflow_eventstore::NewEvent;
use serde_json::json;

use crate::histories::{
    counter, first_step, history, new_events, publish_task, record_events, record_for, wake,
};
use crate::support::{stack, unique, Server};

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_activity_blocks_its_workflow_and_shutdown_still_finishes() {
    let Some(env) = stack("a_panicking_activity_blocks_its_workflow_and_shutdown_still_finishes")
    else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("panic");
    // One slot each: a single slot a panic kept would stop all later work.
    let mut server = Server::start(
        env,
        &prefix,
        &["--activity-concurrency", "1", "--workflow-concurrency", "1"],
    )
    .await;
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
    // SIGTERM while a step runs that would take a minute: the server waits for it
    // only until its grace period ends.
    let long = format!("{prefix}-long");
    server
        .start_workflow("noop_chain", &long, json!({"steps": 1, "sleep_ms": 60_000}))
        .await;
    first_step(&server, &long).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let stopping = Instant::now();
    let status = server.stop().await;
    assert!(
        stopping.elapsed()
            < hcpflow_workers::runtime::nats::SHUTDOWN_GRACE + Duration::from_secs(10),
        "shutdown took {:?} ({status:?})",
        stopping.elapsed()
    );
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
async fn a_server_takes_up_no_workflow_of_another_deployment() {
    let Some(env) = stack("a_server_takes_up_no_workflow_of_another_deployment") else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("mine");
    // Blocked in another deployment sharing the database (its own subject prefix),
    // and able to finish if anyone ran it.
    let theirs = format!("{prefix}-theirs");
    let started = Event::from(WorkflowStarted {
        workflow_type: "noop_chain".into(),
        input: json!({"steps": 0}),
        concurrency_key: None,
        parent: None,
    });
    let server = Server::start(env.clone(), &prefix, &[]).await;
    record_for(
        &server,
        Some(format!("other{prefix}.events.{theirs}")),
        &theirs,
        "noop_chain",
        WorkflowStatus::Blocked,
        new_events(&[started]),
        None,
    )
    .await;
    drop(server);
    // A server starting retries the blocked workflows of its types — its own only.
    let server = Server::start(env, &prefix, &[]).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(server.status(&theirs).await, "blocked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_task_is_dead_lettered_not_dropped() {
    let Some(env) = stack("a_malformed_task_is_dead_lettered_not_dropped") else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("badtask");
    let server = Server::start(env, &prefix, &[]).await;
    let js = async_nats::jetstream::new(server.client.clone());
    for (subject, body) in [
        (
            format!("{prefix}.task.workflow"),
            &b"{\"workflow_id\": 7}"[..],
        ),
        (
            format!("{prefix}.task.activity.default"),
            &b"\xff not json, secret-canary"[..],
        ),
    ] {
        js.publish(subject, body.to_vec().into())
            .await
            .unwrap()
            .await
            .unwrap();
    }
    let records = crate::histories::dead_letters(&server, 2, Duration::from_secs(20)).await;
    assert_eq!(records.len(), 2, "{records:?}");
    for record in &records {
        assert_eq!(record["code"], "invalid_request", "{record}");
        assert!(
            record["subject"].as_str().unwrap().contains(".task."),
            "{record}"
        );
        assert!(!record.to_string().contains("secret-canary"), "{record}");
    }
}

/// A retry runs no earlier than its backoff, whoever publishes its task: a task for the
/// next attempt sent the moment an attempt failed waits for the recorded `retry_at`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_runs_no_earlier_than_its_backoff_whoever_publishes_it() {
    let Some(env) = stack("a_retry_runs_no_earlier_than_its_backoff_whoever_publishes_it") else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("backoff");
    let server = Server::start(env, &prefix, &[]).await;
    let id = format!("{prefix}-chain");
    // Attempts 1–6 fail retryably; attempt 5's backoff is 1.6–3.2 s.
    let started = server
        .start_workflow("noop_chain", &id, json!({"steps": 1, "flaky_attempts": 6}))
        .await;
    assert_eq!(started["ok"], true, "{started}");
    let failed = |events: &[serde_json::Value], attempt: u64| {
        events
            .iter()
            .find(|e| e["type"] == "ActivityFailed" && e["data"]["attempt"] == attempt)
            .cloned()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let fifth = loop {
        if let Some(fifth) = failed(&history(&server, &id).await, 5) {
            break fifth;
        }
        assert!(Instant::now() < deadline, "attempt 5 never failed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let scheduled_seq = fifth["data"]["scheduled_seq"].as_u64().unwrap();
    let retry_at = fifth["data"]["retry_at"].as_i64().expect("a retry is due");
    publish_task(
        &server,
        "default",
        &json!({"workflow_id": id, "scheduled_seq": scheduled_seq, "attempt": 6}),
    )
    .await;
    assert_eq!(
        server.wait_terminal(&id, Duration::from_secs(60)).await,
        "completed"
    );
    let events = history(&server, &id).await;
    let sixth = failed(&events, 6).expect("attempt 6 ran and failed");
    let ran_at = chrono::DateTime::parse_from_rfc3339(sixth["recorded_at"].as_str().unwrap())
        .unwrap()
        .timestamp_millis();
    assert!(
        ran_at >= retry_at,
        "attempt 6 was recorded {} ms before its backoff allowed",
        retry_at - ran_at
    );
}

/// A run whose claim another runner took over stops at its next heartbeat, and gives
/// its slot back: with one activity slot, a long step whose claim is taken stops, and
/// the next workflow's step runs long before the long step would have ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_claim_was_taken_over_stops_and_frees_its_slot() {
    let Some(env) = stack("a_run_whose_claim_was_taken_over_stops_and_frees_its_slot") else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("lost");
    let database_url = crate::support::env_value(&env, "HCPFLOW_DATABASE_URL");
    let server = Server::start(env, &prefix, &["--activity-concurrency", "1"]).await;
    let long = format!("{prefix}-long");
    let started = server
        .start_workflow(
            "noop_chain",
            &long,
            json!({"steps": 1, "sleep_ms": 120_000}),
        )
        .await;
    assert_eq!(started["ok"], true, "{started}");
    let pool = sqlx::PgPool::connect(&database_url).await.unwrap();
    // Once the long step is claimed, another runner takes the claim over.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let taken = sqlx::query(
            "UPDATE attempt_claims SET runner = 'another-runner',
                    lease_until = now() + interval '10 minutes'
              WHERE workflow_id = $1",
        )
        .bind(&long)
        .execute(&pool)
        .await
        .unwrap()
        .rows_affected();
        if taken == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "the long step was never claimed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let next = format!("{prefix}-next");
    server
        .start_workflow("noop_chain", &next, json!({"steps": 1}))
        .await;
    // The heartbeat comes every 10 s: the slot is free by then, not after 120 s.
    assert_eq!(
        server.wait_terminal(&next, Duration::from_secs(40)).await,
        "completed",
        "the run whose claim was taken kept its slot"
    );
    let long_events = history(&server, &long).await;
    assert!(
        !long_events.iter().any(|e| e["type"] == "ActivityCompleted"),
        "the run that lost its claim recorded nothing: {long_events:?}"
    );
    // Not left running: the workflow stops waiting for the step on a cancel.
    server
        .api(
            "cancel",
            json!({"workflow_id": long, "reason": "test over"}),
        )
        .await;
    assert_ne!(
        server.wait_terminal(&long, Duration::from_secs(60)).await,
        "running"
    );
    pool.close().await;
}

/// More heads the checkpointer refuses than one scan takes (workflows that ended with a
/// last event that is not an end: their histories do not verify) leave its loop at one
/// scan a tick. Before refused heads counted as a full batch, it scanned them again at
/// once, for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checkpointer_does_not_spin_on_heads_it_refuses() {
    let Some(env) = stack("the_checkpointer_does_not_spin_on_heads_it_refuses") else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("spin");
    let metrics_addr = format!("127.0.0.1:{}", crate::support::free_port());
    let server = Server::start(env, &prefix, &["--metrics-addr", &metrics_addr]).await;
    let subjects = hcpflow_protocol::subjects::Subjects::new(&server.prefix).unwrap();
    let tenant = hcpflow_engine::TenantId::default_tenant();
    let started = Event::from(WorkflowStarted {
        workflow_type: "noop_chain".into(),
        input: json!({"steps": 1}),
        concurrency_key: None,
        parent: None,
    });
    // One more than a scan's batch (100).
    for n in 0..101 {
        let id = format!("{prefix}-refused-{n}");
        record_for(
            &server,
            Some(subjects.events(&tenant, &id)),
            &id,
            "noop_chain",
            WorkflowStatus::Completed,
            new_events(std::slice::from_ref(&started)),
            None,
        )
        .await;
    }
    // The refusals are made within a scan or two; then count what follows.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = counter(&metrics_addr, "hcpflow_checkpoint_scans_total").await;
    assert!(before > 0, "the checkpointer never scanned");
    tokio::time::sleep(Duration::from_secs(4)).await;
    let scans = counter(&metrics_addr, "hcpflow_checkpoint_scans_total").await - before;
    // A scan that signs nothing (every head refused) waits the idle tick: one scan a
    // second, with some slack for a slow machine's timing.
    let ticks = Duration::from_secs(4).as_millis()
        / hcpflow_workers::roles::checkpointer::IDLE_TICK.as_millis();
    let most = u64::try_from(ticks * 3 / 2 + 2).expect("a small number");
    assert!(
        scans <= most,
        "{scans} scans in 4 s (at most {most} expected): the checkpointer spins"
    );
}

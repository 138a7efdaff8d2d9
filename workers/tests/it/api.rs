//! The public request/reply API: starts, idempotency, reads, signals and bad input.

use std::time::Duration;

use hcpflow_engine::WorkflowId;
use serde_json::{json, Value};

use crate::support::{stack, unique, Server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_client_starts_noop_chain_and_sees_it_complete() {
    let Some(env) = stack("a_plain_client_starts_noop_chain_and_sees_it_complete") else {
        return;
    };
    let _stack = crate::support::shared().await;
    let prefix = unique("api");
    let metrics_port = crate::support::free_port();
    let metrics_addr = format!("127.0.0.1:{metrics_port}");
    let server = Server::start(env, &prefix, &["--metrics-addr", &metrics_addr]).await;
    let id = format!("{prefix}-chain");

    let reply = server
        .start_workflow("noop_chain", &id, json!({"steps": 3}))
        .await;
    assert_eq!(
        reply,
        json!({"ok": true, "workflow_id": id, "status": "started"})
    );
    // The reply came after the commit: the workflow exists now.
    assert!(server
        .store
        .get_workflow(&WorkflowId::new(id.clone()).unwrap())
        .await
        .is_ok());

    assert_eq!(
        server.wait_terminal(&id, Duration::from_secs(30)).await,
        "completed"
    );
    let described = server.api("describe", json!({"workflow_id": id})).await;
    assert_eq!(described["ok"], true);
    let workflow = &described["workflow"];
    assert_eq!(workflow["workflow_type"], "noop_chain");
    assert_eq!(workflow["output"], json!({"steps": 3}));
    for field in [
        "workflow_id",
        "status",
        "created_at",
        "updated_at",
        "concurrency_key",
        "output",
        "error",
    ] {
        assert!(
            workflow.get(field).is_some(),
            "describe lacks {field}: {workflow}"
        );
    }

    // Same id, same input: already started. Same id, other input: conflict.
    let again = server
        .start_workflow("noop_chain", &id, json!({"steps": 3}))
        .await;
    assert_eq!(again["status"], "already_started", "{again}");
    let other = server
        .start_workflow("noop_chain", &id, json!({"steps": 4}))
        .await;
    assert_eq!(other["error"]["code"], "conflict", "{other}");

    // History: every event, chained, paged.
    let page = server
        .api("history", json!({"workflow_id": id, "limit": 5}))
        .await;
    let events = page["events"].as_array().unwrap();
    assert_eq!(events.len(), 5);
    assert_eq!(events[0]["type"], "WorkflowStarted");
    assert_eq!(events[1]["prev_hash"], events[0]["hash"]);
    for field in ["seq", "type", "recorded_at", "data", "hash", "prev_hash"] {
        assert!(
            events[0].get(field).is_some(),
            "history entry lacks {field}"
        );
    }
    let rest = server
        .api(
            "history",
            json!({"workflow_id": id, "cursor": page["cursor"]}),
        )
        .await;
    let all = events.len() + rest["events"].as_array().unwrap().len();
    assert_eq!(rest["cursor"], Value::Null);
    // 1 start + 3 × (scheduled, completed, compensation registered) + completed.
    assert_eq!(all, 11);
    let verified = server
        .store
        .verify_history(&WorkflowId::new(id.clone()).unwrap())
        .await
        .unwrap();
    assert_eq!(verified.events, 11);

    // Prometheus metrics count the work.
    let metrics = crate::support::http_get(&metrics_addr, "/metrics").await;
    assert!(metrics.starts_with("HTTP/1.1 200"), "{metrics}");
    let activities = metrics
        .lines()
        .find_map(|l| l.strip_prefix("hcpflow_activity_tasks_total "))
        .and_then(|n| n.trim().parse::<u64>().ok())
        .unwrap_or(0);
    assert!(activities >= 3, "{metrics}");

    // A fan-out: fifty completions of one workflow arrive at once; all land.
    let fan = format!("{prefix}-fan");
    server
        .start_workflow("noop_fanout", &fan, json!({"width": 50}))
        .await;
    assert_eq!(
        server.wait_terminal(&fan, Duration::from_secs(60)).await,
        "completed"
    );
    let fan_id = WorkflowId::new(fan.clone()).unwrap();
    assert_eq!(
        server.store.verify_history(&fan_id).await.unwrap().events,
        1 + 50 + 50 + 1
    );
    // They took turns in this process, each step on the history the one before cached:
    // none lost a race to append (the only appender of these workflows is this server).
    let metrics = crate::support::http_get(&metrics_addr, "/metrics").await;
    let conflicts = metrics
        .lines()
        .find_map(|l| l.strip_prefix("hcpflow_append_conflicts_total "))
        .and_then(|n| n.trim().parse::<u64>().ok());
    assert_eq!(conflicts, Some(0), "{metrics}");

    // List by type finds it.
    let listed = server
        .api(
            "list",
            json!({"workflow_type": "noop_chain", "status": "completed", "limit": 1000}),
        )
        .await;
    assert!(
        listed["workflows"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["workflow_id"] == id),
        "{listed}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_at_rolls_back_in_reverse_and_ends_compensated() {
    let Some(env) = stack("fail_at_rolls_back_in_reverse_and_ends_compensated") else {
        return;
    };
    let _stack = crate::support::shared().await;
    let prefix = unique("saga");
    let server = Server::start(env, &prefix, &[]).await;
    let id = format!("{prefix}-fails");
    server
        .start_workflow("noop_chain", &id, json!({"steps": 4, "fail_at": 3}))
        .await;
    assert_eq!(
        server.wait_terminal(&id, Duration::from_secs(30)).await,
        "compensated"
    );
    let history = server
        .api("history", json!({"workflow_id": id, "limit": 1000}))
        .await;
    let undone: Vec<u64> = history["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "ActivityScheduled" && e["data"]["compensation_of"].is_u64())
        .map(|e| e["data"]["input"]["step"].as_u64().unwrap())
        .collect();
    assert_eq!(undone, vec![2, 1]);
    let described = server.api("describe", json!({"workflow_id": id})).await;
    assert_eq!(
        described["workflow"]["error"]["kind"], "compensated",
        "{described}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signals_cancel_and_lookups_of_unknown_workflows() {
    let Some(env) = stack("signals_cancel_and_lookups_of_unknown_workflows") else {
        return;
    };
    let _stack = crate::support::shared().await;
    let prefix = unique("cancel");
    let server = Server::start(env, &prefix, &[]).await;
    let id = format!("{prefix}-slow");
    server
        .start_workflow("noop_chain", &id, json!({"steps": 50, "sleep_ms": 200}))
        .await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    let signalled = server
        .api(
            "signal",
            json!({"workflow_id": id, "signal": "note", "payload": {"hello": 1}}),
        )
        .await;
    assert_eq!(signalled, json!({"ok": true}));
    let cancelled = server
        .api("cancel", json!({"workflow_id": id, "reason": "test"}))
        .await;
    assert_eq!(cancelled, json!({"ok": true, "status": "cancel_requested"}));
    assert_eq!(
        server.wait_terminal(&id, Duration::from_secs(60)).await,
        "cancelled"
    );
    let late = server.api("cancel", json!({"workflow_id": id})).await;
    assert_eq!(late["error"]["code"], "conflict", "{late}");

    for verb in ["describe", "history", "cancel"] {
        let missing = server
            .api(verb, json!({"workflow_id": format!("{prefix}-nope")}))
            .await;
        assert_eq!(missing["error"]["code"], "not_found", "{verb}: {missing}");
    }
}

/// The soak's timer-and-signal workflow: it sleeps, then waits for its signal however
/// long, then returns the signal's payload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn noop_wait_sleeps_then_waits_for_its_signal() {
    let Some(env) = stack("noop_wait_sleeps_then_waits_for_its_signal") else {
        return;
    };
    let _stack = crate::support::shared().await;
    let prefix = unique("wait");
    let server = Server::start(env, &prefix, &[]).await;
    let id = format!("{prefix}-w");
    let started = server
        .start_workflow("noop_wait", &id, json!({"timer_ms": 300, "signal": "go"}))
        .await;
    assert_eq!(started["ok"], true, "{started}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let waiting = server.api("history", json!({"workflow_id": id})).await;
    let kinds: Vec<&str> = waiting["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["type"].as_str())
        .collect();
    assert!(kinds.contains(&"TimerFired"), "{kinds:?}");
    assert!(
        !kinds.iter().any(|k| k.starts_with("Activity")),
        "{kinds:?}"
    );
    let signalled = server
        .api(
            "signal",
            json!({"workflow_id": id, "signal": "go", "payload": {"n": 7}}),
        )
        .await;
    assert_eq!(signalled, json!({"ok": true}));
    assert_eq!(
        server.wait_terminal(&id, Duration::from_secs(60)).await,
        "completed"
    );
    let described = server.api("describe", json!({"workflow_id": id})).await;
    assert_eq!(
        described["workflow"]["output"],
        json!({"signal": {"n": 7}}),
        "{described}"
    );
    let too_long = server
        .start_workflow(
            "noop_wait",
            &format!("{prefix}-long"),
            json!({"timer_ms": 100_000_000_000u64}),
        )
        .await;
    assert_eq!(too_long["error"]["code"], "invalid_request", "{too_long}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_bad_input_gets_a_clear_error_and_nothing_breaks() {
    let Some(env) = stack("every_kind_of_bad_input_gets_a_clear_error_and_nothing_breaks") else {
        return;
    };
    let _stack = crate::support::shared().await;
    let prefix = unique("bad");
    let server = Server::start(env, &prefix, &["--max-body-bytes", "4096"]).await;
    let code = |reply: &Value| reply["error"]["code"].as_str().unwrap_or("").to_owned();

    let not_json = server
        .try_api_raw("start", b"{not json".to_vec())
        .await
        .unwrap();
    assert_eq!(code(&not_json), "invalid_json", "{not_json}");
    let not_object = server
        .try_api_raw("start", b"[1, 2]".to_vec())
        .await
        .unwrap();
    assert_eq!(code(&not_object), "invalid_request");
    let unknown_type = server
        .start_workflow("teleport", &format!("{prefix}-x"), json!({}))
        .await;
    assert_eq!(
        code(&unknown_type),
        "unknown_workflow_type",
        "{unknown_type}"
    );
    let missing = server.api("start", json!({"input": {}})).await;
    assert_eq!(code(&missing), "invalid_request");
    assert!(
        missing["error"]["message"]
            .as_str()
            .unwrap()
            .contains("workflow_type: required"),
        "{missing}"
    );
    let mistyped = server
        .api(
            "start",
            json!({"workflow_type": 7, "workflow_id": "a.b", "input": {}}),
        )
        .await;
    let message = mistyped["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("workflow_type: must be a string") && message.contains("workflow_id"),
        "every problem named: {message}"
    );
    let bad_input = server
        .start_workflow(
            "noop_chain",
            &format!("{prefix}-y"),
            json!({"steps": "ten"}),
        )
        .await;
    assert_eq!(code(&bad_input), "invalid_request", "{bad_input}");
    let oversized = server
        .try_api_raw(
            "start",
            serde_json::to_vec(
                &json!({"workflow_type": "noop_chain", "input": {"pad": "x".repeat(10_000)}}),
            )
            .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(code(&oversized), "too_large", "{oversized}");
    let verb = server.api("teleport", json!({})).await;
    assert_eq!(code(&verb), "invalid_request");
    assert!(verb["error"]["message"]
        .as_str()
        .unwrap()
        .contains("unknown verb"));
    let bad_limit = server
        .api("list", json!({"limit": 0, "status": "sleeping"}))
        .await;
    assert_eq!(code(&bad_limit), "invalid_request");

    // And the server still works.
    let id = format!("{prefix}-fine");
    assert_eq!(
        server
            .start_workflow("noop_chain", &id, json!({"steps": 1}))
            .await["ok"],
        true
    );
    assert_eq!(
        server.wait_terminal(&id, Duration::from_secs(30)).await,
        "completed"
    );
}

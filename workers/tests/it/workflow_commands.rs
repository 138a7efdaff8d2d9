//! `hcpflow workflow list | describe | history | watch | cancel | signal` as a user runs
//! them, and the periodic checkpoint of a running workflow.

use std::time::Duration;

use serde_json::Value;

use crate::support::{output_json, output_text, run_cli, stack, unique, Server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workflow_commands_inspect_signal_and_cancel_a_running_workflow() {
    let Some(env) = stack("the_workflow_commands_inspect_signal_and_cancel_a_running_workflow")
    else {
        return;
    };
    if std::env::var("HCPFLOW_AUDIT_SIGNING_KEY").is_err() {
        assert!(std::env::var_os("HCPFLOW_REQUIRE_STACK").is_none());
        return;
    }
    let _shared = crate::support::shared().await;
    let prefix = unique("wfc");
    let server = Server::start(env, &prefix, &["--checkpoint-every-secs", "1"]).await;
    let id = format!("{prefix}-slow");
    let reply = server
        .start_workflow(
            "noop_chain",
            &id,
            serde_json::json!({"steps": 30, "sleep_ms": 500}),
        )
        .await;
    assert_eq!(reply["ok"], true, "{reply}");

    let listed = output_json(
        &run_cli(
            &server,
            &["workflow", "list", "--type", "noop_chain", "-o", "json"],
        )
        .await,
    );
    let row = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["workflow_id"] == id.as_str())
        .cloned()
        .unwrap_or_else(|| panic!("{id} not listed: {listed}"));
    assert_eq!(row["status"], "running");
    let described =
        output_json(&run_cli(&server, &["workflow", "describe", &id, "-o", "json"]).await);
    assert_eq!(described["workflow_type"], "noop_chain");

    // A running workflow is signed periodically (every second here).
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let report = output_json(&run_cli(&server, &["audit", "verify", &id, "-o", "json"]).await);
    assert_eq!(report[0]["verified"], true, "{report}");
    assert!(report[0]["signed_seq"].as_u64().is_some(), "{report}");

    let signal = run_cli(
        &server,
        &["workflow", "signal", &id, "hello", r#"{"from": "test"}"#],
    )
    .await;
    assert!(signal.status.success(), "{:?}", output_text(&signal));
    let bad_payload = run_cli(&server, &["workflow", "signal", &id, "hello", "not json"]).await;
    assert!(!bad_payload.status.success());
    assert!(output_text(&bad_payload).1.contains("not JSON"));

    let cancel = run_cli(&server, &["workflow", "cancel", &id, "--reason", "testing"]).await;
    assert!(cancel.status.success(), "{:?}", output_text(&cancel));
    let watched = run_cli(&server, &["workflow", "watch", &id]).await;
    let (stdout, stderr) = output_text(&watched);
    assert!(
        !watched.status.success(),
        "a cancelled workflow is not a success"
    );
    assert!(stdout.contains("cancel requested: testing"), "{stdout}");
    assert!(stdout.contains("● cancelled"), "{stdout}");
    assert!(stderr.contains("ended cancelled"), "{stderr}");

    let history = run_cli(&server, &["workflow", "history", &id]).await;
    let (text, _) = output_text(&history);
    assert!(
        text.contains("SignalReceived") && text.contains("hello"),
        "{text}"
    );
    assert!(
        text.contains("CancelRequested") && text.contains("WorkflowCancelled"),
        "{text}"
    );
    let lines = run_cli(&server, &["workflow", "history", &id, "-o", "json"]).await;
    let (json_lines, _) = output_text(&lines);
    let entries: Vec<Value> = json_lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(entries[0]["seq"], 1);
    assert!(entries.iter().all(|e| e["hash"].is_string()));

    // Ended: signed at its last event.
    let report = output_json(&run_cli(&server, &["audit", "verify", &id, "-o", "json"]).await);
    assert_eq!(report[0]["signed_seq"], entries.len() as u64, "{report}");

    let missing = run_cli(
        &server,
        &["workflow", "describe", &format!("{prefix}-nope")],
    )
    .await;
    assert!(!missing.status.success());
    assert!(output_text(&missing).1.contains("not_found"));
}

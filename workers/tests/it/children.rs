//! Child workflows under a hostile client (issue 18): a child's end is never lost, and
//! a workflow that took a child's id is the child's failure, never its result.

use std::time::Duration;

use hcpflow_engine::event::{ChildStarted, ParentRef, WorkflowCompleted, WorkflowStarted};
use hcpflow_engine::{Event, Seq, WorkflowId, WorkflowStatus};
use serde_json::json;

use crate::histories::{history, record_history, wake};
use crate::support::{stack, unique, Server};

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
    assert_eq!(reserved["error"]["code"], "invalid_request", "{reserved}");

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
    // Nor may a client take a child's id its parent has not started yet.
    assert_eq!(
        taken["error"]["code"], "invalid_request",
        "a child's id is reserved before the parent starts it: {taken}"
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

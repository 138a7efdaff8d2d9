//! Every kind of workflow error, in every event that ends a workflow, is recorded in
//! the index and read back through the API (`describe` and `history`) as it was written.
//! A `failed` destroy once could not be recorded at all: its error did not serialise.

use hcpflow_engine::event::{WorkflowCompensated, WorkflowFailed, WorkflowStarted};
use hcpflow_engine::{ActivityFailure, Event, Seq, WorkflowError, WorkflowId, WorkflowStatus};
use hcpflow_eventstore::{AppendBatch, NewEvent, NewWorkflow};
use hcpflow_workers::runtime::decide::result_of;
use serde_json::json;

use crate::support::{stack, unique, Server};

fn every_workflow_error() -> Vec<WorkflowError> {
    vec![
        WorkflowError::Activity {
            activity_type: "aws.delete_vpc".into(),
            seq: Seq::new(7).unwrap(),
            failure: ActivityFailure::permanent("DependencyViolation", "sg-1 is in use"),
        },
        WorkflowError::Child {
            child_id: "child-1".into(),
            message: "failed".into(),
        },
        WorkflowError::Cancelled,
        WorkflowError::invalid_input("name: required; zones: required"),
        WorkflowError::failed("left in AWS: security group sg-0abc (demo-x7k2p-guest-lb)"),
    ]
}

fn new_event(event: &Event) -> NewEvent {
    let (kind, data) = event.to_record();
    NewEvent::new(kind, data)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_terminal_error_round_trips_through_the_index_and_the_api() {
    let Some(env) = stack("every_terminal_error_round_trips_through_the_index_and_the_api") else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("terr");
    let server = Server::start(env, &prefix, &[]).await;
    for (i, error) in every_workflow_error().into_iter().enumerate() {
        let endings = [
            (
                Event::from(WorkflowFailed {
                    error: error.clone(),
                    left: Vec::new(),
                }),
                WorkflowStatus::Failed,
            ),
            (
                Event::from(WorkflowCompensated {
                    cause: error.clone(),
                }),
                WorkflowStatus::Compensated,
            ),
        ];
        for (j, (end, status)) in endings.into_iter().enumerate() {
            let id = format!("{prefix}-{i}-{j}");
            let started = Event::from(WorkflowStarted {
                workflow_type: "noop_chain".into(),
                input: json!({"steps": 1}),
                concurrency_key: None,
                parent: None,
            });
            let (output, index_error) = result_of(&end);
            let mut batch = AppendBatch::new(
                WorkflowId::new(&id).unwrap(),
                Seq::FIRST,
                vec![new_event(&started), new_event(&end)],
            )
            .with_status(status);
            batch.output = output;
            batch.error = index_error;
            server
                .store
                .create_workflow(
                    &NewWorkflow {
                        workflow_type: "noop_chain".into(),
                        status,
                        concurrency_key: None,
                        parent_id: None,
                        input_digest: None,
                        events_subject: None,
                        tenant: hcpflow_engine::TenantId::default_tenant(),
                    },
                    batch,
                )
                .await
                .unwrap_or_else(|e| panic!("{error:?} in {}: {e}", end.kind()));

            let described = server.api("describe", json!({"workflow_id": id})).await;
            assert_eq!(described["ok"], true, "{described}");
            let workflow = &described["workflow"];
            assert_eq!(workflow["status"], status.as_str(), "{described}");
            assert_eq!(
                workflow["error"]["message"],
                error.to_string(),
                "{described}"
            );
            let cause: WorkflowError = serde_json::from_value(workflow["error"]["cause"].clone())
                .unwrap_or_else(|e| panic!("cause of {described}: {e}"));
            assert_eq!(cause, error);

            let history = server.api("history", json!({"workflow_id": id})).await;
            let last = &history["events"][1];
            assert_eq!(last["type"], end.kind(), "{history}");
            let reread = Event::from_record(end.kind(), last["data"].clone())
                .unwrap_or_else(|e| panic!("{history}: {e}"));
            assert_eq!(reread, end);
        }
    }
}

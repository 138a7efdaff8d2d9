//! CPU work of a step on a long history runs off the async worker threads: the other
//! tasks of the process (NATS deliveries, heartbeats, timers) keep running meanwhile.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hcpflow_engine::event::{ActivityCompleted, ActivityScheduled, WorkflowStarted};
use hcpflow_engine::{ActivityOptions, Event, Seq, TenantId, WorkflowId, WorkflowStatus};
use hcpflow_eventstore::{AppendBatch, EventStore, NewWorkflow};
use hcpflow_protocol::subjects::Subjects;
use hcpflow_workers::runtime::journal::Journal;
use hcpflow_workers::runtime::metrics::Metrics;
use serde_json::json;

use crate::histories::new_events;
use crate::support::{env_value, stack, unique};

/// A `noop_chain` history of `steps` completed steps: 1 + 2 × `steps` events.
fn long_chain(steps: u64) -> Vec<Event> {
    let mut events = vec![Event::from(WorkflowStarted {
        workflow_type: "noop_chain".into(),
        input: json!({"steps": steps + 1}),
        concurrency_key: None,
        parent: None,
    })];
    for step in 1..=steps {
        let input = json!({"step": step, "sleep_ms": 0, "fail": false, "payload_bytes": 0});
        let scheduled_seq = Seq::new(events.len() as u64 + 1).unwrap();
        events.push(Event::from(ActivityScheduled {
            activity_type: "noop.step".into(),
            input_digest: hcpflow_engine::event::digest(&input),
            input,
            options: ActivityOptions::default(),
            compensation_of: None,
        }));
        events.push(Event::from(ActivityCompleted {
            scheduled_seq,
            attempt: 1,
            result: json!({"step": step}),
        }));
    }
    events
}

/// One async worker thread: whatever holds it holds up every other task. A step on a
/// 601-event history sleeps where its decision runs (standing for a replay's CPU time);
/// a task ticking every millisecond must tick meanwhile. Before the decision ran in
/// `block_in_place`, the ticker stood still for the whole 300 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_step_on_a_long_history_does_not_hold_up_the_other_tasks() {
    let Some(env) = stack("a_step_on_a_long_history_does_not_hold_up_the_other_tasks") else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("cpu");
    // No server runs here to migrate the database.
    let app_url = env_value(&env, "HCPFLOW_DATABASE_URL");
    let role = hcpflow_eventstore::migrate::role_of_url(&app_url).unwrap();
    hcpflow_eventstore::migrate::run_with_url(
        &env_value(&env, "HCPFLOW_DATABASE_ADMIN_URL"),
        Some(&role),
    )
    .await
    .unwrap();
    let store = EventStore::connect(&app_url, 2).await.unwrap();
    let nats = async_nats::connect(env_value(&env, "HCPFLOW_NATS_URL"))
        .await
        .unwrap();
    let journal = Arc::new(Journal::new(
        store.clone(),
        async_nats::jetstream::new(nats),
        Subjects::new(&prefix).unwrap(),
        Arc::new(Metrics::default()),
        None,
    ));

    let id = WorkflowId::new(format!("{prefix}-long")).unwrap();
    let batch = AppendBatch::new(id.clone(), Seq::FIRST, new_events(&long_chain(300)))
        .with_status(WorkflowStatus::Running);
    store
        .create_workflow(
            &NewWorkflow {
                workflow_type: "noop_chain".into(),
                status: WorkflowStatus::Running,
                concurrency_key: None,
                parent_id: None,
                input_digest: None,
                events_subject: None,
                tenant: TenantId::default_tenant(),
            },
            batch,
        )
        .await
        .unwrap();

    let ticks = Arc::new(AtomicU64::new(0));
    let ticker = tokio::spawn({
        let ticks = ticks.clone();
        async move {
            loop {
                ticks.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    });
    while ticks.load(Ordering::Relaxed) == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }

    // Both on the one worker thread, as a server's tasks share its workers.
    let ticked_meanwhile = tokio::spawn({
        let ticks = ticks.clone();
        async move {
            let mut ticked = None;
            journal
                .step(&id, |_, history| {
                    assert!(history.len() > 600, "{} events", history.len());
                    let before = ticks.load(Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(300));
                    ticked = Some(ticks.load(Ordering::Relaxed) - before);
                    None
                })
                .await
                .unwrap();
            ticked.expect("the step looked at the history")
        }
    })
    .await
    .unwrap();
    ticker.abort();
    assert!(
        ticked_meanwhile > 0,
        "the other tasks stood still while a step decided on a long history"
    );
}

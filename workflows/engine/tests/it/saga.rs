//! Compensations: reverse order, retries, what is left, keep_on_failure, cancel.

use std::time::Duration;

use hcpflow_engine::event::{Event, LeftBehind};
use hcpflow_engine::history::{registered_compensations, CompensationState};
use hcpflow_engine::{WorkflowContext, WorkflowError, WorkflowRegistry, WorkflowStatus};
use serde::Deserialize;
use serde_json::json;

use crate::support::{env, executed, Create, Undo};

#[derive(Debug, Deserialize)]
struct Plan {
    /// One Create per entry, each followed by its Undo registration.
    steps: Vec<(String, u32, bool)>,
    #[serde(default)]
    undo_flaky: u32,
    #[serde(default)]
    undo_permanent: Vec<String>,
    #[serde(default)]
    keep_on_failure: bool,
    #[serde(default)]
    sleep_at_end_ms: u64,
}

async fn provision(ctx: WorkflowContext, plan: Plan) -> Result<Vec<String>, WorkflowError> {
    ctx.keep_on_failure(plan.keep_on_failure);
    let mut made = Vec::new();
    for (key, flaky, permanent) in plan.steps {
        made.push(
            ctx.activity(Create {
                key: key.clone(),
                flaky,
                permanent,
            })
            .await?,
        );
        ctx.on_rollback(Undo {
            permanent: plan.undo_permanent.contains(&key),
            key,
            flaky: plan.undo_flaky,
        });
    }
    if plan.sleep_at_end_ms > 0 {
        ctx.sleep(Duration::from_millis(plan.sleep_at_end_ms))
            .await?;
    }
    Ok(made)
}

fn registry() -> WorkflowRegistry {
    let mut registry = WorkflowRegistry::new();
    registry.register("provision", provision).unwrap();
    registry
}

fn undo_order(
    env: &hcpflow_engine::testing::TestEnv,
    id: &hcpflow_engine::WorkflowId,
) -> Vec<String> {
    env.history(id)
        .iter()
        .filter_map(|e| match &e.event {
            Event::ActivityScheduled(s) if s.compensation_of.is_some() => {
                Some(s.input["key"].as_str().unwrap().to_owned())
            }
            _ => None,
        })
        .collect()
}

#[test]
fn success_completes_and_keeps_compensations_readable() {
    let mut env = env(registry());
    let id = env.start(
        "ok",
        "provision",
        json!({"steps": [["a", 0, false], ["b", 1, false]]}),
    );
    env.run_until_idle();
    assert_eq!(env.status(&id), WorkflowStatus::Completed);
    assert!(
        matches!(env.terminal(&id), Some(Event::WorkflowCompleted(c)) if c.output == json!(["made-a", "made-b"]))
    );
    // b failed once and was retried after its backoff.
    assert_eq!(
        executed(&env, &id),
        vec![
            ("test.create".into(), 1),
            ("test.create".into(), 1),
            ("test.create".into(), 2)
        ]
    );
    let compensations = registered_compensations(&env.history(&id));
    assert_eq!(compensations.len(), 2);
    assert!(compensations
        .iter()
        .all(|c| c.state == CompensationState::NotRun));
    assert_eq!(compensations[1].input["key"], "b");
}

#[test]
fn a_failure_runs_compensations_in_reverse_and_ends_compensated() {
    let mut env = env(registry());
    let id = env.start(
        "rollback",
        "provision",
        json!({"steps": [["a", 0, false], ["b", 0, false], ["c", 0, false], ["d", 0, true]]}),
    );
    env.run_until_idle();
    assert_eq!(env.status(&id), WorkflowStatus::Compensated);
    assert_eq!(undo_order(&env, &id), vec!["c", "b", "a"]);
    let history = env.history(&id);
    let rollback = history.iter().find_map(|e| match &e.event {
        Event::RollbackStarted(r) => Some(r.clone()),
        _ => None,
    });
    let rollback = rollback.expect("RollbackStarted recorded");
    assert_eq!(rollback.compensations, 3);
    assert!(
        matches!(rollback.cause, WorkflowError::Activity { ref failure, .. } if failure.kind == "Refused")
    );
    assert!(registered_compensations(&history)
        .iter()
        .all(|c| c.state == CompensationState::Undone));
}

#[test]
fn a_flaky_compensation_is_retried_until_it_succeeds() {
    let mut env = env(registry());
    let id = env.start(
        "flaky-undo",
        "provision",
        json!({"steps": [["a", 0, false], ["b", 0, true]], "undo_flaky": 2}),
    );
    env.run_until_idle();
    assert_eq!(env.status(&id), WorkflowStatus::Compensated);
    let undo_attempts: Vec<u32> = executed(&env, &id)
        .into_iter()
        .filter(|(t, _)| t == "test.undo")
        .map(|(_, a)| a)
        .collect();
    assert_eq!(undo_attempts, vec![1, 2, 3]);
}

#[test]
fn a_compensation_that_never_succeeds_is_reported_and_the_rest_still_run() {
    let mut env = env(registry());
    let id = env.start(
        "stuck-undo",
        "provision",
        json!({"steps": [["a", 0, false], ["b", 0, false], ["c", 0, false], ["d", 0, true]], "undo_permanent": ["b"]}),
    );
    env.run_until_idle();
    assert_eq!(env.status(&id), WorkflowStatus::Failed);
    assert_eq!(undo_order(&env, &id), vec!["c", "b", "a"]);
    let Some(Event::WorkflowFailed(failed)) = env.terminal(&id) else {
        panic!("WorkflowFailed expected")
    };
    let left: Vec<&LeftBehind> = failed.left.iter().collect();
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0].activity_type, "test.undo");
    assert_eq!(left[0].input["key"], "b");
    assert!(left[0].reason.contains("Refused"), "{}", left[0].reason);
    let states: Vec<CompensationState> = registered_compensations(&env.history(&id))
        .into_iter()
        .map(|c| c.state)
        .collect();
    assert!(matches!(
        states.as_slice(),
        [
            CompensationState::Undone,
            CompensationState::Failed(_),
            CompensationState::Undone
        ]
    ));
}

#[test]
fn keep_on_failure_fails_and_lists_what_was_kept() {
    let mut env = env(registry());
    let id = env.start(
        "keep",
        "provision",
        json!({"steps": [["a", 0, false], ["b", 0, true]], "keep_on_failure": true}),
    );
    env.run_until_idle();
    assert_eq!(env.status(&id), WorkflowStatus::Failed);
    assert!(undo_order(&env, &id).is_empty());
    let Some(Event::WorkflowFailed(failed)) = env.terminal(&id) else {
        panic!("WorkflowFailed expected")
    };
    assert_eq!(failed.left.len(), 1);
    assert!(failed.left[0].reason.contains("kept"));
}

#[test]
fn a_failure_with_nothing_registered_just_fails() {
    let mut env = env(registry());
    let id = env.start("bare", "provision", json!({"steps": [["a", 0, true]]}));
    env.run_until_idle();
    assert_eq!(env.status(&id), WorkflowStatus::Failed);
    assert!(!env
        .history(&id)
        .iter()
        .any(|e| matches!(e.event, Event::RollbackStarted(_))));
}

#[test]
fn cancel_stops_the_wait_undoes_everything_and_ends_cancelled() {
    let mut env = env(registry());
    let id = env.start(
        "cancel",
        "provision",
        json!({"steps": [["a", 0, false], ["b", 0, false]], "sleep_at_end_ms": 3_600_000}),
    );
    // Run until the workflow sleeps: nothing queued, the timer armed.
    while !env.queue.is_empty() {
        env.step();
    }
    assert_eq!(env.status(&id), WorkflowStatus::Running);
    env.cancel(&id, "user asked");
    env.run_until_idle();
    assert_eq!(env.status(&id), WorkflowStatus::Cancelled);
    assert_eq!(undo_order(&env, &id), vec!["b", "a"]);
    let history = env.history(&id);
    assert!(
        history
            .iter()
            .any(|e| matches!(e.event, Event::TimerCancelled(_))),
        "the sleep was cancelled"
    );
    assert!(!history
        .iter()
        .any(|e| matches!(e.event, Event::TimerFired(_))));
    assert!(
        matches!(env.terminal(&id), Some(Event::WorkflowCancelled(c)) if c.reason.as_deref() == Some("user asked"))
    );
}

/// `Create` that declares it creates something: a cancel waits for it.
#[derive(Debug, serde::Serialize)]
struct CreateFinishing {
    key: String,
}

impl hcpflow_engine::Activity for CreateFinishing {
    const TYPE: &'static str = "test.create";
    type Output = String;
    const FINISHES_ON_CANCEL: bool = true;
}

async fn provision_finishing(
    ctx: WorkflowContext,
    keys: Vec<String>,
) -> Result<Vec<String>, WorkflowError> {
    let mut made = Vec::new();
    for key in keys {
        made.push(ctx.activity(CreateFinishing { key: key.clone() }).await?);
        ctx.on_rollback(Undo {
            key,
            flaky: 0,
            permanent: false,
        });
    }
    Ok(made)
}

/// Starts a two-create workflow and cancels it while the second create runs (its task
/// taken off the queue, as by a worker, and put back after the cancel was handled).
fn cancel_during_second_create(
    workflow_type: &str,
) -> (hcpflow_engine::testing::TestEnv, hcpflow_engine::WorkflowId) {
    let mut registry = registry();
    registry
        .register("provision_finishing", provision_finishing)
        .unwrap();
    let mut env = env(registry);
    let input = match workflow_type {
        "provision" => json!({"steps": [["a", 0, false], ["b", 0, false], ["c", 0, false]]}),
        _ => json!(["a", "b", "c"]),
    };
    let id = env.start("mid", workflow_type, input);
    env.run_steps(3); // start, create a, register + schedule b
    let running = env.queue.pop().expect("the second create's task");
    env.cancel(&id, "user asked");
    env.run_steps(1);
    env.queue.push(running);
    env.run_until_idle();
    (env, id)
}

#[test]
fn a_cancel_waits_for_a_running_create_and_undoes_it_too() {
    let (env, id) = cancel_during_second_create("provision_finishing");
    assert_eq!(env.status(&id), WorkflowStatus::Cancelled);
    assert_eq!(
        undo_order(&env, &id),
        vec!["b", "a"],
        "b finished and is undone"
    );
    let history = env.history(&id);
    assert!(!history
        .iter()
        .any(|e| matches!(e.event, Event::ActivityCancelRequested(_))));
    let creates = history
        .iter()
        .filter(
            |e| matches!(&e.event, Event::ActivityScheduled(s) if s.activity_type == "test.create"),
        )
        .count();
    assert_eq!(creates, 2, "nothing new starts after the cancel");

    // An ordinary call is abandoned at once: only a is undone.
    let (env, id) = cancel_during_second_create("provision");
    assert_eq!(env.status(&id), WorkflowStatus::Cancelled);
    assert_eq!(undo_order(&env, &id), vec!["a"]);
    assert!(env
        .history(&id)
        .iter()
        .any(|e| matches!(e.event, Event::ActivityCancelRequested(_))));
}

//! What workflow code can do through its context, run by the driver and replayed.

use std::time::Duration;

use hcpflow_engine::event::{ActivityCompleted, Event, HistoryEvent};
use hcpflow_engine::history::accepts_activity_outcome;
use hcpflow_engine::testing::{task_entropy, TestEnv};
use hcpflow_engine::{
    run_workflow_task, ExecError, IdempotencyKey, Seq, WorkflowContext, WorkflowError,
    WorkflowRegistry, WorkflowStatus,
};
use serde_json::{json, Value};

use crate::support::{env, Create};

fn replays_cleanly(env: &TestEnv, registry: &WorkflowRegistry, id: &hcpflow_engine::WorkflowId) {
    let history = env.history(id);
    let outcome = run_workflow_task(registry, id, &history, task_entropy(id, 0))
        .expect("the recorded history replays");
    assert!(
        outcome.commands.is_empty(),
        "a finished history asks for nothing new: {:?}",
        outcome.commands
    );
}

async fn greeter(ctx: WorkflowContext, _: Value) -> Result<Value, WorkflowError> {
    let first: String = ctx.signal("name").await?;
    let second: String = ctx.signal("name").await?;
    let started = ctx.now();
    ctx.sleep(Duration::from_secs(90)).await?;
    let waited = ctx.now().since(started);
    Ok(json!({"names": [first, second], "waited_ms": waited.as_millis() as u64}))
}

#[test]
fn signals_are_buffered_in_order_and_timers_move_now() {
    let mut registry = WorkflowRegistry::new();
    registry.register("greeter", greeter).unwrap();
    let mut env = env(registry);
    let id = env.start("greeter", "greeter", json!(null));
    env.signal(&id, "name", "ada"); // before anyone waits: buffered
    env.run_until_idle();
    assert_eq!(
        env.status(&id),
        WorkflowStatus::Running,
        "waiting for the second signal"
    );
    env.signal(&id, "name", "grace");
    env.run_until_idle();
    let Some(Event::WorkflowCompleted(done)) = env.terminal(&id) else {
        panic!("not completed")
    };
    assert_eq!(
        done.output,
        json!({"names": ["ada", "grace"], "waited_ms": 90_000})
    );

    let mut registry = WorkflowRegistry::new();
    registry.register("greeter", greeter).unwrap();
    replays_cleanly(&env, &registry, &id);
}

async fn randomness(ctx: WorkflowContext, _: Value) -> Result<Value, WorkflowError> {
    Ok(json!({"uuid": ctx.uuid(), "random": ctx.random(), "uuid2": ctx.uuid()}))
}

#[test]
fn uuid_and_random_are_recorded_and_replayed() {
    let mut registry = WorkflowRegistry::new();
    registry.register("randomness", randomness).unwrap();
    let mut env = env(registry);
    let id = env.start("random", "randomness", json!(null));
    env.run_until_idle();
    let Some(Event::WorkflowCompleted(done)) = env.terminal(&id) else {
        panic!("not completed")
    };
    let uuid = done.output["uuid"].as_str().unwrap();
    assert_eq!(uuid.len(), 36);
    assert_eq!(&uuid[14..15], "4", "version 4: {uuid}");
    assert_ne!(done.output["uuid"], done.output["uuid2"]);

    // Replaying with entirely different entropy yields the recorded values.
    let mut registry = WorkflowRegistry::new();
    registry.register("randomness", randomness).unwrap();
    let history = env.history(&id);
    let upto_commands = &history[..1];
    let outcome = run_workflow_task(
        &registry,
        &id,
        upto_commands,
        Box::new(hcpflow_engine::SeededEntropy::new(999)),
    )
    .unwrap();
    assert_ne!(
        outcome.commands[..3],
        history[1..4]
            .iter()
            .map(|e| e.event.clone())
            .collect::<Vec<_>>()[..],
        "fresh entropy, fresh values"
    );
    let full = run_workflow_task(
        &registry,
        &id,
        &history,
        Box::new(hcpflow_engine::SeededEntropy::new(999)),
    )
    .unwrap();
    assert!(full.commands.is_empty());
}

async fn fan_out(ctx: WorkflowContext, width: usize) -> Result<Vec<String>, WorkflowError> {
    let calls = (0..width).map(|n| {
        ctx.activity(Create {
            key: format!("k{n}"),
            flaky: (n % 7 == 3) as u32,
            permanent: false,
        })
    });
    ctx.join_all(calls).await.into_iter().collect()
}

#[test]
fn join_all_is_deterministic_at_any_width() {
    let mut registry = WorkflowRegistry::new();
    registry.register("fan_out", fan_out).unwrap();
    let mut env = env(registry);
    let id = env.start("fan", "fan_out", 64);
    env.run_until_idle();
    let Some(Event::WorkflowCompleted(done)) = env.terminal(&id) else {
        panic!("not completed: {:?}", env.status(&id))
    };
    let expected: Vec<String> = (0..64).map(|n| format!("made-k{n}")).collect();
    assert_eq!(done.output, json!(expected));
    // All 64 were scheduled by the first task, in index order, at seqs 2..=65.
    let history = env.history(&id);
    for n in 0..64 {
        let Event::ActivityScheduled(s) = &history[n + 1].event else {
            panic!("seq {} is not scheduled", n + 2)
        };
        assert_eq!(s.input["key"], format!("k{n}"));
    }
    let mut registry = WorkflowRegistry::new();
    registry.register("fan_out", fan_out).unwrap();
    replays_cleanly(&env, &registry, &id);
}

async fn parent(ctx: WorkflowContext, _: Value) -> Result<Value, WorkflowError> {
    let child = ctx.child("fan_out", &3).await?;
    Ok(json!({"child": child}))
}

#[test]
fn a_child_workflow_reports_back_to_its_parent() {
    let mut registry = WorkflowRegistry::new();
    registry.register("parent", parent).unwrap();
    registry.register("fan_out", fan_out).unwrap();
    let mut env = env(registry);
    let id = env.start("parent", "parent", json!(null));
    env.run_until_idle();
    let Some(Event::WorkflowCompleted(done)) = env.terminal(&id) else {
        panic!("parent not completed")
    };
    assert_eq!(
        done.output,
        json!({"child": ["made-k0", "made-k1", "made-k2"]})
    );
    let child_id = hcpflow_engine::WorkflowId::new("parent-c2").unwrap();
    assert_eq!(env.status(&child_id), WorkflowStatus::Completed);
}

async fn versioned(ctx: WorkflowContext, _: Value) -> Result<Value, WorkflowError> {
    let first = ctx
        .activity(Create {
            key: "one".into(),
            flaky: 0,
            permanent: false,
        })
        .await?;
    let second = if ctx.patched("add-two") {
        ctx.activity(Create {
            key: "two".into(),
            flaky: 0,
            permanent: false,
        })
        .await?
    } else {
        "old-path".to_owned()
    };
    Ok(json!([first, second]))
}

async fn unversioned(ctx: WorkflowContext, _: Value) -> Result<Value, WorkflowError> {
    let first = ctx
        .activity(Create {
            key: "one".into(),
            flaky: 0,
            permanent: false,
        })
        .await?;
    Ok(json!([first, "old-path"]))
}

#[test]
fn patched_keeps_old_histories_replaying_and_marks_new_runs() {
    // A history written by the old code replays under the new code, taking the old path.
    let mut old = WorkflowRegistry::new();
    old.register("versioned", unversioned).unwrap();
    let mut env_old = env(old);
    let id = env_old.start("old-run", "versioned", json!(null));
    env_old.run_until_idle();
    let mut new = WorkflowRegistry::new();
    new.register("versioned", versioned).unwrap();
    replays_cleanly(&env_old, &new, &id);

    // A new run records the marker and takes the new path.
    let mut env_new = env(new);
    let id = env_new.start("new-run", "versioned", json!(null));
    env_new.run_until_idle();
    assert!(env_new
        .history(&id)
        .iter()
        .any(|e| matches!(&e.event, Event::PatchMarked(p) if p.patch_id == "add-two")));
    assert!(
        matches!(env_new.terminal(&id), Some(Event::WorkflowCompleted(c)) if c.output == json!(["made-one", "made-two"]))
    );
}

async fn one_step(ctx: WorkflowContext, _: Value) -> Result<String, WorkflowError> {
    ctx.activity(Create {
        key: "x".into(),
        flaky: 1,
        permanent: false,
    })
    .await
}

#[test]
fn the_idempotency_key_is_stable_across_attempts_and_duplicates_are_dropped() {
    let mut registry = WorkflowRegistry::new();
    registry.register("one_step", one_step).unwrap();
    let mut env = TestEnv::new(registry);
    let keys = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let seen = keys.clone();
    env.activity("test.create", move |task| {
        seen.borrow_mut()
            .push((task.idempotency_key.clone(), task.attempt));
        if task.attempt == 1 {
            Err(hcpflow_engine::ActivityFailure::retryable(
                "Throttling",
                "again",
            ))
        } else {
            Ok(json!("made"))
        }
    });
    let id = env.start("idem", "one_step", json!(null));
    env.run_until_idle();
    let expected = IdempotencyKey::for_activity(&id, Seq::new(2).unwrap());
    assert_eq!(*keys.borrow(), vec![(expected.clone(), 1), (expected, 2)]);

    // A second completion of the same activity is not accepted...
    let history = env.history(&id);
    assert!(!accepts_activity_outcome(&history, Seq::new(2).unwrap(), 2));
    assert!(!accepts_activity_outcome(&history, Seq::new(2).unwrap(), 3));
    // ...and if one slipped into a history anyway, replay ignores it.
    let mut doubled: Vec<HistoryEvent> = history[..4].to_vec();
    let dup = HistoryEvent {
        seq: Seq::new(5).unwrap(),
        recorded_at: doubled[3].recorded_at,
        event: ActivityCompleted {
            scheduled_seq: Seq::new(2).unwrap(),
            attempt: 2,
            result: json!("other"),
        }
        .into(),
    };
    doubled.push(dup);
    let mut registry = WorkflowRegistry::new();
    registry.register("one_step", one_step).unwrap();
    let outcome = run_workflow_task(&registry, &id, &doubled, task_entropy(&id, 0)).unwrap();
    assert!(
        matches!(&outcome.commands[..], [Event::WorkflowCompleted(c)] if c.output == json!("made"))
    );
}

async fn panicky(_: WorkflowContext, _: Value) -> Result<Value, WorkflowError> {
    panic!("bug in workflow code")
}

#[test]
fn a_panic_blocks_the_workflow_with_a_report() {
    let mut registry = WorkflowRegistry::new();
    registry.register("panicky", panicky).unwrap();
    let mut env = TestEnv::new(registry);
    let id = env.start("panic", "panicky", json!(null));
    env.run_until_idle();
    assert_eq!(env.status(&id), WorkflowStatus::Blocked);
    assert!(
        matches!(env.blocked_reason(&id), Some(ExecError::Panic { message }) if message.contains("bug in workflow code"))
    );
    assert_eq!(env.history(&id).len(), 1, "nothing was appended");
}

#[test]
fn bad_input_fails_the_workflow_clearly() {
    let mut registry = WorkflowRegistry::new();
    registry.register("fan_out", fan_out).unwrap();
    let mut env = TestEnv::new(registry);
    let id = env.start("bad-input", "fan_out", json!({"not": "a number"}));
    env.run_until_idle();
    assert_eq!(env.status(&id), WorkflowStatus::Failed);
    assert!(
        matches!(env.terminal(&id), Some(Event::WorkflowFailed(f)) if matches!(f.error, WorkflowError::InvalidInput { .. }))
    );
}

#[test]
fn an_unknown_workflow_type_is_reported() {
    let mut env = TestEnv::new(WorkflowRegistry::new());
    let id = env.start("unknown", "nope", json!(null));
    env.run_until_idle();
    assert!(
        matches!(env.blocked_reason(&id), Some(ExecError::UnknownWorkflowType(t)) if t == "nope")
    );
}

#[test]
fn an_activity_delivered_twice_runs_twice_and_is_recorded_once() {
    let mut registry = WorkflowRegistry::new();
    registry.register("one_step", one_step).unwrap();
    let mut env = env(registry);
    let id = env.start("twice", "one_step", json!(null));
    env.step(); // the workflow task schedules the activity
    let history = env.history(&id);
    let task = hcpflow_engine::history::pending_work(&id, &history)
        .activities
        .remove(0);
    // A redelivery of the same task (a worker that came back after its ack deadline).
    env.queue
        .push(hcpflow_engine::testing::Task::Activity(Box::new(task)));
    env.run_until_idle();
    let attempts: Vec<u32> = env.executions.iter().map(|(_, _, a)| *a).collect();
    assert_eq!(
        attempts,
        vec![1, 1, 2],
        "attempt 1 ran twice, then the retry"
    );
    let outcomes = env
        .history(&id)
        .iter()
        .filter(|e| {
            matches!(
                e.event,
                Event::ActivityCompleted(_) | Event::ActivityFailed(_)
            )
        })
        .count();
    assert_eq!(
        outcomes, 2,
        "one failure of attempt 1 and one completion of attempt 2"
    );
    assert_eq!(env.status(&id), WorkflowStatus::Completed);
}

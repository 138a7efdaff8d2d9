//! Changed workflow code against recorded histories: every divergence is caught, named
//! by seq, and nothing is emitted.

use hcpflow_engine::testing::{task_entropy, TestEnv};
use hcpflow_engine::{
    run_workflow_task, ExecError, WorkflowContext, WorkflowError, WorkflowRegistry,
};
use serde_json::Value;

use crate::support::{env, Create};

fn create(ctx: &WorkflowContext, key: &str) -> hcpflow_engine::ActivityCall<String> {
    ctx.activity(Create {
        key: key.to_owned(),
        flaky: 0,
        permanent: false,
    })
}

async fn original(ctx: WorkflowContext, _: Value) -> Result<(), WorkflowError> {
    create(&ctx, "vpc").await?;
    create(&ctx, "subnet").await?;
    create(&ctx, "nat").await?;
    Ok(())
}

async fn reordered(ctx: WorkflowContext, _: Value) -> Result<(), WorkflowError> {
    create(&ctx, "vpc").await?;
    create(&ctx, "nat").await?;
    create(&ctx, "subnet").await?;
    Ok(())
}

async fn removed(ctx: WorkflowContext, _: Value) -> Result<(), WorkflowError> {
    create(&ctx, "vpc").await?;
    create(&ctx, "nat").await?;
    Ok(())
}

async fn added(ctx: WorkflowContext, _: Value) -> Result<(), WorkflowError> {
    create(&ctx, "vpc").await?;
    create(&ctx, "igw").await?;
    create(&ctx, "subnet").await?;
    create(&ctx, "nat").await?;
    Ok(())
}

async fn changed_type(ctx: WorkflowContext, _: Value) -> Result<(), WorkflowError> {
    create(&ctx, "vpc").await?;
    ctx.activity_raw("test.other", serde_json::json!({"key": "subnet"}))
        .await?;
    create(&ctx, "nat").await?;
    Ok(())
}

async fn appended_at_end(ctx: WorkflowContext, _: Value) -> Result<(), WorkflowError> {
    original(ctx.clone(), Value::Null).await?;
    create(&ctx, "extra").await?;
    Ok(())
}

fn recorded_history() -> (
    hcpflow_engine::WorkflowId,
    Vec<hcpflow_engine::HistoryEvent>,
) {
    let mut registry = WorkflowRegistry::new();
    registry.register("network", original).unwrap();
    let mut env: TestEnv = env(registry);
    let id = env.start("network", "network", Value::Null);
    env.run_until_idle();
    (id.clone(), env.history(&id))
}

fn replay_with<F, Fut>(workflow: F) -> ExecError
where
    F: Fn(WorkflowContext, Value) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<(), WorkflowError>> + 'static,
{
    let (id, history) = recorded_history();
    let mut registry = WorkflowRegistry::new();
    registry.register("network", workflow).unwrap();
    run_workflow_task(&registry, &id, &history, task_entropy(&id, 0))
        .expect_err("divergence must be detected")
}

fn nondeterminism(error: ExecError) -> (u64, String, String) {
    match error {
        ExecError::Nondeterminism { seq, recorded, new } => (seq.get(), recorded, new),
        other => panic!("expected nondeterminism, got {other}"),
    }
}

// The recorded history: 1 WorkflowStarted, 2 Scheduled(vpc), 3 Completed, 4 Scheduled(subnet),
// 5 Completed, 6 Scheduled(nat), 7 Completed, 8 WorkflowCompleted.

#[test]
fn the_original_code_replays_its_own_history() {
    let (id, history) = recorded_history();
    let mut registry = WorkflowRegistry::new();
    registry.register("network", original).unwrap();
    let outcome = run_workflow_task(&registry, &id, &history, task_entropy(&id, 0)).unwrap();
    assert!(outcome.commands.is_empty());
    assert_eq!(history.len(), 8);
}

#[test]
fn reordered_activities_are_detected() {
    let (seq, recorded, new) = nondeterminism(replay_with(reordered));
    assert_eq!(seq, 4);
    assert!(recorded.contains("test.create"), "{recorded}");
    assert_ne!(recorded, new, "the digests differ: {recorded} vs {new}");
}

#[test]
fn a_removed_activity_is_detected() {
    let (seq, recorded, new) = nondeterminism(replay_with(removed));
    assert_eq!(seq, 4);
    assert_ne!(recorded, new);
}

#[test]
fn an_added_activity_is_detected() {
    let (seq, recorded, new) = nondeterminism(replay_with(added));
    assert_eq!(seq, 4);
    assert_ne!(recorded, new);
}

#[test]
fn a_changed_activity_type_is_detected() {
    let (seq, recorded, new) = nondeterminism(replay_with(changed_type));
    assert_eq!(seq, 4);
    assert!(
        recorded.contains("test.create") && new.contains("test.other"),
        "{recorded} / {new}"
    );
}

#[test]
fn an_activity_added_after_the_end_is_detected() {
    let (seq, recorded, new) = nondeterminism(replay_with(appended_at_end));
    assert_eq!(seq, 8);
    assert!(recorded.contains("WorkflowCompleted"), "{recorded}");
    assert!(new.contains("test.create"), "{new}");
}

#[test]
fn the_error_message_names_seq_recorded_and_new() {
    let message = replay_with(reordered).to_string();
    assert!(
        message.starts_with("nondeterminism at seq 4: history recorded activity test.create"),
        "{message}"
    );
    assert!(
        message.contains("the workflow code now does activity test.create"),
        "{message}"
    );
}

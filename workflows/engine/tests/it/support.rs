//! Shared fake activities and small workflows.

use hcpflow_engine::testing::TestEnv;
use hcpflow_engine::{Activity, ActivityFailure, ActivityOptions, RetryPolicy, WorkflowRegistry};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// Creates something; fails while `attempt <= flaky`, or always when `permanent`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct Create {
    pub key: String,
    #[serde(default)]
    pub flaky: u32,
    #[serde(default)]
    pub permanent: bool,
}

impl Activity for Create {
    const TYPE: &'static str = "test.create";
    type Output = String;
    fn options(&self) -> ActivityOptions {
        ActivityOptions::default().with_retry(fast_retry(3))
    }
}

/// Undoes a `Create`; fails while `attempt <= flaky`, always when `permanent`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct Undo {
    pub key: String,
    #[serde(default)]
    pub flaky: u32,
    #[serde(default)]
    pub permanent: bool,
}

impl Activity for Undo {
    const TYPE: &'static str = "test.undo";
    type Output = Value;
    fn options(&self) -> ActivityOptions {
        ActivityOptions::default().with_retry(fast_retry(4))
    }
}

pub(crate) fn fast_retry(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        initial_interval_ms: 1_000,
        backoff_coefficient: 2.0,
        max_interval_ms: 10_000,
        max_attempts,
        non_retryable: vec![],
    }
}

fn outcome(input: &Value, attempt: u32, output: Value) -> Result<Value, ActivityFailure> {
    if input["permanent"].as_bool().unwrap_or(false) {
        return Err(ActivityFailure::permanent(
            "Refused",
            format!("{} refused", input["key"]),
        ));
    }
    if u64::from(attempt) <= input["flaky"].as_u64().unwrap_or(0) {
        return Err(ActivityFailure::retryable(
            "Throttling",
            format!("attempt {attempt}"),
        ));
    }
    Ok(output)
}

/// An environment with the fake `test.create` and `test.undo` activities.
pub(crate) fn env(registry: WorkflowRegistry) -> TestEnv {
    let mut env = TestEnv::new(registry);
    env.activity(Create::TYPE, |task| {
        outcome(
            &task.input,
            task.attempt,
            json!(format!("made-{}", task.input["key"].as_str().unwrap_or(""))),
        )
    });
    env.activity(Undo::TYPE, |task| {
        outcome(
            &task.input,
            task.attempt,
            json!({"undone": task.input["key"]}),
        )
    });
    env
}

/// The activity types executed, with attempts, for one workflow.
pub(crate) fn executed(env: &TestEnv, id: &hcpflow_engine::WorkflowId) -> Vec<(String, u32)> {
    env.executions
        .iter()
        .filter(|(w, _, _)| w == id)
        .map(|(_, t, a)| (t.clone(), *a))
        .collect()
}

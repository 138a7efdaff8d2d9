//! The built-in workflow types of DESIGN.md §4: the smoke test and the benchmark load.
//!
//! `noop_chain {"steps": N, "sleep_ms": 0, "fail_at": null, "payload_bytes": 0}` runs N
//! no-op activities one after another; each sleeps `sleep_ms` inside the activity,
//! returns `payload_bytes` of data and registers a no-op compensation; step `fail_at`
//! (1-based) fails permanently, so the compensations run and the run ends
//! `compensated`; with `flaky_attempts` N every step's first N attempts fail retryably
//! (and are retried with the step's backoff); step `panic_at` panics (a bug: retried, then the workflow is blocked). `noop_fanout {"width": N}` runs N at once. `noop_parent {"children":
//! N, "steps": M}` starts N child `noop_chain`s of M steps, one after another.
//! `noop_wait {"timer_ms": T, "signal": "name"}` sleeps on a durable timer of T ms, then
//! (with `signal`) waits for that signal, then runs one no-op step and returns the
//! signal's payload.

use std::time::Duration;

use hcpflow_engine::{
    Activity, ActivityFailure, ActivityOptions, RetryPolicy, WorkflowContext, WorkflowError,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::catalog::activities::ActivityRegistry;
use hcpflow_engine::catalog::{decodes_as, Catalog, TypeInfo};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoopChain {
    pub steps: u32,
    #[serde(default)]
    pub sleep_ms: u64,
    #[serde(default)]
    pub fail_at: Option<u32>,
    #[serde(default)]
    pub payload_bytes: usize,
    /// Make step N's activity panic (a bug in an activity, for the tests of what the
    /// runtime does then: retried, then the workflow blocked).
    #[serde(default)]
    pub panic_at: Option<u32>,
    /// Every step's first N attempts fail retryably.
    #[serde(default)]
    pub flaky_attempts: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoopFanout {
    pub width: u32,
}

/// Starts `children` child `noop_chain`s of `steps` steps, one after another.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoopParent {
    pub children: u32,
    #[serde(default)]
    pub steps: u32,
}

/// A durable timer, then (optionally) a signal, then one step.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoopWait {
    #[serde(default)]
    pub timer_ms: u64,
    #[serde(default)]
    pub signal: Option<String>,
}

/// One no-op step.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NoopStep {
    pub step: u32,
    pub sleep_ms: u64,
    pub fail: bool,
    pub payload_bytes: usize,
    /// Absent from the requests of histories recorded before it existed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub panic: bool,
    /// Absent (0) from the requests of histories recorded before it existed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub flaky_attempts: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Activity for NoopStep {
    const TYPE: &'static str = "noop.step";
    type Output = Value;
    fn options(&self) -> ActivityOptions {
        ActivityOptions::default().with_retry(RetryPolicy {
            initial_interval_ms: 200,
            ..RetryPolicy::default()
        })
    }
}

/// The no-op compensation of a step.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NoopUndo {
    pub step: u32,
}

impl Activity for NoopUndo {
    const TYPE: &'static str = "noop.undo";
    type Output = Value;
}

/// Limits that keep a smoke test from becoming a denial of service.
const MAX_STEPS: u32 = 10_000;
const MAX_WIDTH: u32 = 10_000;
const MAX_CHILDREN: u32 = 100;
const MAX_PAYLOAD: usize = 512 * 1024;
const MAX_TIMER_MS: u64 = 24 * 3600 * 1000;

async fn noop_chain(ctx: WorkflowContext, input: NoopChain) -> Result<Value, WorkflowError> {
    for step in 1..=input.steps {
        ctx.activity(NoopStep {
            step,
            sleep_ms: input.sleep_ms,
            fail: input.fail_at == Some(step),
            payload_bytes: input.payload_bytes,
            panic: input.panic_at == Some(step),
            flaky_attempts: input.flaky_attempts,
        })
        .await?;
        ctx.on_rollback(NoopUndo { step });
    }
    Ok(json!({"steps": input.steps}))
}

async fn noop_fanout(ctx: WorkflowContext, input: NoopFanout) -> Result<Value, WorkflowError> {
    let steps = (1..=input.width).map(|step| {
        ctx.activity(NoopStep {
            step,
            sleep_ms: 0,
            fail: false,
            payload_bytes: 0,
            panic: false,
            flaky_attempts: 0,
        })
    });
    for result in ctx.join_all(steps).await {
        result?;
    }
    Ok(json!({"width": input.width}))
}

async fn noop_parent(ctx: WorkflowContext, input: NoopParent) -> Result<Value, WorkflowError> {
    for _ in 0..input.children {
        ctx.child("noop_chain", &json!({"steps": input.steps}))
            .await?;
    }
    Ok(json!({"children": input.children}))
}

async fn noop_wait(ctx: WorkflowContext, input: NoopWait) -> Result<Value, WorkflowError> {
    ctx.sleep(Duration::from_millis(input.timer_ms)).await?;
    let payload = match &input.signal {
        Some(name) => ctx.signal::<Value>(name).await?,
        None => Value::Null,
    };
    ctx.activity(NoopStep {
        step: 1,
        sleep_ms: 0,
        fail: false,
        payload_bytes: 0,
        panic: false,
        flaky_attempts: 0,
    })
    .await?;
    Ok(json!({"signal": payload}))
}

fn validate_chain(input: &Value) -> Result<(), Vec<String>> {
    decodes_as::<NoopChain>(input)?;
    let chain: NoopChain =
        serde_json::from_value(input.clone()).map_err(|e| vec![e.to_string()])?;
    let mut problems = Vec::new();
    if chain.steps > MAX_STEPS {
        problems.push(format!("steps: at most {MAX_STEPS}"));
    }
    if chain.payload_bytes > MAX_PAYLOAD {
        problems.push(format!("payload_bytes: at most {MAX_PAYLOAD}"));
    }
    if matches!(chain.fail_at, Some(0)) {
        problems.push("fail_at: steps are numbered from 1".to_owned());
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

fn validate_fanout(input: &Value) -> Result<(), Vec<String>> {
    decodes_as::<NoopFanout>(input)?;
    let fanout: NoopFanout =
        serde_json::from_value(input.clone()).map_err(|e| vec![e.to_string()])?;
    if fanout.width > MAX_WIDTH {
        return Err(vec![format!("width: at most {MAX_WIDTH}")]);
    }
    Ok(())
}

fn validate_parent(input: &Value) -> Result<(), Vec<String>> {
    decodes_as::<NoopParent>(input)?;
    let parent: NoopParent =
        serde_json::from_value(input.clone()).map_err(|e| vec![e.to_string()])?;
    let mut problems = Vec::new();
    if parent.children > MAX_CHILDREN {
        problems.push(format!("children: at most {MAX_CHILDREN}"));
    }
    if parent.steps > MAX_STEPS {
        problems.push(format!("steps: at most {MAX_STEPS}"));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

fn validate_wait(input: &Value) -> Result<(), Vec<String>> {
    decodes_as::<NoopWait>(input)?;
    let wait: NoopWait = serde_json::from_value(input.clone()).map_err(|e| vec![e.to_string()])?;
    let mut problems = Vec::new();
    if wait.timer_ms > MAX_TIMER_MS {
        problems.push(format!("timer_ms: at most {MAX_TIMER_MS}"));
    }
    if matches!(&wait.signal, Some(name) if name.is_empty()) {
        problems.push("signal: a name, or leave it out".to_owned());
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

pub fn register_workflows(catalog: &mut Catalog) -> anyhow::Result<()> {
    catalog.register("noop_chain", noop_chain, TypeInfo::plain(validate_chain))?;
    catalog.register("noop_fanout", noop_fanout, TypeInfo::plain(validate_fanout))?;
    catalog.register("noop_parent", noop_parent, TypeInfo::plain(validate_parent))?;
    catalog.register("noop_wait", noop_wait, TypeInfo::plain(validate_wait))?;
    Ok(())
}

pub fn register_activities(activities: &mut ActivityRegistry) {
    activities.register(NoopStep::TYPE, |input| async move {
        let step: NoopStep = serde_json::from_value(input.input)
            .map_err(|e| ActivityFailure::permanent("InvalidInput", e.to_string()))?;
        if step.sleep_ms > 0 {
            tokio::time::sleep(Duration::from_millis(step.sleep_ms)).await;
        }
        if step.panic {
            panic!("step {} panics by request (panic_at)", step.step);
        }
        if input.attempt <= step.flaky_attempts {
            return Err(ActivityFailure::retryable(
                "InjectedTransient",
                format!(
                    "step {} attempt {} fails for a while by request (flaky_attempts)",
                    step.step, input.attempt
                ),
            ));
        }
        if step.fail {
            return Err(ActivityFailure::permanent(
                "InjectedFailure",
                format!("step {} fails by request (fail_at)", step.step),
            ));
        }
        Ok(Value::String("x".repeat(step.payload_bytes)))
    });
    activities.register(NoopUndo::TYPE, |_| async { Ok(Value::Null) });
}

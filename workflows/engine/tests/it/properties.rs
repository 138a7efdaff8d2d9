//! Property tests over generated workflows: sequences, fan-outs, timers, signals,
//! children, retries, failures and compensations.
//!
//! 1. Replaying any prefix of a recorded history yields exactly the commands that were
//!    recorded after it.
//! 2. Crashing at any step — losing every queued task and armed timer — and recovering
//!    from the store alone ends with the same histories as an uninterrupted run.

use std::time::Duration;

use hcpflow_engine::testing::{task_entropy, TestEnv};
use hcpflow_engine::{run_workflow_task, WorkflowContext, WorkflowError, WorkflowRegistry};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::support::{env, Create, Undo};

/// How an activity behaves: succeeds, fails a few times first, or always fails.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
enum Behaviour {
    Ok,
    Flaky(u32),
    Fails,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
enum Step {
    Activity(Behaviour),
    FanOut(Vec<Behaviour>),
    Sleep(u64),
    Signal,
    Uuid,
    Child(Vec<Behaviour>),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Script {
    steps: Vec<Step>,
    compensate: bool,
}

fn create(key: String, behaviour: Behaviour) -> Create {
    match behaviour {
        Behaviour::Ok => Create {
            key,
            flaky: 0,
            permanent: false,
        },
        Behaviour::Flaky(n) => Create {
            key,
            flaky: n,
            permanent: false,
        },
        Behaviour::Fails => Create {
            key,
            flaky: 0,
            permanent: true,
        },
    }
}

async fn script(ctx: WorkflowContext, script: Script) -> Result<Vec<Value>, WorkflowError> {
    let mut outputs = Vec::new();
    for (index, step) in script.steps.into_iter().enumerate() {
        match step {
            Step::Activity(behaviour) => {
                let key = format!("s{index}");
                outputs.push(json!(ctx.activity(create(key.clone(), behaviour)).await?));
                if script.compensate {
                    ctx.on_rollback(Undo {
                        key,
                        flaky: 0,
                        permanent: false,
                    });
                }
            }
            Step::FanOut(behaviours) => {
                let calls = behaviours
                    .into_iter()
                    .enumerate()
                    .map(|(n, b)| ctx.activity(create(format!("s{index}-{n}"), b)));
                for result in ctx.join_all(calls).await {
                    outputs.push(json!(result?));
                }
            }
            Step::Sleep(ms) => ctx.sleep(Duration::from_millis(ms)).await?,
            Step::Signal => outputs.push(ctx.signal::<Value>("go").await?),
            Step::Uuid => outputs.push(json!(ctx.uuid())),
            Step::Child(behaviours) => {
                let child = Script {
                    steps: behaviours.into_iter().map(Step::Activity).collect(),
                    compensate: script.compensate,
                };
                outputs.push(ctx.child("script", &child).await?);
            }
        }
    }
    Ok(outputs)
}

fn registry() -> WorkflowRegistry {
    let mut registry = WorkflowRegistry::new();
    registry.register("script", script).unwrap();
    registry
}

fn behaviour() -> impl Strategy<Value = Behaviour> {
    prop_oneof![6 => Just(Behaviour::Ok), 2 => (1u32..=3).prop_map(Behaviour::Flaky), 1 => Just(Behaviour::Fails)]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => behaviour().prop_map(Step::Activity),
        2 => prop::collection::vec(behaviour(), 1..6).prop_map(Step::FanOut),
        1 => (1u64..5_000).prop_map(Step::Sleep),
        1 => Just(Step::Signal),
        1 => Just(Step::Uuid),
        1 => prop::collection::vec(behaviour(), 1..3).prop_map(Step::Child),
    ]
}

fn scripts() -> impl Strategy<Value = Script> {
    (prop::collection::vec(step(), 1..7), any::<bool>())
        .prop_map(|(steps, compensate)| Script { steps, compensate })
}

/// Starts the script and delivers one signal per `Signal` step up front (buffered).
fn start(env: &mut TestEnv, script: &Script) -> hcpflow_engine::WorkflowId {
    let id = env.start("prop", "script", script);
    for (n, _) in script
        .steps
        .iter()
        .enumerate()
        .filter(|(_, s)| matches!(s, Step::Signal))
    {
        env.signal(&id, "go", n);
    }
    id
}

fn all_histories(env: &TestEnv) -> Vec<(String, Vec<hcpflow_engine::HistoryEvent>)> {
    env.store
        .workflow_ids()
        .into_iter()
        .map(|id| (id.to_string(), env.history(&id)))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    #[test]
    fn replaying_any_prefix_yields_the_recorded_commands(script in scripts()) {
        let mut env = env(registry());
        start(&mut env, &script);
        env.run_until_idle();
        let registry = registry();
        for id in env.store.workflow_ids() {
            let history = env.history(&id);
            prop_assert!(history.iter().any(|e| e.event.is_terminal()), "{id} did not finish: {:?}", env.status(&id));
            for append in env.appends.iter().filter(|a| a.workflow_id == id) {
                let prefix = &history[..append.start];
                if prefix.is_empty() {
                    continue;
                }
                let outcome = run_workflow_task(&registry, &id, prefix, task_entropy(&id, prefix.len()));
                let outcome = outcome.map_err(|e| TestCaseError::fail(format!("{id} prefix {}: {e}", prefix.len())))?;
                if append.commands {
                    let recorded: Vec<_> = history[append.start..append.start + append.len].iter().map(|e| e.event.clone()).collect();
                    prop_assert_eq!(&outcome.commands, &recorded, "{} prefix {}", id, prefix.len());
                }
            }
            // The complete history replays and asks for nothing.
            let full = run_workflow_task(&registry, &id, &history, task_entropy(&id, history.len()));
            prop_assert!(full.map(|o| o.commands.is_empty()).unwrap_or(false));
        }
    }

    #[test]
    fn finishing_after_a_crash_at_any_step_gives_the_same_histories(script in scripts(), crash_points in prop::collection::vec(0usize..200, 1..4)) {
        let mut reference = env(registry());
        start(&mut reference, &script);
        reference.run_until_idle();
        let expected = all_histories(&reference);
        let steps = reference.appends.len() * 2 + 4;

        for point in crash_points {
            let point = point % steps;
            let mut crashed = env(registry());
            start(&mut crashed, &script);
            crashed.run_steps(point);
            crashed.crash();
            crashed.recover();
            crashed.run_until_idle();
            prop_assert_eq!(&all_histories(&crashed), &expected, "crash after {} steps", point);
        }
    }
}

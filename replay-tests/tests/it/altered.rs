//! A deliberately incompatible change: `scale_node_pool` without its reading of the
//! pool's current count. Replaying a recorded scale with it is a divergence at the
//! first command that differs — the change must not ship without `ctx.patched`.

use hcpflow_audit::replay::replay;
use hcpflow_engine::{WorkflowContext, WorkflowError, WorkflowRegistry};
use hcpflow_hypershift::input::ScaleInput;
use hcpflow_hypershift::kube::node_pool::{ScaleNodePool, WaitNodePoolReady};
use hcpflow_hypershift::registry::FindCluster;
use hcpflow_hypershift::scale::{ScaleOutput, TYPE};
use hcpflow_replay_tests::{histories_dir, load};

/// Scales without reading the count first (so it cannot revert to it).
async fn scale_without_reading_the_count(
    ctx: WorkflowContext,
    input: ScaleInput,
) -> Result<ScaleOutput, WorkflowError> {
    let live = ctx
        .activity(FindCluster {
            name: input.cluster.clone(),
        })
        .await?;
    let namespace = live.cluster.namespace;
    ctx.activity(ScaleNodePool {
        namespace: namespace.clone(),
        name: input.node_pool.clone(),
        replicas: input.replicas,
    })
    .await?;
    let ready = ctx
        .activity(WaitNodePoolReady {
            namespace,
            name: input.node_pool.clone(),
            replicas: input.replicas,
            timeout_secs: 60,
        })
        .await?;
    Ok(ScaleOutput {
        cluster: input.cluster,
        node_pool: input.node_pool,
        previous_replicas: 0,
        replicas: ready.ready,
    })
}

#[test]
fn an_incompatible_change_fails_against_the_recorded_history() {
    let golden = load(&histories_dir().join("scale_node_pool/scale-up.jsonl")).unwrap();
    let mut altered = WorkflowRegistry::default();
    altered
        .register(TYPE, scale_without_reading_the_count)
        .unwrap();
    let report = replay(&altered, &golden.workflow_id, &golden.history);
    let divergence = report.divergence.expect("the altered code diverges");
    // seq 2 scheduled FindCluster (matches); seq 4 scheduled the read of the count.
    assert_eq!(divergence.seq, 4, "{divergence:?}");
    assert!(
        divergence.recorded.contains("kube.get_node_pool"),
        "{divergence:?}"
    );
    assert!(
        divergence.new.contains("kube.scale_node_pool"),
        "{divergence:?}"
    );

    // Today's code replays the same history.
    let catalog = hcpflow_replay_tests::catalog();
    assert_eq!(
        replay(catalog.registry(), &golden.workflow_id, &golden.history).divergence,
        None
    );
}

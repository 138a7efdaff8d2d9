//! `ctx.patched` versioning on `scale_node_pool` (patch `scale-skips-unchanged-count`):
//! histories recorded before the patch (no marker) and after it (with the marker,
//! including a run that took the new path) all replay against today's code; the code
//! from before the patch cannot replay the new ones.

use hcpflow_audit::replay::replay;
use hcpflow_engine::{Event, WorkflowContext, WorkflowError, WorkflowRegistry};
use hcpflow_hypershift::input::ScaleInput;
use hcpflow_hypershift::kube::node_pool::{GetNodePool, ScaleNodePool, WaitNodePoolReady};
use hcpflow_hypershift::registry::FindCluster;
use hcpflow_hypershift::scale::{ScaleOutput, SKIP_UNCHANGED_COUNT, TYPE};
use hcpflow_replay_tests::{histories_dir, load};

fn marked(history: &[hcpflow_engine::HistoryEvent]) -> bool {
    history
        .iter()
        .any(|e| matches!(&e.event, Event::PatchMarked(p) if p.patch_id == SKIP_UNCHANGED_COUNT))
}

/// `scale_node_pool` as it was before the patch.
async fn scale_before_the_patch(
    ctx: WorkflowContext,
    input: ScaleInput,
) -> Result<ScaleOutput, WorkflowError> {
    let live = ctx
        .activity(FindCluster {
            name: input.cluster.clone(),
        })
        .await?;
    let namespace = live.cluster.namespace;
    let before = ctx
        .activity(GetNodePool {
            namespace: namespace.clone(),
            name: input.node_pool.clone(),
        })
        .await?;
    ctx.on_rollback(ScaleNodePool {
        namespace: namespace.clone(),
        name: input.node_pool.clone(),
        replicas: before.desired,
    });
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
            timeout_secs: input.timeout_secs.unwrap_or(2700),
        })
        .await?;
    Ok(ScaleOutput {
        cluster: input.cluster,
        node_pool: input.node_pool,
        previous_replicas: before.desired,
        replicas: ready.ready,
    })
}

#[test]
fn old_and_new_histories_both_replay_with_the_patch() {
    let dir = histories_dir().join("scale_node_pool");
    let old = load(&dir.join("scale-up.jsonl")).unwrap();
    let new = load(&dir.join("scale-down-patched.jsonl")).unwrap();
    let skipped = load(&dir.join("unchanged-count-patched.jsonl")).unwrap();
    assert!(!marked(&old.history) && marked(&new.history) && marked(&skipped.history));
    let scheduled = |history: &[hcpflow_engine::HistoryEvent]| {
        history
            .iter()
            .filter(|e| matches!(&e.event, Event::ActivityScheduled(s) if s.activity_type == "kube.scale_node_pool"))
            .count()
    };
    assert_eq!(
        scheduled(&skipped.history),
        0,
        "the new path: no scale call"
    );

    let catalog = hcpflow_replay_tests::catalog();
    for golden in [&old, &new, &skipped] {
        let report = replay(catalog.registry(), &golden.workflow_id, &golden.history);
        assert_eq!(report.divergence, None, "{}", golden.workflow_id);
    }

    // Without the patch, the code of before cannot read the new histories.
    let mut before = WorkflowRegistry::default();
    before.register(TYPE, scale_before_the_patch).unwrap();
    assert_eq!(
        replay(&before, &old.workflow_id, &old.history).divergence,
        None
    );
    for golden in [&new, &skipped] {
        let divergence = replay(&before, &golden.workflow_id, &golden.history).divergence;
        assert!(divergence.is_some(), "{}", golden.workflow_id);
    }
}

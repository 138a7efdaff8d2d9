//! `scale_node_pool` `{"cluster", "node_pool", "replicas"}`: scale up or down, wait
//! until the nodes are ready; on failure the pool goes back to the count it had.

use hcpflow_engine::{WorkflowContext, WorkflowError};
use serde::{Deserialize, Serialize};

use crate::input::{ScaleInput, DEFAULT_NODE_POOL_TIMEOUT_SECS};
use crate::kube::node_pool::{GetNodePool, ScaleNodePool, WaitNodePoolReady};
use crate::registry::FindCluster;

pub const TYPE: &str = "scale_node_pool";

/// A versioning patch (`ctx.patched`): a pool already at the requested count is only
/// waited for — no scale call, nothing to revert. Histories recorded before the patch
/// replay the old path (scale anyway); see replay-tests/histories/scale_node_pool/.
pub const SKIP_UNCHANGED_COUNT: &str = "scale-skips-unchanged-count";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScaleOutput {
    pub cluster: String,
    pub node_pool: String,
    pub previous_replicas: i32,
    pub replicas: i32,
}

pub async fn scale_node_pool(
    ctx: WorkflowContext,
    input: ScaleInput,
) -> Result<ScaleOutput, WorkflowError> {
    let live = ctx
        .activity(FindCluster {
            name: input.cluster.clone(),
        })
        .await?;
    let namespace = live.cluster.namespace;
    // The count before, read once and recorded: the compensation reverts to it even if
    // this workflow is replayed after the scale.
    let before = ctx
        .activity(GetNodePool {
            namespace: namespace.clone(),
            name: input.node_pool.clone(),
        })
        .await?;
    let unchanged = ctx.patched(SKIP_UNCHANGED_COUNT) && before.desired == input.replicas;
    if !unchanged {
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
    }
    let ready = ctx
        .activity(WaitNodePoolReady {
            namespace,
            name: input.node_pool.clone(),
            replicas: input.replicas,
            timeout_secs: input.timeout_secs.unwrap_or(DEFAULT_NODE_POOL_TIMEOUT_SECS),
        })
        .await?;
    Ok(ScaleOutput {
        cluster: input.cluster,
        node_pool: input.node_pool,
        previous_replicas: before.desired,
        replicas: ready.ready,
    })
}

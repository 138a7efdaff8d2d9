//! NodePools: server-side applied (a pool that exists keeps its replica count), scaled
//! through the scale subresource, waited on until their nodes are ready, deleted.

use std::time::Duration;

use hcpflow_engine::{ActivityFailure, Ledger};
use hcpflow_hypershift::kube::node_pool::{
    ApplyNodePool, GetNodePool, NodePool, NodePoolReplicas, ScaleNodePool, WaitNodePoolReady,
};
use hcpflow_hypershift::kube::ObjectRef;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::Api;
use serde_json::{json, Value};

use crate::delete::delete_custom_object;
use crate::dispatch::KubeActivities;
use crate::error::failure;
use crate::manifest;
use crate::resources::{node_pools, object_ledger_ref, FIELD_MANAGER};
use crate::wait::{conditions, find, poll, Condition, Look};

fn api(kube: &KubeActivities, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(kube.client.clone(), namespace, &node_pools())
}

fn replicas(object: &DynamicObject) -> NodePoolReplicas {
    let count = |pointer: &str| {
        object
            .data
            .pointer(pointer)
            .and_then(Value::as_i64)
            .and_then(|n| i32::try_from(n).ok())
            .unwrap_or(0)
    };
    NodePoolReplicas {
        desired: count("/spec/replicas"),
        ready: count("/status/replicas"),
    }
}

async fn read(
    kube: &KubeActivities,
    namespace: &str,
    name: &str,
) -> Result<DynamicObject, ActivityFailure> {
    let what = format!("NodePool {namespace}/{name}");
    api(kube, namespace)
        .get_opt(name)
        .await
        .map_err(|e| failure(&format!("reading {what}"), e))?
        .ok_or_else(|| ActivityFailure::permanent("NotFound", format!("{what} does not exist")))
}

/// Guarantees: a second run applies the same document; a pool that exists keeps the
/// replica count it has (so re-applying after a scale does not undo the scale).
pub async fn apply_node_pool(
    kube: &KubeActivities,
    request: &ApplyNodePool,
    ledger: &Ledger,
) -> Result<NodePool, ActivityFailure> {
    let api = api(kube, &request.namespace);
    let what = format!("NodePool {}/{}", request.namespace, request.name);
    let existing = api
        .get_opt(&request.name)
        .await
        .map_err(|e| failure(&format!("reading {what}"), e))?;
    let count = existing
        .as_ref()
        .map_or(request.replicas, |pool| replicas(pool).desired);
    let document = manifest::node_pool(request, count)?;
    api.patch(
        &request.name,
        &PatchParams::apply(FIELD_MANAGER)
            .force()
            .validation_strict(),
        &Patch::Apply(&document),
    )
    .await
    .map_err(|e| failure(&format!("applying {what}"), e))?;
    let pool = NodePool {
        object: ObjectRef {
            infra_id: request.infra_id.clone(),
            namespace: request.namespace.clone(),
            name: request.name.clone(),
        },
    };
    ledger.created(object_ledger_ref("NodePool", &pool.object));
    Ok(pool)
}

pub async fn get_node_pool(
    kube: &KubeActivities,
    request: &GetNodePool,
) -> Result<NodePoolReplicas, ActivityFailure> {
    Ok(replicas(
        &read(kube, &request.namespace, &request.name).await?,
    ))
}

/// Sets `spec.replicas` through the scale subresource. Idempotent: the same count again
/// changes nothing.
pub async fn scale_node_pool(
    kube: &KubeActivities,
    request: &ScaleNodePool,
) -> Result<NodePoolReplicas, ActivityFailure> {
    let what = format!("NodePool {}/{}", request.namespace, request.name);
    if request.replicas < 0 {
        return Err(ActivityFailure::permanent(
            "InvalidInput",
            format!("{what}: replicas {} is negative", request.replicas),
        ));
    }
    api(kube, &request.namespace)
        .patch_scale(
            &request.name,
            &PatchParams {
                field_manager: Some(FIELD_MANAGER.to_owned()),
                ..PatchParams::default()
            },
            &Patch::Merge(json!({"spec": {"replicas": request.replicas}})),
        )
        .await
        .map_err(|e| failure(&format!("scaling {what} to {}", request.replicas), e))?;
    Ok(replicas(
        &read(kube, &request.namespace, &request.name).await?,
    ))
}

/// Waits until `status.replicas` equals `replicas` and `Ready=True`.
///
/// Errors: after `timeout_secs`, a permanent `Timeout` with the Ready condition's reason
/// and message; a pool whose `spec.replicas` is no longer `replicas` (someone scaled it
/// meanwhile), permanent `ReplicasChanged`.
pub async fn wait_ready(
    kube: &KubeActivities,
    request: &WaitNodePoolReady,
) -> Result<NodePoolReplicas, ActivityFailure> {
    let what = format!("NodePool {}/{}", request.namespace, request.name);
    poll(
        &format!("{what} has not {} ready replicas", request.replicas),
        Duration::from_secs(request.timeout_secs),
        kube.timing.poll_interval,
        || async {
            let object = read(kube, &request.namespace, &request.name).await?;
            let counts = replicas(&object);
            if counts.desired != request.replicas {
                return Err(ActivityFailure::permanent(
                    "ReplicasChanged",
                    format!(
                        "{what} now wants {} replicas, not {}",
                        counts.desired, request.replicas
                    ),
                ));
            }
            let conditions = conditions(object.data.get("status"));
            let ready = find(&conditions, "Ready");
            if counts.ready == request.replicas && ready.is_some_and(|c| c.is_true()) {
                return Ok(Look::Done(counts));
            }
            Ok(Look::Waiting(format!(
                "{} of {} ready; {}",
                counts.ready,
                request.replicas,
                why_not_ready(&conditions)
            )))
        },
    )
    .await
}

/// What keeps a pool from its replicas: a prerequisite of its machines that is not
/// there (the NodePool controller makes no machine template without the cluster's
/// default security group, and says so in `AWSSecurityGroupAvailable`), else its Ready
/// condition.
fn why_not_ready(conditions: &[Condition]) -> String {
    let blocking = MACHINE_PREREQUISITES
        .iter()
        .filter_map(|kind| find(conditions, kind))
        .find(|condition| condition.status == "False");
    match (blocking, find(conditions, "Ready")) {
        (Some(blocking), _) => blocking.to_string(),
        (None, Some(ready)) => ready.to_string(),
        (None, None) => "no Ready condition yet".to_owned(),
    }
}

/// NodePool conditions that, False, mean no machines can be made.
const MACHINE_PREREQUISITES: [&str; 1] = ["AWSSecurityGroupAvailable"];

/// Deletes the NodePool and waits until its finalizer is gone.
pub async fn delete_node_pool(
    kube: &KubeActivities,
    pool: &NodePool,
    ledger: &Ledger,
) -> Result<(), ActivityFailure> {
    delete_custom_object(kube, &node_pools(), "NodePool", &pool.object, ledger).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn condition(kind: &str, status: &str, reason: &str, message: &str) -> Condition {
        Condition {
            kind: kind.into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
        }
    }

    #[test]
    fn a_missing_default_security_group_is_named_before_ready() {
        let waiting = [
            condition(
                "AllMachinesReady",
                "False",
                "NotFound",
                "No Machines are created",
            ),
            condition(
                "AWSSecurityGroupAvailable",
                "False",
                "DefaultSGNotReady",
                "Waiting for AWS default security group to be created for hosted cluster",
            ),
        ];
        let why = why_not_ready(&waiting);
        assert!(
            why.contains("AWSSecurityGroupAvailable=False (DefaultSGNotReady)"),
            "{why}"
        );
        let rolling = [
            condition("AWSSecurityGroupAvailable", "True", "AsExpected", ""),
            condition("Ready", "False", "WaitingForNodes", "1 of 3 nodes"),
        ];
        assert!(why_not_ready(&rolling).contains("Ready=False (WaitingForNodes)"));
        assert_eq!(why_not_ready(&[]), "no Ready condition yet");
    }
}

//! The HostedCluster: created, never force-applied (the operator edits parts of its
//! spec); waited on until Available; annotated for cloud cleanup and deleted, done once
//! the operator's finalizer lets go.

use hcpflow_engine::{ActivityFailure, Ledger};
use hcpflow_hypershift::kube::hosted_cluster::{
    CreateHostedCluster, HostedCluster, HostedClusterAvailable, HostedClusterCondition,
    WaitHostedClusterAvailable, WaitHostedClusterCondition,
};
use hcpflow_hypershift::kube::{ObjectRef, INFRA_LABEL};
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::{json, Value};

use crate::delete::delete_custom_object;
use crate::dispatch::KubeActivities;
use crate::error::{failure, is_already_exists, is_not_found};
use crate::manifest;
use crate::resources::{hosted_clusters, object_ledger_ref, FIELD_MANAGER};
use crate::wait::{conditions, find, poll, Condition, Look};

fn api(kube: &KubeActivities, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(kube.client.clone(), namespace, &hosted_clusters())
}

/// Guarantees: a second run finds the first run's HostedCluster by name and adopts it
/// because it carries this infra id's label; a HostedCluster of that name made for
/// anything else is a permanent `AlreadyExists` failure and is left alone.
pub async fn create_hosted_cluster(
    kube: &KubeActivities,
    request: &CreateHostedCluster,
    ledger: &Ledger,
) -> Result<HostedCluster, ActivityFailure> {
    let document = manifest::hosted_cluster(request)?;
    let object: DynamicObject = serde_json::from_value(document)
        .map_err(|e| ActivityFailure::permanent("Encoding", e.to_string()))?;
    let api = api(kube, &request.namespace);
    let what = format!("HostedCluster {}/{}", request.namespace, request.name);
    let created = match create_strictly(kube, &api, &object).await {
        Ok(created) => created,
        Err(e) if is_already_exists(&e) => {
            let existing = api
                .get(&request.name)
                .await
                .map_err(|e| failure(&format!("reading {what}"), e))?;
            let owner = existing.labels().get(INFRA_LABEL).cloned();
            if owner.as_deref() != Some(request.infra_id.as_str()) {
                return Err(ActivityFailure::permanent(
                    "AlreadyExists",
                    format!(
                        "{what} exists and was not created for infra id {} (its {INFRA_LABEL} is {})",
                        request.infra_id,
                        owner.as_deref().unwrap_or("absent")
                    ),
                ));
            }
            existing
        }
        Err(e) => return Err(failure(&format!("creating {what}"), e)),
    };
    let result = HostedCluster {
        object: ObjectRef {
            infra_id: request.infra_id.clone(),
            namespace: request.namespace.clone(),
            name: request.name.clone(),
        },
        uid: created.uid().unwrap_or_default(),
    };
    ledger.created(object_ledger_ref("HostedCluster", &result.object));
    Ok(result)
}

/// The conditions whose `False` the operator cannot heal by itself: the spec, the
/// release or the cloud identity is wrong, and only a change from outside helps.
/// Anything else — `Degraded=True` above all, which the control plane reports whenever
/// a component has unavailable replicas, as it does throughout a rollout — is waited
/// out until the deadline.
pub const UNHEALABLE_CONDITIONS: [&str; 5] = [
    "ValidConfiguration",
    "SupportedHostedCluster",
    "ValidReleaseImage",
    "ValidReleaseInfo",
    "ValidAWSIdentityProvider",
];

/// Reasons of an unhealable condition's `False` that do heal: the pull secret Secret
/// not (yet) there, or without its key (`SecretNotFound`, hostedcluster_controller.go's
/// ValidReleaseImage), is read again on the operator's next pass.
const HEALING_REASONS: [&str; 1] = ["SecretNotFound"];

/// The condition by which the operator refuses the HostedCluster for good, if any.
fn refusal(conditions: &[Condition]) -> Option<&Condition> {
    conditions.iter().find(|c| {
        c.status == "False"
            && UNHEALABLE_CONDITIONS.contains(&c.kind.as_str())
            && !HEALING_REASONS.contains(&c.reason.as_str())
    })
}

/// Creates `object` with strict field validation: a field the CRD does not know is
/// refused, not silently pruned (kube-rs's `PostParams` cannot ask for it, so the
/// request is built here).
async fn create_strictly(
    kube: &KubeActivities,
    api: &Api<DynamicObject>,
    object: &DynamicObject,
) -> Result<DynamicObject, kube::Error> {
    let body = serde_json::to_vec(object).map_err(kube::Error::SerdeError)?;
    let url = format!(
        "{}?fieldManager={FIELD_MANAGER}&fieldValidation=Strict",
        api.resource_url()
    );
    let http_request = http::Request::post(url)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(body)
        .map_err(kube::Error::HttpError)?;
    kube.client.request::<DynamicObject>(http_request).await
}

/// Reads the HostedCluster and its conditions, failing as the waits do: gone is a
/// permanent `NotFound`; one of [`UNHEALABLE_CONDITIONS`] False is a permanent
/// `HostedCluster<reason>` with the operator's message.
async fn look_at(
    api: &Api<DynamicObject>,
    name: &str,
    what: &str,
) -> Result<(DynamicObject, Vec<Condition>), ActivityFailure> {
    let object = api
        .get_opt(name)
        .await
        .map_err(|e| failure(&format!("reading {what}"), e))?
        .ok_or_else(|| ActivityFailure::permanent("NotFound", format!("{what} does not exist")))?;
    let conditions = conditions(object.data.get("status"));
    if let Some(refused) = refusal(&conditions) {
        return Err(ActivityFailure::permanent(
            format!("HostedCluster{}", refused.reason),
            format!("the operator refuses {what}: {refused}"),
        ));
    }
    Ok((object, conditions))
}

/// Waits until `Available=True`.
///
/// Errors: one of [`UNHEALABLE_CONDITIONS`] `False` is a permanent
/// `HostedCluster<reason>` failure at once, with the operator's message; after
/// `timeout_secs` a permanent `Timeout` naming the first condition that is not yet true
/// and, if the control plane is still degraded then, its Degraded message; a
/// HostedCluster that is gone, permanent `NotFound`.
pub async fn wait_available(
    kube: &KubeActivities,
    request: &WaitHostedClusterAvailable,
) -> Result<HostedClusterAvailable, ActivityFailure> {
    let api = api(kube, &request.namespace);
    let what = format!("HostedCluster {}/{}", request.namespace, request.name);
    poll(
        &format!("{what} is not Available"),
        std::time::Duration::from_secs(request.timeout_secs),
        kube.timing.poll_interval,
        || async {
            let (object, conditions) = look_at(&api, &request.name, &what).await?;
            let status = object.data.get("status");
            if find(&conditions, "Available").is_some_and(|c| c.is_true()) {
                let text = |pointer: &str| {
                    status
                        .and_then(|s| s.pointer(pointer))
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                };
                return Ok(Look::Done(HostedClusterAvailable {
                    kubeconfig_secret: text("/kubeconfig/name")
                        .unwrap_or_else(|| format!("{}-admin-kubeconfig", request.name)),
                    version_image: text("/version/history/0/image"),
                }));
            }
            // The first condition not yet true is what blocks; none reported yet means
            // the operator has not looked at it.
            let mut blocking = conditions
                .iter()
                .find(|c| !c.is_true() && !matches!(c.kind.as_str(), "Progressing" | "Degraded"))
                .map(ToString::to_string)
                .unwrap_or_else(|| "no conditions reported yet".to_owned());
            if let Some(degraded) = find(&conditions, "Degraded").filter(|c| c.is_true()) {
                blocking.push_str(&format!("; {degraded}"));
            }
            Ok(Look::Waiting(blocking))
        },
    )
    .await
}

/// Waits until the operators' condition `request.condition` is True.
///
/// Errors: one of [`UNHEALABLE_CONDITIONS`] `False` is a permanent
/// `HostedCluster<reason>` failure at once; after `timeout_secs` a permanent `Timeout`
/// with the condition as the operator last reported it (say `AWSEndpointAvailable=False
/// (AWSError): failed to create vpc endpoint: UnauthorizedOperation`); a HostedCluster
/// that is gone, permanent `NotFound`.
pub async fn wait_condition(
    kube: &KubeActivities,
    request: &WaitHostedClusterCondition,
) -> Result<HostedClusterCondition, ActivityFailure> {
    let api = api(kube, &request.namespace);
    let what = format!("HostedCluster {}/{}", request.namespace, request.name);
    poll(
        &format!("{what}: {} is not True", request.condition),
        std::time::Duration::from_secs(request.timeout_secs),
        kube.timing.poll_interval,
        || async {
            let (_, conditions) = look_at(&api, &request.name, &what).await?;
            Ok(match find(&conditions, &request.condition) {
                Some(condition) if condition.is_true() => Look::Done(HostedClusterCondition {
                    condition: condition.kind.clone(),
                    reason: condition.reason.clone(),
                    message: condition.message.clone(),
                }),
                Some(condition) => Look::Waiting(condition.to_string()),
                None => Look::Waiting(format!(
                    "the operator has not reported {} yet",
                    request.condition
                )),
            })
        },
    )
    .await
}

/// The annotation that asks the operator to remove, with the cluster, what the guest
/// made in AWS (its load balancers, volumes, image-registry bucket) and the default
/// security group — set by `hypershift destroy cluster` before its delete.
pub const CLEANUP_CLOUD_RESOURCES: &str = "hypershift.openshift.io/cleanup-cloud-resources";

/// Asks the operator to clean up the guest's cloud resources
/// ([`CLEANUP_CLOUD_RESOURCES`]), then deletes the HostedCluster and waits until its
/// finalizer is gone. A HostedCluster already gone is done.
pub async fn delete_hosted_cluster(
    kube: &KubeActivities,
    cluster: &HostedCluster,
    ledger: &Ledger,
) -> Result<(), ActivityFailure> {
    let api = api(kube, &cluster.object.namespace);
    let what = format!(
        "HostedCluster {}/{}",
        cluster.object.namespace, cluster.object.name
    );
    let annotate = json!({"metadata": {"annotations": {CLEANUP_CLOUD_RESOURCES: "true"}}});
    match api
        .patch(
            &cluster.object.name,
            &PatchParams::default(),
            &Patch::Merge(&annotate),
        )
        .await
    {
        Ok(_) => {}
        Err(e) if is_not_found(&e) => return Ok(()),
        Err(e) => return Err(failure(&format!("annotating {what} for cleanup"), e)),
    }
    delete_custom_object(
        kube,
        &hosted_clusters(),
        "HostedCluster",
        &cluster.object,
        ledger,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn condition(kind: &str, status: &str, reason: &str) -> Condition {
        Condition {
            kind: kind.into(),
            status: status.into(),
            reason: reason.into(),
            message: String::new(),
        }
    }

    #[test]
    fn a_missing_pull_secret_is_waited_out_and_a_wrong_release_refused() {
        let waiting = [
            condition("Degraded", "True", "UnavailableReplicas"),
            condition("ValidReleaseImage", "False", "SecretNotFound"),
        ];
        assert!(refusal(&waiting).is_none());
        let refused = [condition("ValidReleaseImage", "False", "InvalidImage")];
        assert_eq!(refusal(&refused).unwrap().reason, "InvalidImage");
    }
}

//! The namespace of the cluster's objects. Often shared (`clusters`), so it is created
//! — and later deleted — only when this cluster's create found it absent.

use hcpflow_engine::{ActivityFailure, Ledger};
use hcpflow_hypershift::kube::namespace::{ApplyNamespace, Namespace};
use hcpflow_hypershift::kube::INFRA_LABEL;
use k8s_openapi::api::core::v1::Namespace as NamespaceObject;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::delete::delete_and_wait;
use crate::dispatch::KubeActivities;
use crate::error::failure;
use crate::resources::{hosted_clusters, ledger_ref, FIELD_MANAGER};

/// Guarantees: a namespace absent is created labelled with this infra id; a later run
/// (after a crash) finds that label and reports it as created for the cluster again. A
/// namespace that exists without the label is not touched.
pub async fn apply_namespace(
    kube: &KubeActivities,
    request: &ApplyNamespace,
    ledger: &Ledger,
) -> Result<Namespace, ActivityFailure> {
    let api: Api<NamespaceObject> = Api::all(kube.client.clone());
    let what = format!("Namespace {}", request.namespace);
    let existing = api
        .get_opt(&request.namespace)
        .await
        .map_err(|e| failure(&format!("reading {what}"), e))?;
    let ours = match &existing {
        None => true,
        Some(namespace) => namespace.labels().get(INFRA_LABEL) == Some(&request.infra_id),
    };
    if ours {
        let document = json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": request.namespace, "labels": {INFRA_LABEL: request.infra_id}},
        });
        api.patch(
            &request.namespace,
            &PatchParams::apply(FIELD_MANAGER)
                .force()
                .validation_strict(),
            &Patch::Apply(&document),
        )
        .await
        .map_err(|e| failure(&format!("applying {what}"), e))?;
        ledger.created(ledger_ref(
            "Namespace",
            &request.infra_id,
            None,
            &request.namespace,
        ));
    }
    Ok(Namespace {
        infra_id: request.infra_id.clone(),
        name: request.namespace.clone(),
        created_for_cluster: ours,
    })
}

/// Deletes the namespace if it was created for this cluster and no other HostedCluster
/// lives there; otherwise leaves it.
pub async fn delete_namespace(
    kube: &KubeActivities,
    namespace: &Namespace,
    ledger: &Ledger,
) -> Result<(), ActivityFailure> {
    if !namespace.created_for_cluster {
        return Ok(());
    }
    let what = format!("Namespace {}", namespace.name);
    let clusters: Api<DynamicObject> =
        Api::namespaced_with(kube.client.clone(), &namespace.name, &hosted_clusters());
    let others = clusters
        .list(&ListParams::default())
        .await
        .map_err(|e| failure(&format!("listing the HostedClusters of {what}"), e))?;
    if let Some(other) = others.items.first() {
        tracing::info!(namespace = %namespace.name, other = %other.name_any(),
            "namespace kept: another HostedCluster lives there");
        return Ok(());
    }
    let api: Api<NamespaceObject> = Api::all(kube.client.clone());
    let existed = delete_and_wait(
        &api,
        &what,
        &namespace.name,
        kube.timing.delete_wait,
        kube.timing.poll_interval,
    )
    .await?;
    if existed {
        ledger.deleted(ledger_ref(
            "Namespace",
            &namespace.infra_id,
            None,
            &namespace.name,
        ));
    }
    Ok(())
}

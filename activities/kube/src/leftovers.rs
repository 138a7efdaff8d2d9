//! What the management cluster still holds of a cluster (by its infra-id label).

use hcpflow_engine::ActivityFailure;
use hcpflow_hypershift::aws::sweep::Leftover;
use hcpflow_hypershift::kube::leftovers::FindKubeLeftovers;
use hcpflow_hypershift::kube::INFRA_LABEL;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::{Api, ResourceExt};

use crate::dispatch::KubeActivities;
use crate::error::{failure, is_not_found};
use crate::resources::{hosted_clusters, node_pools};

/// Every HostedCluster, NodePool and Secret labelled with the infra id in the
/// namespace, and the namespace when it carries the label; sorted.
pub async fn find_leftovers(
    kube: &KubeActivities,
    request: &FindKubeLeftovers,
) -> Result<Vec<Leftover>, ActivityFailure> {
    let selector = ListParams::default().labels(&format!("{INFRA_LABEL}={}", request.infra_id));
    let ns = &request.namespace;
    let mut found = Vec::new();
    let custom: [(&str, ApiResource); 2] = [
        ("HostedCluster", hosted_clusters()),
        ("NodePool", node_pools()),
    ];
    for (kind, resource) in custom {
        let api: Api<DynamicObject> = Api::namespaced_with(kube.client.clone(), ns, &resource);
        let list = api
            .list(&selector)
            .await
            .map_err(|e| failure(&format!("listing {kind}s in {ns}"), e))?;
        found.extend(list.items.iter().map(|o| Leftover {
            kind: format!("kube:{kind}"),
            id: format!("{ns}/{}", o.name_any()),
        }));
    }
    let secrets: Api<Secret> = Api::namespaced(kube.client.clone(), ns);
    let list = secrets
        .list(&selector)
        .await
        .map_err(|e| failure(&format!("listing Secrets in {ns}"), e))?;
    found.extend(list.items.iter().map(|o| Leftover {
        kind: "kube:Secret".into(),
        id: format!("{ns}/{}", o.name_any()),
    }));
    let namespaces: Api<Namespace> = Api::all(kube.client.clone());
    match namespaces.get(ns).await {
        Ok(namespace) if namespace.labels().get(INFRA_LABEL) == Some(&request.infra_id) => {
            found.push(Leftover {
                kind: "kube:Namespace".into(),
                id: ns.clone(),
            });
        }
        Ok(_) => {}
        Err(e) if is_not_found(&e) => {}
        Err(e) => return Err(failure(&format!("reading Namespace {ns}"), e)),
    }
    found.sort();
    Ok(found)
}

//! The API resources the activities use, stated explicitly (a real management cluster
//! serves them under these names; nothing is discovered at run time), the field manager
//! of every apply, and the resource-ledger entry of an object.

use hcpflow_engine::event::ResourceRef;
use hcpflow_hypershift::kube::ObjectRef;
use kube::api::{ApiResource, GroupVersionKind};

/// The field manager of every server-side apply and write.
pub const FIELD_MANAGER: &str = "hcpflow";

/// Marks Secrets that go with their cluster (as the HyperShift CLI labels them).
pub const SAFE_TO_DELETE_LABEL: &str = "hypershift.openshift.io/safe-to-delete-with-cluster";

pub const HYPERSHIFT_GROUP: &str = "hypershift.openshift.io";
pub const HYPERSHIFT_VERSION: &str = "v1beta1";

/// `hostedclusters.hypershift.openshift.io/v1beta1`.
pub fn hosted_clusters() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(HYPERSHIFT_GROUP, HYPERSHIFT_VERSION, "HostedCluster"),
        "hostedclusters",
    )
}

/// `nodepools.hypershift.openshift.io/v1beta1`.
pub fn node_pools() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(HYPERSHIFT_GROUP, HYPERSHIFT_VERSION, "NodePool"),
        "nodepools",
    )
}

/// The ledger entry of a Kubernetes object: provider `kubernetes`, kind
/// `kube:<Kind>`, id `<namespace>/<name>` (just the name when cluster-scoped).
pub fn ledger_ref(kind: &str, infra_id: &str, namespace: Option<&str>, name: &str) -> ResourceRef {
    ResourceRef {
        provider: "kubernetes".into(),
        kind: format!("kube:{kind}"),
        id: match namespace {
            Some(namespace) => format!("{namespace}/{name}"),
            None => name.to_owned(),
        },
        region: None,
        cluster: Some(infra_id.to_owned()),
    }
}

/// [`ledger_ref`] of a namespaced object.
pub fn object_ledger_ref(kind: &str, object: &ObjectRef) -> ResourceRef {
    ledger_ref(
        kind,
        &object.infra_id,
        Some(&object.namespace),
        &object.name,
    )
}

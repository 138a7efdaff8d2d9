//! The namespace the cluster's objects live in (often shared: `clusters`).

use serde::{Deserialize, Serialize};

use crate::kube::{kube_activity, Delete};

/// Makes sure the namespace exists. One that is absent is created for this cluster (and
/// labelled so); one that exists is left as it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApplyNamespace {
    pub infra_id: String,
    pub namespace: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Namespace {
    pub infra_id: String,
    pub name: String,
    /// Created for this cluster: its delete removes it, unless another HostedCluster
    /// lives there by then.
    pub created_for_cluster: bool,
}

kube_activity!(ApplyNamespace => Namespace, "kube.apply_namespace", creates);
kube_activity!(Delete<Namespace> => (), "kube.delete_namespace");

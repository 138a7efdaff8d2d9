//! What the management cluster still holds of a cluster: the destroy's last check.

use serde::{Deserialize, Serialize};

use crate::aws::sweep::Leftover;
use crate::kube::kube_activity;

/// Lists the objects labelled with this infra id in the namespace, and the namespace
/// itself when it was created for the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FindKubeLeftovers {
    pub infra_id: String,
    pub namespace: String,
}

kube_activity!(FindKubeLeftovers => Vec<Leftover>, "kube.find_leftovers");

//! Every Kubernetes activity by its type name: what a worker registers, and the one
//! place that maps a name (`kube.apply_secrets`) to its implementation.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use hcpflow_engine::{Activity, ActivityFailure, Keyring, Ledger, SealKeys, WorkflowId};
use hcpflow_hypershift::kube::hosted_cluster::*;
use hcpflow_hypershift::kube::leftovers::*;
use hcpflow_hypershift::kube::namespace::*;
use hcpflow_hypershift::kube::node_pool::*;
use hcpflow_hypershift::kube::private_platform::*;
use hcpflow_hypershift::kube::secrets::*;
use hcpflow_hypershift::Delete;
use serde_json::Value;

use crate::secret_refs::SecretRefResolver;
use crate::{hosted_cluster, leftovers, namespace, node_pool, private_platform, secrets};

/// How often waits look, and how long a delete waits for finalizers per attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    pub poll_interval: Duration,
    pub delete_wait: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_secs(1),
            delete_wait: Duration::from_secs(300),
        }
    }
}

/// The Kubernetes activities of one process: the management cluster's client, the
/// seal keys that open the Secrets' values, and the waits' timing.
#[derive(Clone)]
pub struct KubeActivities {
    pub client: kube::Client,
    pub seal_keys: Option<Arc<SealKeys>>,
    /// Reads pull secrets given by reference; `None`: references are refused.
    pub secret_refs: Option<Arc<dyn SecretRefResolver>>,
    pub timing: Timing,
}

impl fmt::Debug for KubeActivities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubeActivities")
            .field("default_namespace", &self.client.default_namespace())
            .field("seal_keys", &self.seal_keys.is_some())
            .field("secret_refs", &self.secret_refs)
            .field("timing", &self.timing)
            .finish()
    }
}

impl KubeActivities {
    pub fn new(client: kube::Client, seal_keys: Option<Arc<SealKeys>>) -> Self {
        Self {
            client,
            seal_keys,
            secret_refs: None,
            timing: Timing::default(),
        }
    }

    /// These activities read pull secrets by reference through `resolver`.
    pub fn with_secret_refs(mut self, resolver: Arc<dyn SecretRefResolver>) -> Self {
        self.secret_refs = Some(resolver);
        self
    }

    pub(crate) fn secret_refs(&self) -> Result<&dyn SecretRefResolver, ActivityFailure> {
        // The deployment's doing, not the tenant's.
        self.secret_refs.as_deref().ok_or_else(|| {
            ActivityFailure::permanent(
                "SecretRefsUnavailable",
                "this worker reads no pull secret references (no resolver is configured)",
            )
        })
    }

    /// The keyring in force, for one activity's whole run.
    pub(crate) fn keyring(&self) -> Result<Arc<Keyring>, ActivityFailure> {
        self.seal_keys
            .as_ref()
            .map(|keys| keys.current())
            .ok_or_else(|| {
                ActivityFailure::permanent(
                    "NoSealKey",
                    "writing the cluster's Secrets needs the seal key: set HCPFLOW_SEAL_KEY",
                )
            })
    }
}

/// `activities! { Request => |this, ledger, request| future; ... }`: the list of type
/// names and the dispatch over them, from one table.
macro_rules! activities {
    ($( $request:ty => |$kube:ident, $ledger:ident, $req:ident $(, $owner:ident)?| $call:expr; )*) => {
        /// Every Kubernetes activity type this crate implements.
        pub const TYPES: &[&str] = &[$(<$request as Activity>::TYPE),*];

        impl KubeActivities {
            /// Runs the activity `activity_type` on `input` for workflow `owner`, noting
            /// what it creates or deletes in `ledger`.
            pub async fn run(&self, activity_type: &str, input: Value, ledger: &Ledger, owner: &WorkflowId) -> Result<Value, ActivityFailure> {
                $(
                    if activity_type == <$request as Activity>::TYPE {
                        let $req: $request = ActivityFailure::decode_input(activity_type, input)?;
                        let $kube = self;
                        let $ledger = ledger;
                        $( let $owner = owner; )?
                        return ActivityFailure::encode_output($call.await?);
                    }
                )*
                Err(ActivityFailure::permanent(
                    "UnknownActivity",
                    format!("{activity_type} is not a Kubernetes activity"),
                ))
            }
        }
    };
}

activities! {
    ApplyNamespace => |kube, ledger, r| namespace::apply_namespace(kube, &r, ledger);
    Delete<Namespace> => |kube, ledger, r| namespace::delete_namespace(kube, &r.0, ledger);
    ApplySecrets => |kube, ledger, r, owner| secrets::apply_secrets(kube, &r, ledger, owner);
    Delete<Secrets> => |kube, ledger, r| secrets::delete_secrets(kube, &r.0, ledger);
    CreateHostedCluster => |kube, ledger, r| hosted_cluster::create_hosted_cluster(kube, &r, ledger);
    WaitHostedClusterAvailable => |kube, _ledger, r| hosted_cluster::wait_available(kube, &r);
    WaitHostedClusterCondition => |kube, _ledger, r| hosted_cluster::wait_condition(kube, &r);
    CheckPrivatePlatform => |kube, _ledger, r| private_platform::check_private_platform(kube, &r);
    Delete<HostedCluster> => |kube, ledger, r| hosted_cluster::delete_hosted_cluster(kube, &r.0, ledger);
    ApplyNodePool => |kube, ledger, r| node_pool::apply_node_pool(kube, &r, ledger);
    GetNodePool => |kube, _ledger, r| node_pool::get_node_pool(kube, &r);
    ScaleNodePool => |kube, _ledger, r| node_pool::scale_node_pool(kube, &r);
    WaitNodePoolReady => |kube, _ledger, r| node_pool::wait_ready(kube, &r);
    Delete<NodePool> => |kube, ledger, r| node_pool::delete_node_pool(kube, &r.0, ledger);
    FindKubeLeftovers => |kube, _ledger, r| leftovers::find_leftovers(kube, &r);
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_type_name_is_distinct_and_namespaced() {
        let mut names = super::TYPES.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), super::TYPES.len());
        assert!(names.iter().all(|n| n.starts_with("kube.")));
        assert_eq!(names.len(), 15);
    }
}

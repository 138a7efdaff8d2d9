//! The Kubernetes activities the workflows call: their requests and results, and their
//! stable type names (`kube.apply_namespace`, ...), under which `hcpflow-kube`
//! implements them. Each create's result, wrapped in [`Delete`], is its compensation's
//! request.
//!
//! Every object is labelled [`INFRA_LABEL`]` = <infra id>`, as the HyperShift CLI does:
//! a later attempt adopts only what carries its own infra id.

pub mod hosted_cluster;
pub mod leftovers;
pub mod namespace;
pub mod node_pool;
pub mod private_platform;
pub mod secrets;

pub use crate::delete::Delete;
use hcpflow_engine::{ActivityOptions, RetryPolicy};

/// The label that says which cluster (infra id) an object was made for.
pub const INFRA_LABEL: &str = "hypershift.openshift.io/auto-created-for-infra";

/// How Kubernetes activities run: retried with backoff for about 20 minutes (conflicts,
/// an API server briefly away and objects still terminating are retryable), and up to
/// 60 minutes per attempt, since a wait for a control plane or for nodes is one attempt
/// (its own `timeout_secs` is the deadline that matters).
pub fn options() -> ActivityOptions {
    let mut options = ActivityOptions::default().with_retry(RetryPolicy {
        initial_interval_ms: 2_000,
        backoff_coefficient: 2.0,
        max_interval_ms: 60_000,
        max_attempts: 25,
        non_retryable: Vec::new(),
    });
    options.start_to_close_timeout_ms = 60 * 60 * 1000;
    options
}

/// `kube_activity!(Request => Output, "kube.name");` implements [`hcpflow_engine::Activity`].
macro_rules! kube_activity {
    ($request:ty => $output:ty, $name:literal) => {
        kube_activity!(@impl $request => $output, $name, false);
    };
    // `creates`: the call makes something, so a cancel waits for it.
    ($request:ty => $output:ty, $name:literal, creates) => {
        kube_activity!(@impl $request => $output, $name, true);
    };
    (@impl $request:ty => $output:ty, $name:literal, $creates:literal) => {
        impl hcpflow_engine::Activity for $request {
            const TYPE: &'static str = $name;
            type Output = $output;
            const FINISHES_ON_CANCEL: bool = $creates;
            fn options(&self) -> hcpflow_engine::ActivityOptions {
                crate::kube::options()
            }
        }
    };
}
pub(crate) use kube_activity;

/// Where a namespaced object lives, and for which cluster it was made.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ObjectRef {
    pub infra_id: String,
    pub namespace: String,
    pub name: String,
}

#[cfg(test)]
mod tests {
    use hcpflow_engine::Activity;

    use super::hosted_cluster::HostedCluster;
    use super::{Delete, ObjectRef};

    #[test]
    fn a_kube_compensation_is_named_and_carries_the_create_result() {
        assert_eq!(
            <Delete<HostedCluster> as Activity>::TYPE,
            "kube.delete_hosted_cluster"
        );
        let created = HostedCluster {
            object: ObjectRef {
                infra_id: "demo-x7k2p".into(),
                namespace: "clusters".into(),
                name: "demo".into(),
            },
            uid: "u-1".into(),
        };
        let wire = serde_json::to_value(Delete(created.clone())).unwrap();
        assert_eq!(wire["object"]["name"], "demo");
        assert_eq!(
            Delete(created).options().start_to_close_timeout_ms,
            3_600_000
        );
    }
}

//! What this server runs: the workflow types (the built-in [`builtin`] ones and the
//! HyperShift ones from `hcpflow_hypershift::catalog`) and the activities by type name
//! ([`activities`]): AWS ([`aws`]), Kubernetes ([`kube`]) and the cluster registry
//! ([`registry`]); [`secret_refs`] reads pull secrets by reference for the Kubernetes
//! activities.

pub mod activities;
pub mod aws;
pub mod builtin;
pub mod kube;
pub mod registry;
pub mod secret_refs;

use std::sync::Arc;

use hcpflow_aws::AwsActivities;
use hcpflow_engine::Catalog;
use hcpflow_kube::KubeActivities;

use activities::ActivityRegistry;

/// The workflow types and activities this binary serves: the HyperShift ones, the
/// built-in `noop_*` ones when `builtin` (tests and benchmarks), and the AWS and
/// Kubernetes activities when their clients are given.
pub fn build(
    aws: Option<Arc<AwsActivities>>,
    kube: Option<Arc<KubeActivities>>,
    builtin: bool,
) -> anyhow::Result<(Catalog, ActivityRegistry)> {
    let mut catalog = Catalog::new();
    hcpflow_hypershift::catalog::register_workflows(&mut catalog)?;
    let mut activities = ActivityRegistry::new();
    if builtin {
        builtin::register_workflows(&mut catalog)?;
        builtin::register_activities(&mut activities);
    }
    if let Some(aws) = aws {
        aws::register(&mut activities, aws);
    }
    if let Some(kube) = kube {
        kube::register(&mut activities, kube);
    }
    Ok((catalog, activities))
}

//! The Kubernetes activities (`hcpflow-kube`) registered under their type names, each
//! attempt noting what it creates or deletes in the attempt's ledger.

use std::sync::Arc;

use hcpflow_kube::KubeActivities;

use crate::catalog::activities::ActivityRegistry;

/// Registers every Kubernetes activity type to run with `kube`.
pub fn register(activities: &mut ActivityRegistry, kube: Arc<KubeActivities>) {
    for activity_type in hcpflow_kube::dispatch::TYPES {
        let kube = kube.clone();
        activities.register(activity_type, move |input| {
            let kube = kube.clone();
            async move {
                kube.run(
                    activity_type,
                    input.input,
                    &input.ledger,
                    &input.workflow_id,
                )
                .await
            }
        });
    }
}

//! Delete, then wait until the object is gone: a finalizer (the HyperShift operator's
//! on a HostedCluster or NodePool) holds it until the operator has cleaned up.

use std::fmt::Debug;
use std::time::Duration;

use hcpflow_engine::{ActivityFailure, Ledger};
use hcpflow_hypershift::kube::ObjectRef;
use kube::api::{ApiResource, DeleteParams, DynamicObject};
use kube::{Api, ResourceExt};
use serde::de::DeserializeOwned;

use crate::dispatch::KubeActivities;
use crate::error::{failure, is_not_found};
use crate::resources::object_ledger_ref;
use crate::wait::{poll, Look};

/// Deletes `name` and waits up to `wait` for it to disappear. Returns whether it was
/// there.
///
/// Guarantees: idempotent — an object already gone is success. An object still held
/// by finalizers after `wait` is a *retryable* `StillTerminating` failure naming them,
/// so the retry policy keeps waiting with backoff rather than stop at one deadline.
pub async fn delete_and_wait<K>(
    api: &Api<K>,
    what: &str,
    name: &str,
    wait: Duration,
    interval: Duration,
) -> Result<bool, ActivityFailure>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug,
{
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => {}
        Err(e) if is_not_found(&e) => return Ok(false),
        Err(e) => return Err(failure(&format!("deleting {what}"), e)),
    }
    let gone = poll(
        &format!("{what} is still there"),
        wait,
        interval,
        || async {
            match api.get_opt(name).await {
                Ok(None) => Ok(Look::Done(())),
                Ok(Some(object)) => Ok(Look::Waiting(format!(
                    "waiting for finalizers {:?}",
                    object.finalizers()
                ))),
                Err(e) => Err(failure(&format!("reading {what}"), e)),
            }
        },
    )
    .await;
    match gone {
        Ok(()) => Ok(true),
        Err(timeout) if timeout.kind == "Timeout" => Err(ActivityFailure::retryable(
            "StillTerminating",
            timeout.message,
        )),
        Err(other) => Err(other),
    }
}

/// Deletes a custom resource (`kind`, served as `resource`) and waits until its
/// finalizers let go; notes the deletion when it was there.
pub async fn delete_custom_object(
    kube: &KubeActivities,
    resource: &ApiResource,
    kind: &str,
    object: &ObjectRef,
    ledger: &Ledger,
) -> Result<(), ActivityFailure> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(kube.client.clone(), &object.namespace, resource);
    let what = format!("{kind} {}/{}", object.namespace, object.name);
    let existed = delete_and_wait(
        &api,
        &what,
        &object.name,
        kube.timing.delete_wait,
        kube.timing.poll_interval,
    )
    .await?;
    if existed {
        ledger.deleted(object_ledger_ref(kind, object));
    }
    Ok(())
}

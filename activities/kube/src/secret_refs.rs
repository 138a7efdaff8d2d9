//! Pull secrets by reference, read in the activity that writes the cluster's pull
//! secret (`kube.apply_secrets`): the value goes from its source to the hosted
//! cluster's Secret and nowhere else — not into the history, not onto NATS, not into an
//! error. Who may read which reference is decided by a [`SecretRefResolver`] the server
//! provides (it knows the calling workflow's tenant and the configured grants).

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use hcpflow_engine::{ActivityFailure, WorkflowId};
use hcpflow_hypershift::pull_secret_ref::{KubernetesSecretRef, PullSecretRef, SecretSource};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;

use crate::error::failure;

/// The type of a Secret holding a `.dockerconfigjson`.
pub const DOCKERCONFIGJSON_TYPE: &str = "kubernetes.io/dockerconfigjson";

/// What a resolution returns, boxed so the resolver can live behind `dyn`.
pub type Resolution<'a> =
    Pin<Box<dyn Future<Output = Result<String, ActivityFailure>> + Send + 'a>>;

/// Reads the document a reference names, for the workflow `owner`, if the owner's
/// tenant is granted it.
pub trait SecretRefResolver: Send + Sync + fmt::Debug {
    fn resolve<'a>(&'a self, owner: &'a WorkflowId, reference: &'a PullSecretRef)
        -> Resolution<'a>;
}

/// The failure of a reference the workflow's tenant is not granted, or that names
/// nothing.
pub fn refused(problem: impl Into<String>) -> ActivityFailure {
    ActivityFailure::permanent("SecretRefForbidden", problem)
}

/// The value of one key of a Secret on the management cluster.
pub async fn read_kubernetes_secret(
    client: &kube::Client,
    reference: &KubernetesSecretRef,
) -> Result<String, ActivityFailure> {
    let source = SecretSource::Kubernetes(reference);
    let api: Api<Secret> = Api::namespaced(client.clone(), &reference.namespace);
    let secret = api
        .get_opt(&reference.name)
        .await
        .map_err(|e| failure(&format!("reading the pull secret's {source}"), e))?
        .ok_or_else(|| {
            ActivityFailure::permanent("PullSecretNotFound", format!("the {source} does not exist"))
        })?;
    // Only a pull secret: a grant of a namespace is not a grant of its other Secrets.
    if secret.type_.as_deref() != Some(DOCKERCONFIGJSON_TYPE) {
        return Err(ActivityFailure::permanent(
            "InvalidPullSecret",
            format!("the {source} is not of type {DOCKERCONFIGJSON_TYPE}"),
        ));
    }
    let value = secret
        .data
        .and_then(|mut data| data.remove(&reference.key))
        .ok_or_else(|| {
            ActivityFailure::permanent(
                "PullSecretNotFound",
                format!("the {source} has no such key"),
            )
        })?;
    dockerconfigjson(source, value.0)
}

/// The document, if it is a `.dockerconfigjson` (a JSON object with an `auths` object:
/// not any JSON a broad grant happens to reach); the failure names where it came from,
/// never what it holds.
pub fn dockerconfigjson(
    source: SecretSource<'_>,
    bytes: Vec<u8>,
) -> Result<String, ActivityFailure> {
    let invalid = || {
        ActivityFailure::permanent(
            "InvalidPullSecret",
            format!("the {source} does not hold a .dockerconfigjson document (a JSON object with \"auths\")"),
        )
    };
    let text = String::from_utf8(bytes).map_err(|_| invalid())?;
    match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(document) if document.get("auths").is_some_and(|auths| auths.is_object()) => Ok(text),
        _ => Err(invalid()),
    }
}

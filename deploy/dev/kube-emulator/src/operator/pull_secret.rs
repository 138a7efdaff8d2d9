//! The HostedCluster's pull secret as the hypershift-operator reads it, modelled on
//! openshift/hypershift's support/util/util.go (`GetPullSecretBytes`,
//! `ErrPullSecretUnavailable`) and hypershift-operator/controllers/hostedcluster/
//! hostedcluster_controller.go (the `ValidReleaseImage` and `Progressing` blocks of
//! `reconcile`, `validateReleaseImage`, `lookupReleaseImage`,
//! `computeHostedClusterAvailability`, `reconcilePullSecretSync`) with its
//! reconcile_report.go (how the failed operations become the error
//! `ReconciliationSucceeded` carries).
//!
//! The operator reads the Secret `spec.pullSecret.name` in the HostedCluster's own
//! namespace, and needs only its `.dockerconfigjson` key to be there (the API server
//! has already checked that a `kubernetes.io/dockerconfigjson` Secret holds JSON). When
//! it cannot:
//!
//! - the release image cannot be looked up, so `ValidReleaseImage` is False with reason
//!   `SecretNotFound` and the wrapped error as message (`pull secret unavailable:
//!   secrets "<name>" not found`, or `pull secret unavailable: expected
//!   .dockerconfigjson key in secret "<name>"`) — re-checked on every pass, so it
//!   heals by itself once the Secret is right;
//! - `Progressing` is False `Blocked` with the same message, and without a hosted
//!   control plane `Available` is False `WaitingForAvailable` with it too, and
//!   `Degraded` Unknown `StatusUnknown` "The hosted control plane is not found";
//! - the reconciliation goes on "degraded", but its critical steps fail (resolving the
//!   control-plane-operator image and the control-plane namespace, copying the pull
//!   secret, the release version) and everything that deploys components is blocked:
//!   `ReconciliationSucceeded` is False `ReconciliationError` with the report's
//!   aggregate. No control plane is made, so none rolls out. A control plane made
//!   before keeps running.
//!
//! Of that aggregate the emulator gives the errors the pull secret causes. For a
//! HostedCluster whose control-plane namespace was never made, the real one also names
//! the steps that then fail to write into it (platform credentials, the
//! HostedControlPlane), which the emulator does not model.

use serde_json::Value;

use crate::resources::SECRETS;
use crate::store::Store;

/// `hyperv1.SecretNotFoundReason`.
pub(super) const SECRET_NOT_FOUND: &str = "SecretNotFound";
/// `corev1.DockerConfigJsonKey`.
const DOCKERCONFIGJSON_KEY: &str = ".dockerconfigjson";
/// The operations `reconcile` blocks after a critical failure (`executeOrBlock`),
/// sorted as the report lists them.
const BLOCKED: [&str; 6] = [
    "KubeconfigAndPasswordSync",
    "MonitoringAndCLISecrets",
    "OperatorDeployments",
    "PlatformOIDCAndCSI",
    "PublicEndpointExposed",
    "RBACAndPolicies",
];

/// Why the operator cannot use the pull secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Unavailable {
    /// `GetPullSecretBytes`' error: the message of `ValidReleaseImage`, `Progressing`
    /// and (without a control plane) `Available`.
    pub(super) message: String,
    /// `reconcilePullSecretSync`'s own error.
    sync: String,
}

impl Unavailable {
    /// The error `reconcile` returns, as `ReconciliationSucceeded`'s message: the
    /// critical failures the pull secret causes (`CPOImageAndNamespace`,
    /// `PullSecretSync`, `ReleaseImageVersion`) and the blocked operations.
    pub(super) fn reconciliation_error(&self) -> String {
        format!(
            "critical error: [failed to get pull secret: {}, {}, release image is not available]; blocked operations: [{}]",
            self.message,
            self.sync,
            BLOCKED.join(", ")
        )
    }
}

/// `GetPullSecretBytes`: `Ok` when the HostedCluster's pull secret exists in its
/// namespace with a `.dockerconfigjson` key.
pub(super) fn check(
    store: &Store,
    namespace: &str,
    hosted_cluster: &Value,
) -> Result<(), Unavailable> {
    let name = hosted_cluster
        .pointer("/spec/pullSecret/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    // What the client's Get answers: client-go refuses an empty name itself.
    let secret = if name.is_empty() {
        Err("resource name may not be empty".to_owned())
    } else {
        store
            .get(&SECRETS, Some(namespace), name)
            .map_err(|e| e.message)
    };
    let secret = secret.map_err(|error| Unavailable {
        message: format!("pull secret unavailable: {error}"),
        sync: format!("failed to get pull secret {name}: {error}"),
    })?;
    if secret
        .pointer("/data")
        .and_then(|data| data.get(DOCKERCONFIGJSON_KEY))
        .is_some()
    {
        return Ok(());
    }
    Err(Unavailable {
        message: format!(
            "pull secret unavailable: expected {DOCKERCONFIGJSON_KEY} key in secret \"{name}\""
        ),
        sync: format!(
            "hostedcluster pull secret \"{name}\" must have a {DOCKERCONFIGJSON_KEY} key"
        ),
    })
}

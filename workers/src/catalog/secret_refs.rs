//! The server's [`SecretRefResolver`]: a pull secret reference is read only for a
//! workflow whose tenant the configuration grants it (`--allow-secret-ref`), checked here
//! at the moment of reading — intake checked it too, but grants may have narrowed since.

use std::sync::Arc;

use hcpflow_aws::AwsClients;
use hcpflow_engine::{ActivityFailure, WorkflowId};
use hcpflow_eventstore::EventStore;
use hcpflow_hypershift::pull_secret_ref::{PullSecretRef, SecretRefPolicy, SecretSource};
use hcpflow_kube::secret_refs::{
    dockerconfigjson, read_kubernetes_secret, refused, Resolution, SecretRefResolver,
};

use crate::catalog::registry::tenant_of;

pub struct SecretRefs {
    pub store: Arc<EventStore>,
    pub policy: SecretRefPolicy,
    /// The management cluster, where Kubernetes references point.
    pub kube: kube::Client,
    pub aws: AwsClients,
}

impl std::fmt::Debug for SecretRefs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretRefs")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl SecretRefs {
    async fn read(
        &self,
        owner: &WorkflowId,
        reference: &PullSecretRef,
    ) -> Result<String, ActivityFailure> {
        let tenant = tenant_of(&self.store, owner).await?;
        self.policy
            .permits(tenant.as_str(), reference)
            .map_err(refused)?;
        match reference.source() {
            Some(SecretSource::Kubernetes(secret)) => {
                read_kubernetes_secret(&self.kube, secret).await
            }
            Some(source @ SecretSource::SecretsManager(secret)) => {
                let value = hcpflow_aws::secrets_manager::secret_string(&self.aws, secret).await?;
                dockerconfigjson(source, value.into_bytes())
            }
            None => Err(refused("the pull secret reference names no single source")),
        }
    }
}

impl SecretRefResolver for SecretRefs {
    fn resolve<'a>(
        &'a self,
        owner: &'a WorkflowId,
        reference: &'a PullSecretRef,
    ) -> Resolution<'a> {
        Box::pin(self.read(owner, reference))
    }
}

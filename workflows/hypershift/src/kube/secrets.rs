//! The cluster's Secrets: pull secret, SSH key, etcd encryption key and the
//! service-account signing key. Secret values travel sealed and are unsealed only in
//! the activity that writes them.

use hcpflow_engine::Sealed;
use serde::{Deserialize, Serialize};

use crate::kube::{kube_activity, Delete};
use crate::pull_secret_ref::PullSecretRef;

/// Where the create input carries the pull secret: intake seals it for the create
/// workflow and this field (`hcpflow_engine::input_purpose`).
pub const PULL_SECRET_POINTER: &str = "/pull_secret";

/// What the service-account signing key is sealed for, by the activity that generates
/// it, in the create workflow.
pub const SIGNING_KEY_PURPOSE: &str = "oidc-signing-key";

/// Server-side applies `<name>-pull-secret`, `<name>-ssh-key`,
/// `<name>-etcd-encryption-key` (32 random bytes, generated once and kept by later
/// applies) and `<name>-sa-token-issuer-key`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApplySecrets {
    pub infra_id: String,
    /// The cluster's name: the Secrets' name prefix.
    pub cluster: String,
    pub namespace: String,
    /// The `.dockerconfigjson` document, sealed for the create workflow's input
    /// ([`PULL_SECRET_POINTER`]). Exactly one of `pull_secret` and `pull_secret_ref`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_secret: Option<Sealed<String>>,
    /// Where the activity reads the document (only the reference is recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_secret_ref: Option<PullSecretRef>,
    pub ssh_public_key: String,
    /// The service-account signing key, PKCS#8 PEM, sealed for the create workflow
    /// ([`SIGNING_KEY_PURPOSE`]).
    pub signing_key: Sealed<String>,
}

/// The Secrets' names, as the HostedCluster references them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Secrets {
    pub infra_id: String,
    pub namespace: String,
    pub pull_secret: String,
    pub ssh_key: String,
    pub etcd_encryption_key: String,
    pub service_account_signing_key: String,
}

impl Secrets {
    /// Every Secret's name.
    pub fn names(&self) -> [&str; 4] {
        [
            &self.pull_secret,
            &self.ssh_key,
            &self.etcd_encryption_key,
            &self.service_account_signing_key,
        ]
    }
}

kube_activity!(ApplySecrets => Secrets, "kube.apply_secrets", creates);
kube_activity!(Delete<Secrets> => (), "kube.delete_secrets");

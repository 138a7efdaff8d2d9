//! The cluster's Secrets, server-side applied. Secret values arrive sealed and are
//! unsealed here only, just before they are written; they are never logged and never
//! part of an error.

use std::collections::BTreeMap;

use hcpflow_engine::{
    input_purpose, ActivityFailure, Binding, Keyring, Ledger, SealError, Sealed, WorkflowId,
};
use hcpflow_hypershift::kube::secrets::{
    ApplySecrets, Secrets, PULL_SECRET_POINTER, SIGNING_KEY_PURPOSE,
};
use hcpflow_hypershift::kube::INFRA_LABEL;
use hcpflow_hypershift::pull_secret_ref::DOCKERCONFIGJSON_KEY;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;
use kube::api::{Patch, PatchParams};
use kube::Api;
use rand::RngCore;

use crate::delete::delete_and_wait;
use crate::dispatch::KubeActivities;
use crate::error::failure;
use crate::resources::{ledger_ref, FIELD_MANAGER, SAFE_TO_DELETE_LABEL};
use crate::secret_refs::DOCKERCONFIGJSON_TYPE;
use crate::signing_key;

/// The length of an AES-CBC etcd encryption key.
const ETCD_KEY_BYTES: usize = 32;

/// The names of a cluster's Secrets (as the HyperShift CLI names them).
pub fn names(infra_id: &str, namespace: &str, cluster: &str) -> Secrets {
    Secrets {
        infra_id: infra_id.to_owned(),
        namespace: namespace.to_owned(),
        pull_secret: format!("{cluster}-pull-secret"),
        ssh_key: format!("{cluster}-ssh-key"),
        etcd_encryption_key: format!("{cluster}-etcd-encryption-key"),
        service_account_signing_key: format!("{cluster}-sa-token-issuer-key"),
    }
}

fn unseal(
    keyring: &Keyring,
    sealed: &Sealed<String>,
    binding: &Binding<'_>,
    what: &str,
) -> Result<String, ActivityFailure> {
    // The seal error says which key id failed, never the value. A value sealed for
    // another workflow or field does not open here.
    keyring.open(sealed, binding).map_err(|e| match e {
        // Mid-rotation, a value sealed with a key this worker does not have yet: the
        // retry policy tries again (another worker, or this one restarted with the key,
        // opens it) before the create gives up.
        SealError::UnknownKey(key_id) => ActivityFailure::retryable(
            "UnknownSealKey",
            format!("unsealing the {what}: this worker has no seal key {key_id:?} (yet)"),
        ),
        other => ActivityFailure::permanent("Unseal", format!("unsealing the {what}: {other}")),
    })
}

fn secret(
    request: &ApplySecrets,
    name: &str,
    kind: &str,
    data: BTreeMap<String, Vec<u8>>,
) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(request.namespace.clone()),
            labels: Some(BTreeMap::from([
                (INFRA_LABEL.to_owned(), request.infra_id.clone()),
                (SAFE_TO_DELETE_LABEL.to_owned(), "true".to_owned()),
            ])),
            ..ObjectMeta::default()
        },
        type_: Some(kind.to_owned()),
        data: Some(
            data.into_iter()
                .map(|(key, value)| (key, ByteString(value)))
                .collect(),
        ),
        ..Secret::default()
    }
}

/// The signing key as the operator parses it (PKCS#1), whatever form it was sealed in.
fn operator_signing_key(pem: &str) -> Result<String, ActivityFailure> {
    signing_key::pkcs1_pem(pem).map_err(|e| {
        ActivityFailure::permanent(
            "InvalidSigningKey",
            format!("the service-account signing key cannot be written for the operator: {e}"),
        )
    })
}

/// Guarantees: running it again applies the same four Secrets; the etcd encryption key
/// is generated once and read back by later runs, so a retry never rotates it.
pub async fn apply_secrets(
    kube: &KubeActivities,
    request: &ApplySecrets,
    ledger: &Ledger,
    owner: &WorkflowId,
) -> Result<Secrets, ActivityFailure> {
    let keyring = kube.keyring()?;
    let pull_secret = match (&request.pull_secret, &request.pull_secret_ref) {
        (Some(sealed), None) => unseal(
            &keyring,
            sealed,
            &Binding::new(owner, &input_purpose(PULL_SECRET_POINTER)),
            "pull secret",
        )?,
        (None, Some(reference)) => kube.secret_refs()?.resolve(owner, reference).await?,
        _ => {
            return Err(ActivityFailure::permanent(
                "InvalidInput",
                "exactly one of pull_secret and pull_secret_ref is given",
            ))
        }
    };
    let names = names(&request.infra_id, &request.namespace, &request.cluster);
    let api: Api<Secret> = Api::namespaced(kube.client.clone(), &request.namespace);

    let etcd_key = match api
        .get_opt(&names.etcd_encryption_key)
        .await
        .map_err(|e| failure(&format!("reading Secret {}", names.etcd_encryption_key), e))?
        .and_then(|s| s.data)
        .and_then(|mut data| data.remove("key"))
    {
        Some(ByteString(key)) if key.len() == ETCD_KEY_BYTES => key,
        _ => {
            let mut key = vec![0u8; ETCD_KEY_BYTES];
            rand::rngs::OsRng.fill_bytes(&mut key);
            key
        }
    };
    let documents = [
        secret(
            request,
            &names.pull_secret,
            DOCKERCONFIGJSON_TYPE,
            BTreeMap::from([(DOCKERCONFIGJSON_KEY.to_owned(), pull_secret.into_bytes())]),
        ),
        secret(
            request,
            &names.ssh_key,
            "Opaque",
            BTreeMap::from([(
                "id_rsa.pub".to_owned(),
                request.ssh_public_key.clone().into_bytes(),
            )]),
        ),
        secret(
            request,
            &names.etcd_encryption_key,
            "Opaque",
            BTreeMap::from([("key".to_owned(), etcd_key)]),
        ),
        secret(
            request,
            &names.service_account_signing_key,
            "Opaque",
            BTreeMap::from([(
                "key".to_owned(),
                operator_signing_key(&unseal(
                    &keyring,
                    &request.signing_key,
                    &Binding::new(owner, SIGNING_KEY_PURPOSE),
                    "service-account signing key",
                )?)?
                .into_bytes(),
            )]),
        ),
    ];
    for document in &documents {
        let name = document.metadata.name.as_deref().unwrap_or_default();
        api.patch(
            name,
            &PatchParams::apply(FIELD_MANAGER)
                .force()
                .validation_strict(),
            &Patch::Apply(document),
        )
        .await
        .map_err(|e| failure(&format!("applying Secret {}/{name}", request.namespace), e))?;
        ledger.created(ledger_ref(
            "Secret",
            &request.infra_id,
            Some(&request.namespace),
            name,
        ));
    }
    Ok(names)
}

/// Deletes the four Secrets; those already gone are done.
pub async fn delete_secrets(
    kube: &KubeActivities,
    secrets: &Secrets,
    ledger: &Ledger,
) -> Result<(), ActivityFailure> {
    let api: Api<Secret> = Api::namespaced(kube.client.clone(), &secrets.namespace);
    for name in secrets.names() {
        let what = format!("Secret {}/{name}", secrets.namespace);
        if delete_and_wait(
            &api,
            &what,
            name,
            kube.timing.delete_wait,
            kube.timing.poll_interval,
        )
        .await?
        {
            ledger.deleted(ledger_ref(
                "Secret",
                &secrets.infra_id,
                Some(&secrets.namespace),
                name,
            ));
        }
    }
    Ok(())
}

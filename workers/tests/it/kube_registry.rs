//! The Kubernetes activities as the activity worker runs them: found by type name in
//! the registry, against the dev stack's Kubernetes emulator, noted in the attempt's
//! ledger; the effect checked with a separate kube client.

use std::sync::Arc;

use hcpflow_engine::{Binding, IdempotencyKey, Keyring, Seq, WorkflowId};
use hcpflow_kube::{KubeActivities, KubeSettings};
use hcpflow_workers::catalog::activities::{ActivityInput, Ledger};
use k8s_openapi::api::core::v1::Namespace;
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::support::{say, unique};

#[tokio::test]
async fn kube_activities_run_by_type_name_against_the_emulator() {
    let Ok(url) = std::env::var("HCPFLOW_KUBE_URL") else {
        assert!(
            std::env::var_os("HCPFLOW_REQUIRE_STACK").is_none(),
            "the dev stack's Kubernetes URL must be set under make test"
        );
        say("skipping: needs the dev stack's Kubernetes emulator; run `make test`");
        return;
    };
    hcpflow_workers::runtime::tls::install_crypto_provider();
    let settings = KubeSettings {
        url: Some(url),
        kubeconfig: None,
    };
    let client = settings.connect().await.unwrap();
    let kube = Arc::new(KubeActivities::new(client.clone(), None));
    let (_, registry) = hcpflow_workers::catalog::build(None, Some(kube), true).unwrap();
    let workflow_id = WorkflowId::new(unique("kubereg")).unwrap();
    let attempt = |seq: u64, input: serde_json::Value, ledger: &Ledger| ActivityInput {
        workflow_id: workflow_id.clone(),
        scheduled_seq: Seq::new(seq).unwrap(),
        attempt: 1,
        idempotency_key: IdempotencyKey::for_activity(&workflow_id, Seq::new(seq).unwrap()),
        input,
        ledger: ledger.clone(),
    };
    let infra_id = unique("kreg").to_lowercase();
    let namespace = unique("kreg-ns").to_lowercase();

    let apply = registry
        .get("kube.apply_namespace")
        .expect("kube.apply_namespace is registered");
    let ledger = Ledger::default();
    let request = json!({"infra_id": infra_id, "namespace": namespace});
    let applied = apply(attempt(2, request.clone(), &ledger)).await.unwrap();
    assert_eq!(
        applied,
        apply(attempt(2, request, &Ledger::default()))
            .await
            .unwrap()
    );
    let noted = ledger.take();
    assert_eq!(noted.len(), 1);
    assert_eq!(noted[0].resource().kind, "kube:Namespace");
    assert_eq!(noted[0].resource().provider, "kubernetes");
    assert_eq!(
        noted[0].resource().cluster.as_deref(),
        Some(infra_id.as_str())
    );
    let namespaces: Api<Namespace> = Api::all(client);
    let found = namespaces.get(&namespace).await.unwrap();
    assert_eq!(
        found.labels()["hypershift.openshift.io/auto-created-for-infra"],
        infra_id
    );

    let delete = registry.get("kube.delete_namespace").unwrap();
    delete(attempt(3, applied, &Ledger::default()))
        .await
        .unwrap();
    assert!(namespaces.get_opt(&namespace).await.unwrap().is_none());

    // Without a seal key the Secrets cannot be written, and the failure says why.
    let keyring = Keyring::parse("k1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=").unwrap();
    let owner = WorkflowId::new("kube-registry-test").unwrap();
    let sealed = keyring
        .seal(
            &"secret".to_owned(),
            &Binding::new(&owner, "input/pull_secret"),
        )
        .unwrap();
    let secrets = registry.get("kube.apply_secrets").unwrap();
    let request = json!({"infra_id": infra_id, "cluster": "c", "namespace": namespace,
        "pull_secret": sealed, "ssh_public_key": "", "signing_key": sealed});
    let refused = secrets(attempt(4, request, &Ledger::default()))
        .await
        .unwrap_err();
    assert_eq!(
        (refused.kind.as_str(), refused.retryable),
        ("NoSealKey", false)
    );
}

//! OIDC documents in the bucket, the IAM OIDC provider, the operator roles and the
//! worker profile: made once however often their creates run, correct as read back from
//! moto, and undone whatever is attached.

use base64::Engine;
use hcpflow_aws::iam::oidc_provider::{
    create_oidc_provider, delete_oidc_provider, CreateOidcProvider,
};
use hcpflow_aws::iam::operator_role::{create_operator_role, CreateOperatorRole};
use hcpflow_aws::iam::policy_document;
use hcpflow_aws::iam::role::delete_role;
use hcpflow_aws::iam::worker::{create_worker_profile, delete_worker_profile, CreateWorkerProfile};
use hcpflow_aws::naming::INFRA_ID_TAG;
use hcpflow_aws::oidc::documents::{
    delete_oidc_documents, publish_oidc_documents, PublishOidcDocuments,
};
use hcpflow_aws::oidc::signing_key::generate_signing_key;
use hcpflow_aws::oidc::{discovery_key, jwks_key};
use hcpflow_engine::Keyring;
use hcpflow_engine::Ledger;

use crate::support::{stack, unique, Stack};

pub(crate) fn keyring() -> Keyring {
    Keyring::parse(&format!(
        "test:{}",
        base64::engine::general_purpose::STANDARD.encode([42u8; 32])
    ))
    .unwrap()
}

pub(crate) async fn make_bucket(stack: &Stack) -> String {
    let bucket = unique("oidc-").to_lowercase();
    stack
        .moto
        .s3
        .create_bucket()
        .bucket(&bucket)
        .send()
        .await
        .unwrap();
    bucket
}

async fn object(stack: &Stack, bucket: &str, key: &str) -> Option<serde_json::Value> {
    let got = stack
        .moto
        .s3
        .get_object()
        .bucket(bucket)
        .key(key)
        .send()
        .await
        .ok()?;
    let bytes = got.body.collect().await.unwrap().into_bytes();
    Some(serde_json::from_slice(&bytes).unwrap())
}

#[tokio::test]
async fn oidc_documents_describe_the_recorded_key_and_a_missing_bucket_is_named() {
    let Some(stack) =
        stack("oidc_documents_describe_the_recorded_key_and_a_missing_bucket_is_named").await
    else {
        return;
    };
    let infra_id = unique("oidc-");
    let log = Ledger::default();
    let key = format!("hf-{infra_id}-1");
    let scope = stack.scope(&key, &infra_id, &log);
    let signing = generate_signing_key(&keyring(), &stack.workflow_id).unwrap();

    let missing = publish_oidc_documents(
        &stack.aws,
        &scope,
        &PublishOidcDocuments {
            infra_id: infra_id.clone(),
            bucket: "no-such-bucket-for-hcpflow".into(),
            bucket_region: "us-east-1".into(),
            jwk: signing.jwk.clone(),
        },
    )
    .await
    .unwrap_err();
    assert!(!missing.retryable);
    assert_eq!(missing.kind, "OidcBucketMissing");
    assert!(missing.message.contains("no-such-bucket-for-hcpflow"));

    let bucket = make_bucket(&stack).await;
    let request = PublishOidcDocuments {
        infra_id: infra_id.clone(),
        bucket: bucket.clone(),
        bucket_region: "us-east-1".into(),
        jwk: signing.jwk.clone(),
    };
    let first = publish_oidc_documents(&stack.aws, &scope, &request)
        .await
        .unwrap();
    let again = publish_oidc_documents(&stack.aws, &scope, &request)
        .await
        .unwrap();
    assert_eq!(first, again);
    let issuer = format!("https://{bucket}.s3.us-east-1.amazonaws.com/{infra_id}");
    assert_eq!(first.issuer_url, issuer);

    let discovery = object(&stack, &bucket, &discovery_key(&infra_id))
        .await
        .unwrap();
    assert_eq!(discovery["issuer"], issuer);
    assert_eq!(discovery["jwks_uri"], format!("{issuer}/openid/v1/jwks"));
    let jwks = object(&stack, &bucket, &jwks_key(&infra_id)).await.unwrap();
    let keys = jwks["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0]["kid"], signing.jwk.kid);
    assert_eq!(keys[0]["n"], signing.jwk.n);
    assert_eq!(keys[0]["alg"], "RS256");
    assert_eq!(keys[0]["use"], "sig");
    // No private material in what the world can read.
    let text = jwks.to_string();
    for private_field in ["\"d\"", "\"p\"", "\"q\"", "PRIVATE"] {
        assert!(!text.contains(private_field), "{text}");
    }

    for _ in 0..2 {
        delete_oidc_documents(&stack.aws, &scope, &first)
            .await
            .unwrap();
    }
    assert!(object(&stack, &bucket, &discovery_key(&infra_id))
        .await
        .is_none());
    assert!(object(&stack, &bucket, &jwks_key(&infra_id))
        .await
        .is_none());
    let deletions = log
        .take()
        .into_iter()
        .filter(|noted| matches!(noted, hcpflow_engine::Noted::Deleted(_)))
        .count();
    assert_eq!(deletions, 2, "each document deleted once in the ledger");
}

#[tokio::test]
async fn the_provider_and_roles_are_made_once_trust_is_corrected_and_deletes_clear_attachments() {
    let Some(stack) = stack(
        "the_provider_and_roles_are_made_once_trust_is_corrected_and_deletes_clear_attachments",
    )
    .await
    else {
        return;
    };
    let infra_id = unique("iam-");
    let log = Ledger::default();
    let keys: Vec<String> = (1..=3).map(|n| format!("hf-{infra_id}-{n}")).collect();
    let scope = |n: usize| stack.scope(&keys[n], &infra_id, &log);
    let bucket = "hcpflow-oidc";
    let issuer_url = format!("https://{bucket}.s3.us-east-1.amazonaws.com/{infra_id}");

    // Another cluster's provider whose path only extends ours: never taken for ours.
    let decoy = stack
        .moto
        .iam
        .create_open_id_connect_provider()
        .url(format!("{issuer_url}-2"))
        .client_id_list("openshift")
        .thumbprint_list(hcpflow_aws::iam::oidc_provider::THUMBPRINT)
        .send()
        .await
        .unwrap();
    let decoy_arn = decoy.open_id_connect_provider_arn().unwrap().to_owned();

    let request = CreateOidcProvider {
        infra_id: infra_id.clone(),
        issuer_url: issuer_url.clone(),
        resource_tags: Default::default(),
    };
    let provider = create_oidc_provider(&stack.aws, &scope(0), &request)
        .await
        .unwrap();
    for _ in 0..2 {
        assert_eq!(
            create_oidc_provider(&stack.aws, &scope(0), &request)
                .await
                .unwrap(),
            provider
        );
    }
    assert_ne!(provider.arn, decoy_arn);
    assert!(provider.arn.ends_with(&format!(
        ":oidc-provider/{bucket}.s3.us-east-1.amazonaws.com/{infra_id}"
    )));
    let described = stack
        .moto
        .iam
        .get_open_id_connect_provider()
        .open_id_connect_provider_arn(&provider.arn)
        .send()
        .await
        .unwrap();
    let mut audiences = described.client_id_list().to_vec();
    audiences.sort();
    assert_eq!(audiences, ["openshift", "sts.amazonaws.com"]);

    let role_request = CreateOperatorRole {
        infra_id: infra_id.clone(),
        role: "control-plane-operator".into(),
        provider_arn: provider.arn.clone(),
        issuer: provider.issuer.clone(),
        public_zone_id: "Z0PUBLIC".into(),
        private_zone_id: "Z0PRIVATE".into(),
        local_zone_id: "Z0LOCAL".into(),
        resource_tags: hcpflow_aws::resource_tags::ResourceTags(
            [("cost-center".to_owned(), "42".to_owned())].into(),
        ),
    };
    let role = create_operator_role(&stack.aws, &scope(1), &role_request)
        .await
        .unwrap();
    assert_eq!(role.name, format!("{infra_id}-control-plane-operator"));

    // Someone loosens the trust out of band; the next run puts ours back.
    stack
        .moto
        .iam
        .update_assume_role_policy()
        .role_name(&role.name)
        .policy_document(r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"*"},"Action":"sts:AssumeRole"}]}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(
        create_operator_role(&stack.aws, &scope(1), &role_request)
            .await
            .unwrap(),
        role
    );
    let got = stack
        .moto
        .iam
        .get_role()
        .role_name(&role.name)
        .send()
        .await
        .unwrap();
    let trust = policy_document::decode(got.role().unwrap().assume_role_policy_document().unwrap())
        .unwrap();
    let role_tags: Vec<(&str, &str)> = got
        .role()
        .unwrap()
        .tags()
        .iter()
        .map(|t| (t.key(), t.value()))
        .collect();
    assert!(role_tags.contains(&("cost-center", "42")), "{role_tags:?}");
    assert!(
        role_tags.contains(&(INFRA_ID_TAG, infra_id.as_str())),
        "{role_tags:?}"
    );
    assert_eq!(
        trust["Statement"][0]["Principal"]["Federated"],
        provider.arn
    );
    let policy = stack
        .moto
        .iam
        .get_role_policy()
        .role_name(&role.name)
        .policy_name(&role.name)
        .send()
        .await
        .unwrap();
    let policy = policy_document::decode(policy.policy_document()).unwrap();
    assert!(
        policy.to_string().contains("hostedzone/Z0LOCAL"),
        "{policy}"
    );
    let listed = stack.moto.iam.list_roles().send().await.unwrap();
    assert_eq!(
        listed
            .roles()
            .iter()
            .filter(|r| r.role_name() == role.name)
            .count(),
        1
    );

    // A managed policy attached by someone else does not stop the delete.
    stack
        .moto
        .iam
        .attach_role_policy()
        .role_name(&role.name)
        .policy_arn("arn:aws:iam::aws:policy/ReadOnlyAccess")
        .send()
        .await
        .ok();
    // IAM still seeing an attachment: retried, not failed.
    stack.inject("DeleteRole", "error", 1, Some(("DeleteConflict", 409)));
    let conflict = delete_role(&stack.aws, &scope(1), &role).await.unwrap_err();
    assert!(conflict.retryable, "{conflict:?}");
    assert_eq!(conflict.kind, "DeleteConflict");
    for _ in 0..2 {
        delete_role(&stack.aws, &scope(1), &role).await.unwrap();
    }
    assert!(stack
        .moto
        .iam
        .get_role()
        .role_name(&role.name)
        .send()
        .await
        .is_err());

    let worker = CreateWorkerProfile {
        infra_id: infra_id.clone(),
        resource_tags: Default::default(),
    };
    let profile = create_worker_profile(&stack.aws, &scope(2), &worker)
        .await
        .unwrap();
    assert_eq!(
        create_worker_profile(&stack.aws, &scope(2), &worker)
            .await
            .unwrap(),
        profile
    );
    let got = stack
        .moto
        .iam
        .get_instance_profile()
        .instance_profile_name(format!("{infra_id}-worker"))
        .send()
        .await
        .unwrap();
    let roles: Vec<&str> = got
        .instance_profile()
        .unwrap()
        .roles()
        .iter()
        .map(|r| r.role_name())
        .collect();
    assert_eq!(roles, [format!("{infra_id}-worker-role")]);
    for _ in 0..2 {
        delete_worker_profile(&stack.aws, &scope(2), &profile)
            .await
            .unwrap();
    }
    assert!(stack
        .moto
        .iam
        .get_role()
        .role_name(&profile.role.name)
        .send()
        .await
        .is_err());

    for _ in 0..2 {
        delete_oidc_provider(&stack.aws, &scope(0), &provider)
            .await
            .unwrap();
    }
    let providers = stack
        .moto
        .iam
        .list_open_id_connect_providers()
        .send()
        .await
        .unwrap();
    let arns: Vec<&str> = providers
        .open_id_connect_provider_list()
        .iter()
        .filter_map(|p| p.arn())
        .collect();
    assert!(!arns.contains(&provider.arn.as_str()));
    assert!(
        arns.contains(&decoy_arn.as_str()),
        "another cluster's provider was touched"
    );
    stack
        .moto
        .iam
        .delete_open_id_connect_provider()
        .open_id_connect_provider_arn(&decoy_arn)
        .send()
        .await
        .unwrap();
}

/// RSA key generation is tens to hundreds of milliseconds of CPU. With one async worker
/// thread, a task ticking every millisecond must keep ticking while the activity makes
/// keys: before it generated on a blocking thread, the ticker stood still throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn signing_keys_are_made_off_the_async_workers() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    let Some(stack) = stack("signing_keys_are_made_off_the_async_workers").await else {
        return;
    };
    let activities = hcpflow_aws::AwsActivities::new(
        stack.aws.clone(),
        Some(Arc::new(hcpflow_engine::SealKeys::new(keyring()))),
    );
    let ticks = Arc::new(AtomicU64::new(0));
    let ticker = tokio::spawn({
        let ticks = ticks.clone();
        async move {
            loop {
                ticks.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
        }
    });
    while ticks.load(Ordering::Relaxed) == 0 {
        tokio::task::yield_now().await;
    }
    // Both on the one worker thread, as an activity worker's tasks share its workers.
    let ticked_meanwhile = tokio::spawn({
        let ticks = ticks.clone();
        async move {
            let infra_id = unique("keys-");
            let log = Ledger::default();
            let mut ticked = 0;
            for attempt in 0..5 {
                let key = format!("hf-{infra_id}-{attempt}");
                let scope = stack.scope(&key, &infra_id, &log);
                let before = ticks.load(Ordering::Relaxed);
                let made = activities
                    .run(
                        "aws.generate_signing_key",
                        &scope,
                        serde_json::json!({"infra_id": infra_id}),
                    )
                    .await
                    .unwrap();
                assert!(made["private_key"].is_string(), "{made}");
                ticked += ticks.load(Ordering::Relaxed) - before;
            }
            ticked
        }
    })
    .await
    .unwrap();
    ticker.abort();
    assert!(
        ticked_meanwhile > 0,
        "the other tasks stood still while signing keys were made"
    );
}

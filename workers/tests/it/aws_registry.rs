//! The AWS activities as the activity worker runs them: found by type name in the
//! registry, scoped by the attempt's idempotency key, and noted in the attempt's ledger.

use std::sync::Arc;

use hcpflow_aws::{AwsActivities, AwsClients, AwsSettings};
use hcpflow_engine::{IdempotencyKey, Noted, Seq, WorkflowId};
use hcpflow_workers::catalog::activities::{ActivityInput, Ledger};
use serde_json::json;

use crate::support::{say, unique};

#[tokio::test]
async fn aws_activities_run_by_type_name_with_the_attempts_key_and_ledger() {
    let (Ok(endpoint), Ok(moto)) = (
        std::env::var("HCPFLOW_AWS_ENDPOINT"),
        std::env::var("HCPFLOW_DEV_MOTO_ENDPOINT"),
    ) else {
        assert!(
            std::env::var_os("HCPFLOW_REQUIRE_STACK").is_none(),
            "the dev stack's AWS endpoint must be set under make test"
        );
        say("skipping: needs the dev stack's moto; run `make test`");
        return;
    };
    let settings = |endpoint: String| AwsSettings {
        region: "us-east-1".into(),
        endpoint: Some(endpoint),
        static_credentials: Some(("testing".into(), "testing".into())),
    };
    let aws = Arc::new(AwsActivities::new(
        AwsClients::connect(&settings(endpoint)).await,
        None,
    ));
    let (_, registry) = hcpflow_workers::catalog::build(Some(aws), None, true).unwrap();
    let workflow_id = WorkflowId::new(unique("awsreg")).unwrap();
    let infra_id = unique("reg").to_lowercase();
    let attempt = |seq: u64, activity_input: serde_json::Value, ledger: &Ledger| ActivityInput {
        workflow_id: workflow_id.clone(),
        scheduled_seq: Seq::new(seq).unwrap(),
        attempt: 1,
        idempotency_key: IdempotencyKey::for_activity(&workflow_id, Seq::new(seq).unwrap()),
        input: activity_input,
        ledger: ledger.clone(),
    };

    let create = registry
        .get("aws.create_vpc")
        .expect("aws.create_vpc is registered");
    let ledger = Ledger::default();
    let request = json!({"infra_id": infra_id, "cidr_block": "10.0.0.0/16"});
    let vpc = create(attempt(2, request.clone(), &ledger)).await.unwrap();
    // A second attempt of the same step (same key) finds the first one's VPC.
    let again = create(attempt(2, request, &Ledger::default()))
        .await
        .unwrap();
    assert_eq!(vpc, again);
    let noted = ledger.take();
    assert_eq!(noted.len(), 1);
    assert!(matches!(noted[0], Noted::Created(_)));
    assert_eq!(noted[0].resource().kind, "ec2:vpc");
    assert_eq!(
        noted[0].resource().cluster.as_deref(),
        Some(infra_id.as_str())
    );
    let vpc_id = vpc["vpc_id"].as_str().unwrap().to_owned();
    let direct = AwsClients::connect(&settings(moto)).await;
    let found = direct
        .ec2
        .describe_vpcs()
        .vpc_ids(&vpc_id)
        .send()
        .await
        .unwrap();
    assert_eq!(found.vpcs().len(), 1);

    let delete = registry.get("aws.delete_vpc").unwrap();
    let ledger = Ledger::default();
    assert_eq!(
        delete(attempt(3, vpc.clone(), &ledger)).await.unwrap(),
        json!(null)
    );
    assert!(matches!(ledger.take()[0], Noted::Deleted(_)));
    assert!(direct
        .ec2
        .describe_vpcs()
        .vpc_ids(&vpc_id)
        .send()
        .await
        .is_err());

    // A malformed request is a permanent failure that says which activity.
    let bad = create(attempt(4, json!({"infra_id": 7}), &Ledger::default()))
        .await
        .unwrap_err();
    assert!(!bad.retryable);
    assert!(bad.message.contains("aws.create_vpc"), "{}", bad.message);
    // Without a seal key the signing key cannot be made, and says why.
    let key = registry.get("aws.generate_signing_key").unwrap();
    let refused = key(attempt(
        5,
        json!({"infra_id": infra_id}),
        &Ledger::default(),
    ))
    .await
    .unwrap_err();
    assert_eq!(refused.kind, "NoSealKey");
}

//! Calls in other accounts: a call whose target names an account runs with the
//! credentials of the role configured for it (moto maps assumed-role credentials to the
//! role's account), the management side's calls with the management account's, and an
//! account this worker's configuration lacks is a retryable failure.

use hcpflow_aws::{AwsActivities, AwsClients};
use hcpflow_engine::Ledger;
use hcpflow_hypershift::aws_accounts::AwsAccounts;
use serde_json::{json, Value};

use crate::support::{stack, unique, Stack};

/// The account a test's guest objects go to; nothing else of the stack uses it.
const GUEST_ACCOUNT_ID: &str = "111111111111";

fn accounts() -> AwsAccounts {
    AwsAccounts::new(vec![format!(
        "guest=arn:aws:iam::{GUEST_ACCOUNT_ID}:role/hcpflow-test;tenants=*;external_id=hcpflow-it"
    )
    .parse()
    .unwrap()])
    .unwrap()
}

/// moto's clients in the guest account, for the independent view.
async fn moto_in_guest_account(stack: &Stack) -> AwsClients {
    stack
        .moto
        .assuming(
            &format!("arn:aws:iam::{GUEST_ACCOUNT_ID}:role/checker"),
            None,
            None,
            "checker",
            &stack.moto.region,
        )
        .await
}

async fn vpc_exists(clients: &AwsClients, vpc_id: &str) -> bool {
    clients
        .ec2
        .describe_vpcs()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("vpc-id")
                .values(vpc_id)
                .build(),
        )
        .send()
        .await
        .unwrap()
        .vpcs()
        .iter()
        .any(|vpc| vpc.vpc_id() == Some(vpc_id))
}

#[tokio::test]
async fn a_call_runs_in_the_accounts_its_target_names() {
    let Some(stack) = stack("a_call_runs_in_the_accounts_its_target_names").await else {
        return;
    };
    let activities = AwsActivities::with_accounts(stack.aws.clone(), accounts(), None);
    let infra_id = unique("acct-");
    let log = Ledger::default();
    let key = format!("hf-{infra_id}-1");
    let scope = stack.scope(&key, &infra_id, &log);
    let target = json!({"region": stack.aws.region, "account": "guest"});

    let made = activities
        .run(
            "aws.create_vpc",
            &scope,
            json!({"infra_id": infra_id, "cidr_block": "10.42.0.0/16", "aws_target": target}),
        )
        .await
        .unwrap();
    let vpc_id = made["vpc_id"].as_str().unwrap().to_owned();
    let guest = moto_in_guest_account(&stack).await;
    assert!(
        vpc_exists(&guest, &vpc_id).await,
        "not in the guest account"
    );
    assert!(
        !vpc_exists(&stack.moto, &vpc_id).await,
        "in the server's own account"
    );
    assert!(log.take().iter().any(|noted| noted.resource().id == vpc_id));

    // A zone of the guest against subnets of the management side (here the server's
    // own account): each looked up where it is.
    let management_vpc = stack
        .moto
        .ec2
        .create_vpc()
        .cidr_block("10.202.0.0/16")
        .send()
        .await
        .unwrap();
    let management_vpc_id = management_vpc.vpc().unwrap().vpc_id().unwrap().to_owned();
    let subnet = stack
        .moto
        .ec2
        .create_subnet()
        .vpc_id(&management_vpc_id)
        .availability_zone("us-east-1a")
        .cidr_block("10.202.0.0/24")
        .send()
        .await
        .unwrap();
    let subnet_id = subnet.subnet().unwrap().subnet_id().unwrap().to_owned();
    let coverage = |target: Value| json!({"zone": "us-east-1a", "management_subnet_ids": [subnet_id], "aws_target": target});
    let covered = activities
        .run("aws.check_zone_coverage", &scope, coverage(target.clone()))
        .await
        .unwrap();
    assert_eq!(covered["management_subnet_id"], subnet_id.as_str());
    // The same subnets looked up in the guest account are not there.
    let all_guest =
        json!({"region": stack.aws.region, "account": "guest", "management_account": "guest"});
    let missing = activities
        .run("aws.check_zone_coverage", &scope, coverage(all_guest))
        .await
        .unwrap_err();
    assert!(missing.message.contains(&subnet_id), "{missing:?}");

    // A worker whose configuration lacks the account retries, rather than acting in
    // its own.
    let unconfigured = AwsActivities::new(stack.aws.clone(), None);
    let refused = unconfigured
        .run(
            "aws.create_vpc",
            &scope,
            json!({"infra_id": infra_id, "cidr_block": "10.42.0.0/16", "aws_target": target}),
        )
        .await
        .unwrap_err();
    assert_eq!(refused.kind, "UnknownAwsAccount");
    assert!(refused.retryable);

    activities
        .run(
            "aws.delete_vpc",
            &scope,
            json!({"vpc_id": vpc_id, "aws_target": target}),
        )
        .await
        .unwrap();
    assert!(!vpc_exists(&guest, &vpc_id).await, "the delete missed it");
    stack
        .moto
        .ec2
        .delete_subnet()
        .subnet_id(&subnet_id)
        .send()
        .await
        .unwrap();
    stack
        .moto
        .ec2
        .delete_vpc()
        .vpc_id(&management_vpc_id)
        .send()
        .await
        .unwrap();
}

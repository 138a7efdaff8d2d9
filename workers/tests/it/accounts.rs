//! AWS accounts at intake: a create may name only the accounts the server's
//! configuration lets its tenant use, refused before anything is recorded; a server
//! with a malformed account list does not start.

use serde_json::json;

use crate::cluster_support::{cluster_name, create_input, Prerequisites};
use crate::support::{stack, unique, Server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_may_name_only_the_accounts_its_tenant_may_use() {
    let Some(env) = stack("a_create_may_name_only_the_accounts_its_tenant_may_use") else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("acct");
    let server = Server::start(
        env.clone(),
        &prefix,
        &[
            "--aws-account",
            "guest=arn:aws:iam::111111111111:role/hcpflow;tenants=acme",
        ],
    )
    .await;
    // Refused at intake, so the prerequisites need not exist.
    let pre = Prerequisites {
        bucket: "oidc-never-read".into(),
        base_domain: "example.com".into(),
        management_vpc: "vpc-0never".into(),
        management_subnets: vec!["subnet-0never".into()],
    };
    let mut input = create_input(&cluster_name("acct"), &pre, 1);
    input["namespace"] = "clusters".into();
    let id = format!("{prefix}-create");
    let start = |input: &serde_json::Value| json!({"workflow_type": "create_hosted_cluster", "workflow_id": id, "input": input});

    // The default tenant may use no account but the server's own; nor may acme use
    // one the server does not have.
    for (verb, field, account) in [
        ("start", "aws_account", "guest"),
        ("start", "management_aws_account", "guest"),
        ("acme.start", "aws_account", "nope"),
    ] {
        let mut named = input.clone();
        named[field] = account.into();
        let refused = server.api(verb, start(&named)).await;
        assert_eq!(refused["error"]["code"], "forbidden", "{refused}");
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with(&format!("{field}: tenant")),
            "{message}"
        );
    }
    let mut malformed = input.clone();
    malformed["aws_account"] = "Not An Account".into();
    let refused = server.api("start", start(&malformed)).await;
    assert_eq!(refused["error"]["code"], "invalid_request", "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("aws_account: \"Not An Account\" is not an account name"),
        "{refused}"
    );
    // Nothing was recorded for any of them.
    for verb in ["describe", "acme.describe"] {
        let described = server.api(verb, json!({"workflow_id": id})).await;
        assert_eq!(described["error"]["code"], "not_found", "{described}");
    }

    // A list the server cannot read stops it at start, saying why.
    let output = crate::support::hcpflow(
        &[
            "server",
            "--prefix",
            &prefix,
            "--aws-account",
            "guest=arn:aws:iam::111111111111:role/hcpflow",
        ],
        env.iter().cloned(),
    )
    .output()
    .await
    .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--aws-account") && stderr.contains("say which tenants may use it"),
        "{stderr}"
    );
}

/// An account of its own for one test run: moto keeps each account's objects apart.
fn fresh_account_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("9{:011}", nanos % 100_000_000_000)
}

/// A PublicAndPrivate cluster whose objects are in another account than the management
/// side's, each reached through its role: the network, zones, IAM, the control plane's
/// endpoints and the guest's resources land in the hosted cluster's account, only the
/// OIDC documents and the operators' endpoint services in the management account; the
/// destroy leaves both accounts without anything of the cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_is_made_in_its_own_account_and_destroyed_from_both() {
    use crate::cluster_support::{
        cluster_stack, holdings, prerequisites, wait_for_guest, Holdings,
    };
    use std::time::Duration;

    let Some(stack) =
        cluster_stack("a_cluster_is_made_in_its_own_account_and_destroyed_from_both").await
    else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("accts");
    let account_id = fresh_account_id();
    let role = format!("arn:aws:iam::{account_id}:role/hcpflow-guest");
    let guest = stack
        .moto
        .assuming(&role, None, None, "checker", "us-east-1")
        .await;
    let pre = prerequisites(&stack.moto, &prefix.to_lowercase()).await;
    // The public zone of the base domain is the hosted cluster's account's.
    guest
        .route53
        .create_hosted_zone()
        .name(&pre.base_domain)
        .caller_reference(format!("prereq-{prefix}"))
        .send()
        .await
        .unwrap();
    let mut env = stack.env.clone();
    env.retain(|(k, _)| k != "AWS_ACCESS_KEY_ID");
    env.push(("AWS_ACCESS_KEY_ID".into(), format!("{prefix}-key")));
    // The management side is the emulator's own account (moto's default), reached
    // through a role too: the server's own credentials act in neither account directly.
    let management_role = "arn:aws:iam::123456789012:role/hcpflow-management";
    let accounts = format!(
        "guest={role};tenants=*;external_id=hcpflow-test,management={management_role};tenants=*"
    );
    let server = Server::start(env, &prefix, &["--aws-account", &accounts]).await;

    let name = cluster_name("acct");
    let mut input = create_input(&name, &pre, 1);
    input["aws_account"] = "guest".into();
    input["management_aws_account"] = "management".into();
    let create = format!("{prefix}-create");
    let started = server
        .start_workflow("create_hosted_cluster", &create, input)
        .await;
    assert_eq!(started["ok"], true, "{started}");
    let status = server
        .wait_terminal(&create, Duration::from_secs(400))
        .await;
    let described = server.api("describe", json!({"workflow_id": create})).await;
    assert_eq!(status, "completed", "{described}");
    let infra_id = described["workflow"]["output"]["infra_id"]
        .as_str()
        .unwrap()
        .to_owned();
    wait_for_guest(&guest, &infra_id).await;
    // Every AWS call named both accounts.
    let targets = crate::histories::aws_targets(&server, &create).await;
    assert!(targets.len() > 10, "{targets:?}");
    for target in &targets {
        assert_eq!(
            (
                target["account"].as_str(),
                target["management_account"].as_str()
            ),
            (Some("guest"), Some("management")),
            "{target}"
        );
    }

    let in_guest = holdings(&guest, &stack.kube, &name, &infra_id, &pre).await;
    assert_eq!(
        in_guest,
        Holdings {
            endpoint_services: 0,
            ..Holdings::one_cluster()
        },
        "the hosted cluster's account"
    );
    let in_management = holdings(&stack.moto, &stack.kube, &name, &infra_id, &pre).await;
    assert_eq!(
        (
            in_management.vpcs,
            in_management.roles,
            in_management.oidc_providers,
            in_management.private_zones,
            in_management.guest_load_balancers,
            in_management.endpoint_services,
            in_management.documents,
        ),
        (0, 0, 0, 0, 0, 2, 2),
        "the management account: {in_management:?}"
    );
    // moto finds a bucket from any account, so the documents count the same in both:
    // whose bucket holds them shows in each account's own list.
    let owns = |clients: &hcpflow_aws::AwsClients| {
        let s3 = clients.s3.clone();
        let bucket = pre.bucket.clone();
        async move {
            s3.list_buckets()
                .send()
                .await
                .unwrap()
                .buckets()
                .iter()
                .any(|b| b.name() == Some(bucket.as_str()))
        }
    };
    assert!(
        owns(&stack.moto).await,
        "the OIDC bucket is the management account's"
    );
    assert!(
        !owns(&guest).await,
        "the OIDC bucket is not the hosted cluster's account's"
    );

    let destroy = format!("{prefix}-destroy");
    server
        .start_workflow("destroy_hosted_cluster", &destroy, json!({"cluster": name}))
        .await;
    let status = server
        .wait_terminal(&destroy, Duration::from_secs(400))
        .await;
    let described = server
        .api("describe", json!({"workflow_id": destroy}))
        .await;
    assert_eq!(status, "completed", "{described}");
    for (account, clients) in [("guest", &guest), ("management", &stack.moto)] {
        let left = holdings(clients, &stack.kube, &name, &infra_id, &pre).await;
        assert_eq!(
            left,
            Holdings::default(),
            "{account} account after the destroy"
        );
    }

    // What each credential called is what the shipped policy grants it: the server's
    // own only assumed the roles; the roles called nothing the lifecycle statement
    // does not grant (the fault proxy logs an assumed role's calls under the key that
    // assumed it).
    let calls = crate::cluster_support::logged_calls(&format!("{prefix}-key")).await;
    let actions = |assumed: bool| -> std::collections::BTreeSet<String> {
        calls
            .iter()
            .filter(|(_, _, by_role)| *by_role == assumed)
            .map(|(service, action, _)| crate::iam_policy::iam_action(service, action))
            .collect()
    };
    assert_eq!(
        actions(false),
        crate::iam_policy::statement_actions("AssumeAccountRoles"),
        "the server's own credentials"
    );
    let by_roles = actions(true);
    let lifecycle = crate::iam_policy::statement_actions(crate::iam_policy::LIFECYCLE_SID);
    let beyond: Vec<&String> = by_roles.difference(&lifecycle).collect();
    assert!(by_roles.len() > 20, "{by_roles:?}");
    assert!(
        beyond.is_empty(),
        "the assumed roles called what the lifecycle statement does not grant: {beyond:?}"
    );
}

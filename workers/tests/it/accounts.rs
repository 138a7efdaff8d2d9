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

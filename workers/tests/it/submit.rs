//! Fire-and-forget submission through JetStream, and the dead-letter stream.

use std::time::Duration;

use serde_json::json;

use crate::support::{stack, unique, Server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submissions_start_workflows_and_rejects_are_dead_lettered_redacted() {
    let Some(env) = stack("submissions_start_workflows_and_rejects_are_dead_lettered_redacted")
    else {
        return;
    };
    let _stack = crate::support::shared().await;
    let prefix = unique("submit");
    let server = Server::start(env, &prefix, &[]).await;
    let js = async_nats::jetstream::new(server.client.clone());
    let subject = format!("{prefix}.submit.v1.start");

    let id = format!("{prefix}-ok");
    let body = json!({"workflow_type": "noop_chain", "workflow_id": id, "input": {"steps": 2}});
    js.publish(subject.clone(), serde_json::to_vec(&body).unwrap().into())
        .await
        .unwrap()
        .await
        .unwrap();
    let bad = json!({"workflow_type": "noop_chain", "workflow_id": format!("{prefix}-bad"), "input": {"steps": "secret-canary"}});
    js.publish(subject.clone(), serde_json::to_vec(&bad).unwrap().into())
        .await
        .unwrap()
        .await
        .unwrap();
    js.publish(subject.clone(), "not json at all".into())
        .await
        .unwrap()
        .await
        .unwrap();

    // Wait for the accepted one to exist, then complete.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while server.status(&id).await == "?" {
        assert!(
            std::time::Instant::now() < deadline,
            "the submission was never started"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        server.wait_terminal(&id, Duration::from_secs(30)).await,
        "completed"
    );

    // Two dead-letter records, shaped as DESIGN.md §4 says, contents redacted.
    let records = crate::histories::dead_letters(&server, 2, Duration::from_secs(10)).await;
    assert_eq!(records.len(), 2, "{records:?}");
    let codes: Vec<&str> = records
        .iter()
        .map(|r| r["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, vec!["invalid_request", "invalid_json"]);
    for record in &records {
        for field in ["reason", "code", "subject", "received_at", "body_redacted"] {
            assert!(
                record.get(field).is_some(),
                "dead letter lacks {field}: {record}"
            );
        }
        assert!(
            !record.to_string().contains("secret-canary"),
            "a dead letter leaked its body: {record}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submission_without_an_id_starts_one_workflow_whatever_its_deliveries() {
    let Some(env) = stack("a_submission_without_an_id_starts_one_workflow_whatever_its_deliveries")
    else {
        return;
    };
    let _stack = crate::support::shared().await;
    let prefix = unique("subid");
    let server = Server::start(env, &prefix, &[]).await;
    let js = async_nats::jetstream::new(server.client.clone());
    let subject = format!("{prefix}.submit.v1.start");
    // No workflow_id: the id comes from the message's Nats-Msg-Id, so that every
    // delivery of it (a redelivery after a lost ack) names the same workflow.
    let body = json!({"workflow_type": "noop_chain", "input": {"steps": 1}});
    let mut headers = async_nats::HeaderMap::new();
    let msg_id = format!("order-42-{prefix}");
    headers.insert("Nats-Msg-Id", msg_id.as_str());
    js.publish_with_headers(subject, headers, serde_json::to_vec(&body).unwrap().into())
        .await
        .unwrap()
        .await
        .unwrap();
    let source = format!("msg-id\0{msg_id}");
    let digest = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(source.as_bytes()));
    let id = format!("sub-{}", &digest[..32]);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while server.status(&id).await == "?" {
        assert!(
            std::time::Instant::now() < deadline,
            "no workflow {id}: the submission's id was not derived from its message"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        server.wait_terminal(&id, Duration::from_secs(30)).await,
        "completed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submission_failing_for_a_passing_reason_is_dead_lettered_in_the_end() {
    let Some(env) = stack("a_submission_failing_for_a_passing_reason_is_dead_lettered_in_the_end")
    else {
        return;
    };
    let _stack = crate::support::shared().await;
    let prefix = unique("subretry");
    // No seal key: a start carrying a secret is `unavailable` until one is configured.
    let env: Vec<(String, String)> = env
        .into_iter()
        .filter(|(key, _)| key != "HCPFLOW_SEAL_KEY")
        .collect();
    let server = Server::start(env, &prefix, &["--submit-retry-secs", "3"]).await;
    let js = async_nats::jetstream::new(server.client.clone());
    let name = format!("r{}", &prefix[prefix.len().saturating_sub(8)..]).to_lowercase();
    let body = json!({"workflow_type": "create_hosted_cluster", "workflow_id": format!("{prefix}-c"),
        "input": {"name": name, "region": "us-east-1", "zones": ["us-east-1a"],
            "base_domain": "example.com", "endpoint_access": "Public", "vpc_cidr": "10.0.0.0/16",
            "oidc_bucket": "hcpflow-oidc",
            "release_image": "quay.io/openshift-release-dev/ocp-release:4.17.0-x86_64",
            "pull_secret": "{\"auths\": {\"secret-canary\": {}}}", "ssh_public_key": "ssh-ed25519 AAAA",
            "node_pools": [{"name": format!("{name}-a"), "zone": "us-east-1a", "replicas": 1}]}});
    js.publish(
        format!("{prefix}.submit.v1.start"),
        serde_json::to_vec(&body).unwrap().into(),
    )
    .await
    .unwrap()
    .await
    .unwrap();
    let records = crate::histories::dead_letters(&server, 1, Duration::from_secs(30)).await;
    let record = records
        .first()
        .expect("a dead letter for a submission that cannot be recorded");
    assert_eq!(record["code"], "unavailable", "{record}");
    assert!(!record.to_string().contains("secret-canary"), "{record}");
    assert_eq!(server.status(&format!("{prefix}-c")).await, "?");
}

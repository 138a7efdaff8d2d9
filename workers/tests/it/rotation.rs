//! Seal-key rotation (issue 19): the input digests have a key of their own, so a new
//! active seal key leaves an identical resubmission `already_started`.

use std::time::Duration;

use serde_json::json;

use crate::support::{stack, unique, Server};

fn key(byte: u8) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode([byte; 32])
}

/// The stack's environment with these seal keys and, if any, this digest key.
fn keyed(env: &[(String, String)], seal: &str, digest: Option<&str>) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = env
        .iter()
        .filter(|(k, _)| k != "HCPFLOW_SEAL_KEY" && k != "HCPFLOW_INPUT_DIGEST_KEY")
        .cloned()
        .collect();
    env.push(("HCPFLOW_SEAL_KEY".into(), seal.into()));
    if let Some(digest) = digest {
        env.push(("HCPFLOW_INPUT_DIGEST_KEY".into(), digest.into()));
    }
    env
}

/// Starts `id` on a server with `before`'s keys, then again on one with `after`'s: the
/// second answer's status or error code.
async fn resubmitted(
    prefix: &str,
    id: &str,
    before: Vec<(String, String)>,
    after: Vec<(String, String)>,
) -> String {
    let input = json!({"steps": 1});
    let server = Server::start(before, prefix, &[]).await;
    let first = server.start_workflow("noop_chain", id, input.clone()).await;
    assert_eq!(first["status"], "started", "{first}");
    assert_eq!(
        server.wait_terminal(id, Duration::from_secs(30)).await,
        "completed"
    );
    drop(server);
    let server = Server::start(after, prefix, &[]).await;
    let again = server.start_workflow("noop_chain", id, input).await;
    again["status"]
        .as_str()
        .or(again["error"]["code"].as_str())
        .unwrap_or("?")
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resubmission_stays_idempotent_across_a_seal_key_rotation() {
    let Some(env) = stack("a_resubmission_stays_idempotent_across_a_seal_key_rotation") else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("rotate");
    let (old, new, digest) = (
        format!("k1:{}", key(1)),
        format!("k2:{},k1:{}", key(2), key(1)),
        key(3),
    );
    // The new key seals, the old one still opens; the digest key stays.
    let kept = resubmitted(
        &prefix,
        &format!("{prefix}-kept"),
        keyed(&env, &old, Some(&digest)),
        keyed(&env, &new, Some(&digest)),
    )
    .await;
    assert_eq!(kept, "already_started");
    // Without one, digests follow the active seal key: the same start is a conflict.
    let derived = resubmitted(
        &prefix,
        &format!("{prefix}-derived"),
        keyed(&env, &old, None),
        keyed(&env, &new, None),
    )
    .await;
    assert_eq!(derived, "conflict");
}

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

/// A rotation caught in the middle of a create, across two processes: the API process
/// already seals with the new key, the activity worker has only the old one. The
/// worker's unseal fails as `UnknownSealKey` and is retried, not rolled back; once the
/// worker restarts with both keys, the same create completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_completes_across_a_seal_key_rotation_between_two_processes() {
    use crate::cluster_support::{cluster_name, cluster_stack, create_input, prerequisites};
    use crate::histories::history;

    let Some(stack) = cluster_stack("a_create_completes_across_a_seal_key_rotation").await else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("rotmid");
    let pre = prerequisites(&stack.moto, &prefix.to_lowercase()).await;
    let digest = key(3);
    let (old, both) = (
        format!("k1:{}", key(1)),
        format!("k2:{},k1:{}", key(2), key(1)),
    );
    let api = Server::start_worker(
        keyed(&stack.env, &both, Some(&digest)),
        &prefix,
        "api,workflow,relay,timer",
        &[],
    )
    .await;
    let behind = Server::start_worker(
        keyed(&stack.env, &old, Some(&digest)),
        &prefix,
        "activity",
        &[],
    )
    .await;

    let name = cluster_name("rotmid");
    let create = format!("{prefix}-create");
    let started = api
        .start_workflow(
            "create_hosted_cluster",
            &create,
            create_input(&name, &pre, 1),
        )
        .await;
    assert_eq!(started["ok"], true, "{started}");

    // The worker behind meets the new key and leaves the attempt to a retry.
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    loop {
        let unknown = history(&api, &create).await.into_iter().find(|e| {
            e["type"] == "ActivityFailed" && e["data"]["failure"]["kind"] == "UnknownSealKey"
        });
        if let Some(failed) = unknown {
            assert!(!failed["data"]["retry_at"].is_null(), "{failed}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no UnknownSealKey failure: {:?}",
            history(&api, &create).await
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // `seal status` names the key the live create needs and the old configuration lacks,
    // and passes with both keys.
    let lacking = seal_status(&keyed(&stack.env, &old, Some(&digest))).await;
    let (stdout, stderr) = crate::support::output_text(&lacking);
    assert!(!lacking.status.success(), "{stdout}");
    assert!(stderr.contains("k2"), "{stderr}");
    let keys: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let k2 = keys
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["key_id"] == "k2")
        .unwrap();
    assert_eq!(k2["here"], "missing", "{keys}");
    assert!(k2["live_workflows"].as_i64().unwrap() >= 1, "{keys}");
    // With both keys — and the stack's own, which other tests' live workflows use.
    let stack_key = crate::support::env_value(&stack.env, "HCPFLOW_SEAL_KEY");
    let complete = seal_status(&keyed(
        &stack.env,
        &format!("{both},{stack_key}"),
        Some(&digest),
    ))
    .await;
    let (stdout, stderr) = crate::support::output_text(&complete);
    assert!(complete.status.success(), "{stdout}{stderr}");
    let keys: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    for (id, here) in [("k2", "active"), ("k1", "configured")] {
        let key = keys
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["key_id"] == id)
            .unwrap();
        assert_eq!(
            (key["here"].as_str(), key["check"].as_str()),
            (Some(here), Some("ok")),
            "{keys}"
        );
    }

    drop(behind);
    let _caught_up = Server::start_worker(
        keyed(&stack.env, &both, Some(&digest)),
        &prefix,
        "activity",
        &[],
    )
    .await;
    assert_eq!(
        api.wait_terminal(&create, Duration::from_secs(400)).await,
        "completed",
        "{:?}",
        history(&api, &create).await
    );

    let destroy = format!("{prefix}-destroy");
    api.start_workflow("destroy_hosted_cluster", &destroy, json!({"cluster": name}))
        .await;
    assert_eq!(
        api.wait_terminal(&destroy, Duration::from_secs(300)).await,
        "completed"
    );
}

/// `hcpflow seal status -o json` with this environment's database and keys.
async fn seal_status(env: &[(String, String)]) -> std::process::Output {
    let hcpflow_env = env
        .iter()
        .filter(|(k, _)| k.starts_with("HCPFLOW_"))
        .cloned();
    crate::support::hcpflow(&["seal", "status", "-o", "json"], hcpflow_env)
        .output()
        .await
        .unwrap()
}

/// A key pasted wrong under an id a server already used stops the process at start,
/// naming the id, before it seals or fails to open anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_key_under_a_known_id_stops_the_server_at_start() {
    let Some(env) = stack("a_wrong_key_under_a_known_id_stops_the_server_at_start") else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("wrongkey");
    // A server with the right k1 records (or finds) k1's check value.
    drop(
        Server::start(
            keyed(&env, &format!("k1:{}", key(1)), Some(&key(3))),
            &prefix,
            &[],
        )
        .await,
    );

    let wrong = keyed(&env, &format!("k1:{}", key(9)), Some(&key(3)));
    let started = tokio::time::timeout(
        Duration::from_secs(60),
        crate::support::hcpflow(&["server", "--prefix", &prefix], wrong.iter().cloned())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the server stops at start instead of running")
    .unwrap();
    let stderr = String::from_utf8_lossy(&started.stderr);
    assert!(!started.status.success());
    assert!(
        stderr.contains("seal key \"k1\"") && stderr.contains("not the key"),
        "{stderr}"
    );
    let status = seal_status(&wrong).await;
    assert!(!status.status.success());
    let (stdout, _) = crate::support::output_text(&status);
    assert!(stdout.contains("wrong_key"), "{stdout}");
}

/// Seal keys from a file are reloaded when the file changes, without a restart; a
/// changed file that does not parse, or holds wrong bytes under a known id, is refused
/// and the keys in force stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_seal_key_file_is_put_in_force_without_a_restart() {
    use crate::cluster_support::{cluster_name, create_input, Prerequisites};
    use crate::histories::history;

    let Some(env) = stack("a_changed_seal_key_file_is_put_in_force_without_a_restart") else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("reload");
    let dir = std::env::temp_dir().join(format!("hcpflow-{prefix}"));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("seal-key");
    std::fs::write(&file, format!("k1:{}\n", key(1))).unwrap();
    let mut env: Vec<(String, String)> = env
        .into_iter()
        .filter(|(k, _)| k != "HCPFLOW_SEAL_KEY" && k != "HCPFLOW_INPUT_DIGEST_KEY")
        .collect();
    env.push(("HCPFLOW_SEAL_KEY_FILE".into(), file.display().to_string()));
    env.push(("HCPFLOW_INPUT_DIGEST_KEY".into(), key(3)));
    env.push(("HCPFLOW_KEY_RELOAD_SECS".into(), "1".into()));
    // Only the API: starts are recorded (sealed) and never run.
    let api = Server::start_worker(env.clone(), &prefix, "api", &[]).await;
    let pre = Prerequisites {
        bucket: "oidc-reload".into(),
        base_domain: "reload.example.com".into(),
        management_vpc: "vpc-0reload".into(),
        management_subnets: vec!["subnet-0a".into(), "subnet-0b".into(), "subnet-0c".into()],
    };
    let started = std::sync::Mutex::new(Vec::new());
    let sealed_with = || async {
        let id = format!("{prefix}-{}", unique("start"));
        started.lock().unwrap().push(id.clone());
        let started = api
            .start_workflow(
                "create_hosted_cluster",
                &id,
                create_input(&cluster_name("reload"), &pre, 1),
            )
            .await;
        assert_eq!(started["ok"], true, "{started}");
        let events = history(&api, &id).await;
        let wire = events[0]["data"]["input"]["pull_secret"]
            .as_str()
            .unwrap()
            .to_owned();
        wire.split(':').nth(2).unwrap().to_owned()
    };
    assert_eq!(sealed_with().await, "k1");

    std::fs::write(&file, format!("k2:{},k1:{}\n", key(2), key(1))).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while sealed_with().await != "k2" {
        assert!(
            std::time::Instant::now() < deadline,
            "the new key was never put in force"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    for refused in ["not a key".to_owned(), format!("k1:{}", key(9))] {
        std::fs::write(&file, refused).unwrap();
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(sealed_with().await, "k2", "the keys in force stay");
    }
    // The starts were only recorded: a whole server cancels them, so no live workflow
    // is left holding k1's and k2's values.
    std::fs::write(&file, format!("k2:{},k1:{}\n", key(2), key(1))).unwrap();
    drop(api);
    let server = Server::start(env, &prefix, &[]).await;
    for id in started.into_inner().unwrap() {
        server
            .api("cancel", json!({"workflow_id": id, "reason": "test over"}))
            .await;
        let ended = server.wait_terminal(&id, Duration::from_secs(60)).await;
        assert_ne!(ended, "running", "{id}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

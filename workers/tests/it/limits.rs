//! What a server bounds (issue 18): its metrics connections, the workflow types it runs,
//! its NATS streams, and what a create may ask of the management cluster.

use std::time::Duration;

use hcpflow_protocol::subjects::Subjects;
use serde_json::{json, Value};

use crate::support::{stack, unique, Server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_metrics_connection_is_let_go() {
    use tokio::io::AsyncReadExt;
    let Some(env) = stack("an_idle_metrics_connection_is_let_go") else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("idle");
    let metrics_addr = format!("127.0.0.1:{}", crate::support::free_port());
    let _server = Server::start(env, &prefix, &["--metrics-addr", &metrics_addr]).await;
    // The server answers the API before its metrics listener is bound, maybe.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while tokio::net::TcpStream::connect(&metrics_addr).await.is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "no metrics listener on {metrics_addr}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Connections that never send a request: each would hold a task for ever.
    let mut idle = Vec::new();
    for _ in 0..8 {
        idle.push(tokio::net::TcpStream::connect(&metrics_addr).await.unwrap());
    }
    for mut socket in idle {
        let mut buffer = [0u8; 16];
        let read = tokio::time::timeout(Duration::from_secs(15), socket.read(&mut buffer)).await;
        assert!(
            matches!(read, Ok(Ok(0)) | Ok(Err(_))),
            "an idle connection was kept open: {read:?}"
        );
    }
    let metrics = crate::support::http_get(&metrics_addr, "/metrics").await;
    assert!(metrics.starts_with("HTTP/1.1 200"), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_builtin_workflows_run_only_when_asked_for() {
    let Some(env) = stack("the_builtin_workflows_run_only_when_asked_for") else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("nobuiltin");
    let server = Server::start(env, &prefix, &["--builtin-workflows=false"]).await;
    let refused = server
        .start_workflow("noop_chain", &format!("{prefix}-x"), json!({"steps": 1}))
        .await;
    assert_eq!(
        refused["error"]["code"], "unknown_workflow_type",
        "{refused}"
    );
    let message = refused["error"]["message"].as_str().unwrap_or("");
    assert!(
        message.contains("create_hosted_cluster") && !message.contains("noop_fanout"),
        "{refused}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_bounds_every_stream() {
    let Some(env) = stack("migrate_bounds_every_stream") else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("bounds");
    // The server migrates at start (it has the owner's URL): the streams are made.
    let server = Server::start(env, &prefix, &[]).await;
    let subjects = Subjects::new(&server.prefix).unwrap();
    let js = async_nats::jetstream::new(server.client.clone());
    let limits = |js: async_nats::jetstream::Context, name: String| async move {
        let mut stream = js.get_stream(&name).await.unwrap();
        let config = stream.info().await.unwrap().config.clone();
        (config.max_bytes, config.num_replicas, config.discard)
    };
    use async_nats::jetstream::stream::DiscardPolicy;
    // Bounded by default: 256 MiB each, one copy.
    for role in hcpflow_protocol::StreamRole::ALL {
        let (max_bytes, replicas, _) = limits(js.clone(), subjects.stream(role)).await;
        assert_eq!((max_bytes, replicas), (256 << 20, 1), "{role:?}");
    }
    // Full, the witness refuses new checkpoints rather than drop old ones.
    let (_, _, discard) = limits(
        js.clone(),
        subjects.stream(hcpflow_protocol::StreamRole::Audit),
    )
    .await;
    assert_eq!(discard, DiscardPolicy::New);
    // `migrate` brings the limits to what it is told.
    let mut env: Vec<(String, String)> = server.env.clone();
    env.retain(|(k, _)| k.starts_with("HCPFLOW_"));
    let args = [
        "migrate",
        "--prefix",
        &server.prefix,
        "--stream-max-bytes",
        "10000000",
    ];
    let output = crate::support::hcpflow(&args, env.clone())
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // The work streams' limits, never the witness's: no hcpflow credential may change
    // it, so no one can age its checkpoints out.
    for role in hcpflow_protocol::StreamRole::ALL {
        let (max_bytes, _, _) = limits(js.clone(), subjects.stream(role)).await;
        let expected = if role == hcpflow_protocol::StreamRole::Audit {
            256 << 20
        } else {
            10_000_000
        };
        assert_eq!(max_bytes, expected, "{role:?}");
    }
    // The replica count is asked of NATS as given: the stack's single server cannot
    // keep three copies, and says so, and the streams stay as they were.
    let mut args = args.to_vec();
    args.extend(["--stream-replicas", "3"]);
    let output = crate::support::hcpflow(&args, env.clone())
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("replicas > 1 not supported"), "{stderr}");
    for role in hcpflow_protocol::StreamRole::ALL {
        let (_, replicas, _) = limits(js.clone(), subjects.stream(role)).await;
        assert_eq!(replicas, 1, "{role:?}");
    }
    // NATS reserves a bounded stream's bytes in its store: give them back.
    drop(server);
    for role in hcpflow_protocol::StreamRole::ALL {
        let _ = js.delete_stream(subjects.stream(role)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_beyond_the_servers_policy_is_refused_before_anything_is_recorded() {
    let Some(env) =
        stack("a_create_beyond_the_servers_policy_is_refused_before_anything_is_recorded")
    else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("policy");
    let server = Server::start(env, &prefix, &["--max-node-pools", "1"]).await;
    let name = format!("p{}", &prefix[prefix.len().saturating_sub(8)..]).to_lowercase();
    let input = |extra: Value| {
        let mut input = json!({"name": name, "region": "us-east-1", "zones": ["us-east-1a"],
            "base_domain": "example.com", "endpoint_access": "Public", "vpc_cidr": "10.0.0.0/16",
            "oidc_bucket": "hcpflow-oidc",
            "release_image": "quay.io/openshift-release-dev/ocp-release:4.17.0-x86_64",
            "pull_secret": "{\"auths\": {}}", "ssh_public_key": "ssh-ed25519 AAAA",
            "node_pools": [{"name": format!("{name}-a"), "zone": "us-east-1a", "replicas": 1}]});
        for (key, value) in extra.as_object().unwrap() {
            input[key] = value.clone();
        }
        input
    };
    let cases = [
        (
            json!({"namespace": "kube-system"}),
            "belongs to the management cluster",
        ),
        (
            json!({"namespace": "elsewhere"}),
            "not one this server allows",
        ),
        (
            json!({"annotations": {"hypershift.openshift.io/control-plane-operator-image": "x"}}),
            "not an annotation this server allows",
        ),
        (
            json!({"release_image": "registry.example.com/ocp-release:4.17.0"}),
            "not from a registry this server allows",
        ),
        (
            json!({"node_pools": [
                {"name": format!("{name}-a"), "zone": "us-east-1a", "replicas": 1},
                {"name": format!("{name}-b"), "zone": "us-east-1a", "replicas": 1}]}),
            "at most 1",
        ),
    ];
    for (n, (extra, expected)) in cases.into_iter().enumerate() {
        let id = format!("{prefix}-{n}");
        let reply = server
            .start_workflow("create_hosted_cluster", &id, input(extra))
            .await;
        assert_eq!(reply["error"]["code"], "invalid_request", "{reply}");
        let message = reply["error"]["message"].as_str().unwrap_or("");
        assert!(message.contains(expected), "{expected}: {reply}");
        assert_eq!(server.status(&id).await, "?", "{id} was recorded");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signals_cannot_grow_a_workflows_log_without_bound() {
    let Some(env) = stack("signals_cannot_grow_a_workflows_log_without_bound") else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("siglimit");
    let server = Server::start(env, &prefix, &["--max-signal-bytes", "1250"]).await;
    let id = format!("{prefix}-slow");
    server
        .start_workflow("noop_chain", &id, json!({"steps": 20, "sleep_ms": 200}))
        .await;
    let signal = |n: usize| json!({"workflow_id": id, "signal": "note", "payload": "x".repeat(n)});
    // 256 + 4 + 62 bytes each (an event's overhead, name and JSON payload): three fit in
    // 1250, a fourth does not.
    for _ in 0..3 {
        let accepted = server.api("signal", signal(60)).await;
        assert_eq!(accepted, json!({"ok": true}));
    }
    for _ in 0..2 {
        let refused = server.api("signal", signal(60)).await;
        assert_eq!(refused["error"]["code"], "too_large", "{refused}");
        let message = refused["error"]["message"].as_str().unwrap_or("");
        assert!(message.contains("--max-signal-bytes"), "{refused}");
    }
    // A signal that still fits (256 + 4 + 2 bytes) is taken.
    let small = server.api("signal", signal(0)).await;
    assert_eq!(small, json!({"ok": true}));
    assert_eq!(
        server.wait_terminal(&id, Duration::from_secs(60)).await,
        "completed"
    );
    let history = crate::histories::history(&server, &id).await;
    let signals = history
        .iter()
        .filter(|e| e["type"] == "SignalReceived")
        .count();
    assert_eq!(signals, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_is_recorded_once_however_often_it_is_asked_for() {
    let Some(env) = stack("a_cancel_is_recorded_once_however_often_it_is_asked_for") else {
        return;
    };
    let _shared = crate::support::shared().await;
    let prefix = unique("cancelonce");
    // Only the API runs: nothing acts on the cancel, so the workflow stays live.
    let server = Server::start_worker(env, &prefix, "api", &[]).await;
    let id = format!("{prefix}-x");
    let started = server
        .start_workflow("noop_chain", &id, json!({"steps": 1}))
        .await;
    assert_eq!(started["ok"], true, "{started}");
    for _ in 0..5 {
        let cancelled = server
            .api(
                "cancel",
                json!({"workflow_id": id, "reason": "r".repeat(1000)}),
            )
            .await;
        assert_eq!(cancelled, json!({"ok": true, "status": "cancel_requested"}));
    }
    let history = crate::histories::history(&server, &id).await;
    let cancels = history
        .iter()
        .filter(|e| e["type"] == "CancelRequested")
        .count();
    assert_eq!(cancels, 1, "{history:?}");
}

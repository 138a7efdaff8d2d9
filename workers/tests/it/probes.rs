//! The operators' probes: `/healthz` answers while the process runs; `/readyz` follows
//! what the process needs (Postgres with its schema, NATS) and says which is missing.

use std::time::Duration;

use serde_json::Value;

use crate::auth::PrivateNats;
use crate::support::{free_port, http_get, stack, unique, until_listening, Server};

/// The status code and JSON body of a probe's answer.
async fn probe(addr: &str, path: &str) -> (u16, Value) {
    let answer = http_get(addr, path).await;
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    let body = serde_json::from_str(body).unwrap_or_else(|_| panic!("{path}: {answer}"));
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_follows_nats_and_liveness_does_not() {
    let Some(mut env) = stack("readiness_follows_nats_and_liveness_does_not") else {
        return;
    };
    let _stack = crate::support::shared().await;
    let dir = std::env::temp_dir().join(unique("nats-probes"));
    let nats = PrivateNats::start(&env, dir, "nats", &[], async_nats::ConnectOptions::new).await;
    env.retain(|(key, _)| key != "HCPFLOW_NATS_URL");
    env.push(("HCPFLOW_NATS_URL".into(), nats.url.clone()));
    let client = async_nats::connect(nats.url.as_str()).await.unwrap();
    let addr = format!("127.0.0.1:{}", free_port());
    let prefix = unique("probes");
    let mut server =
        Server::start_with_client(env, &prefix, &["--metrics-addr", &addr], client).await;
    until_listening(&addr).await;

    let (status, health) = probe(&addr, "/healthz").await;
    assert_eq!((status, &health["status"]), (200, &Value::from("ok")));
    let (status, ready) = probe(&addr, "/readyz").await;
    assert_eq!(status, 200, "{ready}");
    let expected = hcpflow_eventstore::migrate::expected_version();
    assert_eq!(ready["status"], "ready");
    assert_eq!(
        ready["checks"]["postgres"]["detail"],
        format!("schema at migration {expected}"),
        "{ready}"
    );
    assert_eq!(ready["checks"]["nats"]["ok"], true, "{ready}");

    // NATS goes away: the process is not ready, and says why; it is still alive.
    drop(nats);
    let mut not_ready = None;
    for _ in 0..50 {
        let (status, body) = probe(&addr, "/readyz").await;
        if status == 503 {
            not_ready = Some(body);
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let not_ready = not_ready.expect("/readyz stayed 200 with NATS gone");
    assert_eq!(not_ready["status"], "not_ready");
    assert_eq!(not_ready["checks"]["nats"]["ok"], false, "{not_ready}");
    assert_eq!(not_ready["checks"]["postgres"]["ok"], true, "{not_ready}");
    let (status, _) = probe(&addr, "/healthz").await;
    assert_eq!(status, 200);
    let unknown = http_get(&addr, "/nothing-here").await;
    assert!(unknown.starts_with("HTTP/1.1 404 "), "{unknown}");
    server.stop().await;
}

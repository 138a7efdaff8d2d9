//! NATS authentication: a server and its clients on a NATS that requires a token.

use std::process::Stdio;
use std::time::Duration;

use serde_json::json;

use crate::support::{env_value, free_port, stack, unique, Server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_protected_nats_works_with_the_token() {
    let Some(mut env) = stack("a_token_protected_nats_works_with_the_token") else {
        return;
    };
    let _stack = crate::support::shared().await;
    let nats_server = env_value(&env, "HCPFLOW_DEV_NATS_SERVER");
    assert!(
        !nats_server.is_empty(),
        "HCPFLOW_DEV_NATS_SERVER missing from .dev/env"
    );
    let port = free_port();
    let store = std::env::temp_dir().join(unique("nats-auth"));
    let token = "s3cret-token";
    let mut nats = tokio::process::Command::new(&nats_server)
        .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
        .arg(&store)
        .args(["--auth", token])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start a private nats-server");
    let url = format!("nats://127.0.0.1:{port}");
    // Wait until it accepts connections (with the token).
    let mut ready = false;
    for _ in 0..100 {
        if async_nats::ConnectOptions::with_token(token.into())
            .connect(url.as_str())
            .await
            .is_ok()
        {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ready, "the private nats-server did not start");
    // Without the token, NATS refuses.
    let anonymous =
        tokio::time::timeout(Duration::from_secs(5), async_nats::connect(url.as_str())).await;
    assert!(
        !matches!(anonymous, Ok(Ok(_))),
        "connected without the token"
    );

    env.retain(|(k, _)| k != "HCPFLOW_NATS_URL");
    env.push(("HCPFLOW_NATS_URL".into(), url.clone()));
    env.push(("HCPFLOW_NATS_TOKEN".into(), token.into()));
    let prefix = unique("auth");
    let client = async_nats::ConnectOptions::with_token(token.into())
        .connect(url.as_str())
        .await
        .unwrap();
    let server = Server::start_with_client(env, &prefix, &[], client).await;
    let id = format!("{prefix}-w");
    assert_eq!(
        server
            .start_workflow("noop_chain", &id, json!({"steps": 2}))
            .await["ok"],
        true
    );
    assert_eq!(
        server.wait_terminal(&id, Duration::from_secs(30)).await,
        "completed"
    );

    drop(server);
    let _ = nats.start_kill();
    let _ = nats.wait().await;
    let _ = std::fs::remove_dir_all(store);
}

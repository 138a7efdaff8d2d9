//! Postgres over TLS (issue 19): with `sslmode=verify-full` and the CA of the stack's
//! Postgres the store connects, encrypted; with another CA it is refused.

use crate::support::{stack, unique_id};
use hcpflow_eventstore::EventStore;

/// A CA that signed nothing the server holds, made with openssl (the stack installs it).
fn another_ca(dir: &std::path::Path) -> std::path::PathBuf {
    let output = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=not the stack's CA",
            "-keyout",
            "key.pem",
            "-out",
            "ca.pem",
        ])
        .current_dir(dir)
        .output()
        .expect("run openssl");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    dir.join("ca.pem")
}

#[tokio::test]
async fn the_store_connects_over_verified_tls_and_refuses_a_server_it_cannot_verify() {
    let Some(stack) =
        stack("the_store_connects_over_verified_tls_and_refuses_a_server_it_cannot_verify")
    else {
        return;
    };
    let ca = std::env::var("HCPFLOW_DEV_PG_CA_FILE")
        .expect("HCPFLOW_DEV_PG_CA_FILE in .dev/env (make dev-up)");
    let tls = |ca: &str| format!("{}?sslmode=verify-full&sslrootcert={ca}", stack.app_url);

    let store = EventStore::connect(&tls(&ca), 1)
        .await
        .expect("connects with the server's CA");
    let encrypted: bool =
        sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert!(encrypted, "the connection is not encrypted");

    let dir = std::env::temp_dir().join(unique_id("pg-ca").as_str());
    std::fs::create_dir_all(&dir).unwrap();
    let wrong = another_ca(&dir);
    let refused = EventStore::connect(&tls(wrong.to_str().unwrap()), 1).await;
    let _ = std::fs::remove_dir_all(&dir);
    let Err(error) = refused else {
        panic!("a server signed by another CA was trusted");
    };
    let said = format!("{error:#}").to_lowercase();
    assert!(
        said.contains("certificate") || said.contains("tls") || said.contains("ssl"),
        "unclear refusal: {said}"
    );
}

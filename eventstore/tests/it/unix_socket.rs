//! Postgres over its Unix socket (a Postgres on the same host): the store, its
//! group-commit writers included, connects with the socket URL `.dev/env` gives, writes
//! and reads a history, and the writers' transport reads as the socket.

use hcpflow_engine::Seq;
use hcpflow_eventstore::{AppendBatch, EventStore};

use crate::support::{event, new_workflow, stack, unique_id};

#[tokio::test]
async fn the_store_writes_and_reads_over_the_unix_socket() {
    let Some(_stack) = stack("the_store_writes_and_reads_over_the_unix_socket") else {
        return;
    };
    let Ok(url) = std::env::var("HCPFLOW_DATABASE_SOCKET_URL") else {
        panic!("HCPFLOW_DATABASE_SOCKET_URL missing from .dev/env: a Postgres started without its socket (restart the stack), or a path too long for one");
    };
    assert_eq!(
        hcpflow_eventstore::migrate::role_of_url(&url).unwrap(),
        "hcpflow_app",
        "the role is read from a socket URL as from any other"
    );
    let store = EventStore::connect_with_group_commit(&url, 3, 1)
        .await
        .expect("connects over the socket");
    let port: i32 =
        sqlx::query_scalar("SELECT client_port FROM pg_stat_activity WHERE pid = pg_backend_pid()")
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert_eq!(port, -1, "the connection is not over the Unix socket");

    let id = unique_id("socket");
    let created = store
        .create_workflow(
            &new_workflow("test"),
            AppendBatch::new(id.clone(), Seq::FIRST, vec![event(1)]),
        )
        .await
        .unwrap();
    store
        .append(AppendBatch::new(
            id.clone(),
            created.next_seq,
            vec![event(2)],
        ))
        .await
        .unwrap();
    let verified = store.verify_history(&id).await.unwrap();
    assert_eq!(verified.events, 2);

    let transports = store.writer_transports().await.unwrap();
    assert!(
        transports.unix_socket >= 1,
        "the writers' connections are not over the socket: {transports}"
    );
}

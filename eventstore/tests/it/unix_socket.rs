//! Postgres over its Unix socket (a Postgres on the same host): the store, its
//! group-commit writers included, connects with the socket URL `.dev/env` gives, writes
//! and reads a history, and its writers' connections are on the socket.

use hcpflow_engine::Seq;
use hcpflow_eventstore::{AppendBatch, EventStore};

use crate::support::{event, new_workflow, pool, store, unique_id};

#[tokio::test]
async fn the_store_writes_and_reads_over_the_unix_socket() {
    // Migrated (and the stack found) as every other test's store is.
    let Some((stack, _)) = store("the_store_writes_and_reads_over_the_unix_socket").await else {
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
    // A name of its own, so that its writers are told from other tests' (`<name>-writer`).
    let name = unique_id("socket");
    let store =
        EventStore::connect_with_group_commit(&format!("{url}&application_name={name}"), 3, 1)
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

    let ports: Vec<Option<i32>> =
        sqlx::query_scalar("SELECT client_port FROM pg_stat_activity WHERE application_name = $1")
            .bind(format!("{name}-writer"))
            .fetch_all(&pool(&stack.superuser_url).await)
            .await
            .unwrap();
    assert!(
        !ports.is_empty() && ports.iter().all(|port| *port == Some(-1)),
        "the writers' connections are not all on the socket: {ports:?}"
    );
    assert!(
        store.writer_transports().await.unwrap().unix_socket >= 1,
        "the bench's report would not see them"
    );
}

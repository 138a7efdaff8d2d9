//! The database itself keeps the event log append-only.

use sqlx::PgPool;

use crate::support::{pool, store, workflow_with_events};

/// Runs `sql` (with `$1` bound to `id` when it has one) and returns the refusal's
/// message; fails the test if the statement is allowed or fails another way.
async fn refusal(pool: &PgPool, sql: &str, id: &str) -> String {
    let query = sqlx::query(sql);
    let query = if sql.contains("$1") {
        query.bind(id)
    } else {
        query
    };
    match query.execute(pool).await {
        Ok(done) => panic!("{sql} was allowed ({} rows)", done.rows_affected()),
        Err(error) => {
            let db = error.as_database_error().expect("a database error");
            assert_eq!(db.code().as_deref(), Some("42501"), "{sql}: {db}");
            db.message().to_owned()
        }
    }
}

const CHANGES: [&str; 3] = [
    "UPDATE events SET event_type = 'x' WHERE workflow_id = $1",
    "DELETE FROM events WHERE workflow_id = $1",
    "TRUNCATE events",
];

#[tokio::test]
async fn update_delete_truncate_are_refused() {
    let Some((stack, store)) = store("update_delete_truncate_are_refused").await else {
        return;
    };
    let id = workflow_with_events(&store, "append-only", 3).await;

    // The application role lacks the grants.
    for sql in CHANGES {
        let message = refusal(store.pool(), sql, id.as_str()).await;
        assert!(message.contains("permission denied"), "{sql}: {message}");
    }
    // The tables' owner holds every grant, and the triggers still stop it.
    let owner = pool(&stack.admin_url).await;
    for sql in CHANGES {
        let message = refusal(&owner, sql, id.as_str()).await;
        assert!(message.contains("append-only"), "{sql}: {message}");
    }
    store.verify_history(&id).await.unwrap();
}

/// The application role reads which migration the schema is at (readiness needs it),
/// and may not change that record.
#[tokio::test]
async fn the_application_role_sees_the_schema_version_and_cannot_change_it() {
    let Some((_stack, store)) =
        store("the_application_role_sees_the_schema_version_and_cannot_change_it").await
    else {
        return;
    };
    let applied = hcpflow_eventstore::migrate::applied_version(store.pool())
        .await
        .unwrap();
    assert_eq!(
        applied,
        Some(hcpflow_eventstore::migrate::expected_version())
    );
    refusal(store.pool(), "DELETE FROM _sqlx_migrations", "").await;
}

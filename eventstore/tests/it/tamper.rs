//! Changes made behind the store's back — by the database superuser, with the
//! append-only triggers switched off — are found by verify at the right seq.

use hcpflow_engine::WorkflowId;
use hcpflow_eventstore::{Error, EventStore};
use sqlx::PgPool;

use crate::support::{pool, store, workflow_with_events};

/// Runs `sql` as the superuser with triggers bypassed; `$1` is the workflow id.
async fn tamper(superuser: &PgPool, id: &WorkflowId, sql: &str) {
    let mut tx = superuser.begin().await.unwrap();
    sqlx::query("SET LOCAL session_replication_role = replica")
        .execute(&mut *tx)
        .await
        .unwrap();
    let changed = sqlx::query(sql)
        .bind(id.as_str())
        .execute(&mut *tx)
        .await
        .unwrap();
    assert!(
        changed.rows_affected() >= 1,
        "tampering changed nothing: {sql}"
    );
    tx.commit().await.unwrap();
}

async fn corrupt_seq(store: &EventStore, id: &WorkflowId) -> (u64, String) {
    match store.verify_history(id).await {
        Err(Error::Corrupt { seq, reason, .. }) => (seq, reason),
        other => panic!("expected a corrupt history, got {other:?}"),
    }
}

#[tokio::test]
async fn changed_bytes_are_caught_at_their_seq() {
    let Some((stack, store)) = store("changed_bytes_are_caught_at_their_seq").await else {
        return;
    };
    let superuser = pool(&stack.superuser_url).await;
    let id = workflow_with_events(&store, "tamper-bytes", 20).await;
    store.verify_history(&id).await.unwrap();
    tamper(
        &superuser,
        &id,
        r#"UPDATE events SET body = convert_to(replace(convert_from(body, 'UTF8'), '"n":7', '"n":8'), 'UTF8')
            WHERE workflow_id = $1 AND seq = 7"#,
    )
    .await;
    let (seq, reason) = corrupt_seq(&store, &id).await;
    assert_eq!(seq, 7, "{reason}");
    assert!(reason.contains("do not hash"), "{reason}");
}

#[tokio::test]
async fn a_rehashed_event_breaks_the_next_link() {
    let Some((stack, store)) = store("a_rehashed_event_breaks_the_next_link").await else {
        return;
    };
    let superuser = pool(&stack.superuser_url).await;
    let id = workflow_with_events(&store, "tamper-rehash", 20).await;
    // Change seq 7 and give it a hash that matches its new bytes.
    tamper(
        &superuser,
        &id,
        r#"UPDATE events SET
                body = convert_to(replace(convert_from(body, 'UTF8'), '"n":7', '"n":8'), 'UTF8'),
                hash = sha256(prev_hash || convert_to(replace(convert_from(body, 'UTF8'), '"n":7', '"n":8'), 'UTF8'))
            WHERE workflow_id = $1 AND seq = 7"#,
    )
    .await;
    let (seq, reason) = corrupt_seq(&store, &id).await;
    assert_eq!(seq, 8, "{reason}");
    assert!(reason.contains("prev_hash"), "{reason}");
}

#[tokio::test]
async fn a_column_that_disagrees_with_the_hashed_bytes_is_caught() {
    let Some((stack, store)) =
        store("a_column_that_disagrees_with_the_hashed_bytes_is_caught").await
    else {
        return;
    };
    let superuser = pool(&stack.superuser_url).await;
    let id = workflow_with_events(&store, "tamper-column", 10).await;
    tamper(
        &superuser,
        &id,
        "UPDATE events SET event_type = 'Forged' WHERE workflow_id = $1 AND seq = 4",
    )
    .await;
    let (seq, reason) = corrupt_seq(&store, &id).await;
    assert_eq!(seq, 4, "{reason}");
    assert!(reason.contains("column type"), "{reason}");
}

#[tokio::test]
async fn a_removed_event_is_caught() {
    let Some((stack, store)) = store("a_removed_event_is_caught").await else {
        return;
    };
    let superuser = pool(&stack.superuser_url).await;
    let id = workflow_with_events(&store, "tamper-gap", 10).await;
    tamper(
        &superuser,
        &id,
        "DELETE FROM events WHERE workflow_id = $1 AND seq = 5",
    )
    .await;
    let (seq, reason) = corrupt_seq(&store, &id).await;
    assert_eq!(seq, 5, "{reason}");
    assert!(reason.contains("missing"), "{reason}");
}

#[tokio::test]
async fn a_truncated_tail_disagrees_with_the_index() {
    let Some((stack, store)) = store("a_truncated_tail_disagrees_with_the_index").await else {
        return;
    };
    let superuser = pool(&stack.superuser_url).await;
    let id = workflow_with_events(&store, "tamper-tail", 10).await;
    tamper(
        &superuser,
        &id,
        "DELETE FROM events WHERE workflow_id = $1 AND seq >= 9",
    )
    .await;
    let (seq, reason) = corrupt_seq(&store, &id).await;
    assert_eq!(seq, 9, "{reason}");
    assert!(reason.contains("index"), "{reason}");
}

//! What ANALYZE computes (migrations 0017 and 0018): no planner statistics for the
//! payload no query filters, joins or orders on — the event log's bodies and hashes,
//! the index rows' head, digest, result, error and blocked reason — and a small sample
//! of the event log, which is read only by its key. The columns scans and lists filter
//! on keep the server's default.

use crate::support::store;

/// Each column's `attstattarget`: -1 (NULL from Postgres 17 on) the server's default,
/// 0 none.
async fn targets(pool: &sqlx::PgPool, table: &str) -> Vec<(String, i32)> {
    sqlx::query_as(
        "SELECT attname::text, COALESCE(attstattarget, -1)::int FROM pg_attribute
          WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped
          ORDER BY attnum",
    )
    .bind(table)
    .fetch_all(pool)
    .await
    .unwrap()
}

fn expected(columns: &[(&str, i32)]) -> Vec<(String, i32)> {
    columns
        .iter()
        .map(|&(column, target)| (column.to_owned(), target))
        .collect()
}

#[tokio::test]
async fn only_the_columns_plans_depend_on_are_analyzed() {
    let Some((_stack, store)) = store("only_the_columns_plans_depend_on_are_analyzed").await else {
        return;
    };
    assert_eq!(
        targets(store.pool(), "events").await,
        expected(&[
            ("workflow_id", 10),
            ("seq", 10),
            ("event_type", 10),
            ("recorded_at", 10),
            ("body", 0),
            ("prev_hash", 0),
            ("hash", 0),
        ])
    );
    let skipped = [
        "head_hash",
        "input_digest",
        "output",
        "error",
        "blocked_reason",
    ];
    let workflows = targets(store.pool(), "workflows").await;
    for (column, target) in &workflows {
        let wanted = if skipped.contains(&column.as_str()) {
            0
        } else {
            -1
        };
        assert_eq!(*target, wanted, "workflows.{column}");
    }
    for column in skipped {
        assert!(
            workflows.iter().any(|(name, _)| name == column),
            "workflows.{column} is gone: update this test"
        );
    }
}

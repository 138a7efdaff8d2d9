//! The event log's payload carries no planner statistics (migration 0017): no query
//! filters, joins or orders on it, and ANALYZE would spend most of its pass on it. The
//! columns the log is read by keep theirs.

use crate::support::store;

#[tokio::test]
async fn only_the_columns_the_log_is_read_by_are_analyzed() {
    let Some((_stack, store)) = store("only_the_columns_the_log_is_read_by_are_analyzed").await
    else {
        return;
    };
    // `attstattarget`: -1 (NULL from Postgres 17 on) the server's default, 0 none.
    let targets: Vec<(String, i32)> = sqlx::query_as(
        "SELECT attname::text, COALESCE(attstattarget, -1)::int FROM pg_attribute
          WHERE attrelid = 'events'::regclass AND attnum > 0 AND NOT attisdropped
          ORDER BY attnum",
    )
    .fetch_all(store.pool())
    .await
    .unwrap();
    let expected = [
        ("workflow_id", -1),
        ("seq", -1),
        ("event_type", -1),
        ("recorded_at", -1),
        ("body", 0),
        ("prev_hash", 0),
        ("hash", 0),
    ]
    .map(|(column, target)| (column.to_owned(), target));
    assert_eq!(targets, expected);
}

//! The rows a step writes are held to their conditions by one CHECK constraint a table
//! (migration 0016): each condition of the constraints it replaced still refuses a row
//! that breaks it, whoever writes it.

use sqlx::PgPool;

use crate::support::{store, workflow_with_events};

/// Runs `sql` with `$1` bound to `id` and returns the name of the constraint that
/// refused it; fails the test if the statement is allowed or fails another way.
async fn broken_check(pool: &PgPool, sql: &str, id: &str) -> String {
    match sqlx::query(sql).bind(id).execute(pool).await {
        Ok(done) => panic!("{sql} was allowed ({} rows)", done.rows_affected()),
        Err(error) => {
            let db = error.as_database_error().expect("a database error");
            assert_eq!(db.code().as_deref(), Some("23514"), "{sql}: {db}");
            db.constraint().expect("the constraint's name").to_owned()
        }
    }
}

#[tokio::test]
async fn each_condition_still_refuses_the_row_that_breaks_it() {
    let Some((_stack, store)) = store("each_condition_still_refuses_the_row_that_breaks_it").await
    else {
        return;
    };
    let id = workflow_with_events(&store, "row-checks", 2).await;
    let thirty_one = "decode(repeat('00', 31), 'hex')";
    let thirty_two = "decode(repeat('00', 32), 'hex')";
    let refused: Vec<(String, &str)> = vec![
        (
            "UPDATE workflows SET status = 'done' WHERE workflow_id = $1".into(),
            "workflows_row_check",
        ),
        (
            "UPDATE workflows SET next_seq = 0 WHERE workflow_id = $1".into(),
            "workflows_row_check",
        ),
        (
            format!("UPDATE workflows SET head_hash = {thirty_one} WHERE workflow_id = $1"),
            "workflows_row_check",
        ),
        (
            format!(
                "INSERT INTO workflows (workflow_id, workflow_type, status, next_seq, head_hash, tenant)
                 VALUES ($1 || '-t', 'test', 'running', 1, {thirty_two}, 'Not_A_Tenant')"
            ),
            "workflows_row_check",
        ),
        (
            format!(
                "INSERT INTO events (workflow_id, seq, event_type, recorded_at, body, prev_hash, hash)
                 VALUES ($1, 0, 'X', now(), '\\x7b7d', {thirty_two}, {thirty_two})"
            ),
            "events_row_check",
        ),
        (
            format!(
                "INSERT INTO events (workflow_id, seq, event_type, recorded_at, body, prev_hash, hash)
                 VALUES ($1, 3, 'X', now(), '\\x7b7d', {thirty_one}, {thirty_two})"
            ),
            "events_row_check",
        ),
        (
            format!(
                "INSERT INTO events (workflow_id, seq, event_type, recorded_at, body, prev_hash, hash)
                 VALUES ($1, 3, 'X', now(), '\\x7b7d', {thirty_two}, {thirty_one})"
            ),
            "events_row_check",
        ),
        (
            "INSERT INTO attempt_claims (workflow_id, scheduled_seq, attempt, runner, lease_until)
             VALUES ($1, 0, 1, 'test', now())"
                .into(),
            "attempt_claims_row_check",
        ),
        (
            "INSERT INTO attempt_claims (workflow_id, scheduled_seq, attempt, runner, lease_until)
             VALUES ($1, 2, 0, 'test', now())"
                .into(),
            "attempt_claims_row_check",
        ),
    ];
    for (sql, constraint) in &refused {
        assert_eq!(
            broken_check(store.pool(), sql, id.as_str()).await,
            *constraint,
            "{sql}"
        );
    }
    // One CHECK constraint a table, no other: one left over would be evaluated too.
    let checks: Vec<(String, String)> = sqlx::query_as(
        "SELECT conrelid::regclass::text, conname::text FROM pg_constraint
          WHERE contype = 'c' AND conrelid IN ('workflows'::regclass, 'events'::regclass,
                                               'attempt_claims'::regclass)
          ORDER BY 1",
    )
    .fetch_all(store.pool())
    .await
    .unwrap();
    assert_eq!(
        checks,
        [
            ("attempt_claims", "attempt_claims_row_check"),
            ("events", "events_row_check"),
            ("workflows", "workflows_row_check"),
        ]
        .map(|(table, name)| (table.to_owned(), name.to_owned()))
    );
    // Nothing of them was written: the history is whole, and the new id was not taken.
    store.verify_history(&id).await.unwrap();
    let taken: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM workflows WHERE workflow_id = $1)")
            .bind(format!("{id}-t"))
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert!(!taken);
}

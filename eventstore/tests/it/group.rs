//! Group commit: appends of different workflows sent together are written as one
//! statement, yet each succeeds or fails on its own check — a stale batch conflicts and
//! a batch whose runner lost its claim is refused, without failing their neighbours.

use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::future::join_all;
use hcpflow_engine::{Seq, WorkflowId};
use hcpflow_eventstore::{
    AppendBatch, AttemptClaim, ClaimedAttempts, Error, EventStore, NewWorkflow, OutboxMessage,
    WorkflowSummary,
};

use crate::support::{event, store, workflow_with_events, Stack};

async fn grouped(test: &str) -> Option<EventStore> {
    let (_, store) = store(test).await?;
    Some(store.with_group_commit(1).await.unwrap())
}

/// Runs `appends` while the store's one writer is busy with another append (held up by
/// a lock on its workflow's index row, released 300 ms later), so that they all queue
/// and form one group. Returns their results; the other append took one statement.
async fn while_the_writer_is_busy<T>(
    store: &EventStore,
    appends: impl std::future::Future<Output = T>,
) -> T {
    let busy = workflow_with_events(store, "group-busy", 1).await;
    let summary = store.get_workflow(&busy).await.unwrap();
    let locker = lock_index_row(store.pool(), &busy).await;
    let held = tokio::spawn({
        let store = store.clone();
        async move {
            let batch = batch_on(&summary, 0);
            store.append_known(&summary, &batch).await
        }
    });
    // It takes the writer, then waits for the row lock.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let release = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        locker.commit().await.unwrap();
    };
    let (results, ()) = tokio::join!(appends, release);
    held.await.unwrap().unwrap();
    results
}

/// Locks `id`'s index row in a transaction of `pool`'s, until the transaction ends.
async fn lock_index_row(
    pool: &sqlx::PgPool,
    id: &WorkflowId,
) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let mut locker = pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM workflows WHERE workflow_id = $1 FOR UPDATE")
        .bind(id.as_str())
        .execute(&mut *locker)
        .await
        .unwrap();
    locker
}

fn message(id: &WorkflowId, n: u64) -> OutboxMessage {
    OutboxMessage {
        subject: format!("hcpflow.test.group.{id}"),
        msg_id: format!("group-{id}-{n}"),
        payload: format!("{{\"n\": {n}}}").into_bytes(),
    }
}

/// A batch of two events and `messages` outbox rows, decided on `summary`.
fn batch_on(summary: &WorkflowSummary, messages: u64) -> AppendBatch {
    let id = &summary.workflow_id;
    let next = summary.next_seq.get();
    AppendBatch::new(
        id.clone(),
        summary.next_seq,
        vec![event(next), event(next + 1)],
    )
    .with_outbox((0..messages).map(|n| message(id, n)).collect())
}

#[tokio::test]
async fn appends_sent_together_share_one_statement_and_each_gets_its_own_answer() {
    let Some(store) =
        grouped("appends_sent_together_share_one_statement_and_each_gets_its_own_answer").await
    else {
        return;
    };
    let mut summaries = Vec::new();
    for _ in 0..6 {
        let id = workflow_with_events(&store, "group", 1).await;
        summaries.push(store.get_workflow(&id).await.unwrap());
    }
    // Member k writes k outbox rows, so that a mix-up of the returned ids shows.
    let batches: Vec<AppendBatch> = summaries
        .iter()
        .enumerate()
        .map(|(k, summary)| batch_on(summary, k as u64))
        .collect();
    let stats = store.group_stats().unwrap();
    let before = (
        stats.groups.load(Ordering::Relaxed),
        stats.appends.load(Ordering::Relaxed),
    );
    let fallbacks = stats.fallbacks.load(Ordering::Relaxed);
    let appends = join_all(
        summaries
            .iter()
            .zip(&batches)
            .map(|(summary, batch)| store.append_known(summary, batch)),
    );
    let results = while_the_writer_is_busy(&store, appends).await;
    assert_eq!(
        (
            stats.groups.load(Ordering::Relaxed) - before.0,
            stats.appends.load(Ordering::Relaxed) - before.1
        ),
        (3, 8),
        "the start of the workflow that held the writer (a group of its own), its append, then one statement of the six"
    );
    assert_eq!(
        stats.fallbacks.load(Ordering::Relaxed),
        fallbacks,
        "the group statement wrote them, not the one-by-one fallback"
    );
    for ((summary, batch), result) in summaries.iter().zip(&batches).zip(results) {
        let appended = result.unwrap();
        assert_eq!(appended.next_seq, Seq::new(4).unwrap());
        assert_eq!(appended.events.len(), 2);
        let id = &summary.workflow_id;
        // Each answer carries its own rows' ids, in the order written.
        let stored: Vec<(i64, String)> =
            sqlx::query_as("SELECT id, msg_id FROM outbox WHERE workflow_id = $1 ORDER BY id")
                .bind(id.as_str())
                .fetch_all(store.pool())
                .await
                .unwrap();
        let answered: Vec<(i64, String)> = appended
            .outbox
            .iter()
            .map(|row| (row.id, row.message.msg_id.clone()))
            .collect();
        assert_eq!(answered, stored);
        assert_eq!(answered.len(), batch.outbox.len());
        let index = store.get_workflow(id).await.unwrap();
        assert_eq!(index.next_seq, appended.next_seq);
        assert_eq!(index.head_hash, appended.head_hash);
        store.verify_history(id).await.unwrap();
    }
}

#[tokio::test]
async fn a_lost_claim_fails_its_group_whose_batches_are_then_written_alone() {
    let Some(store) =
        grouped("a_lost_claim_fails_its_group_whose_batches_are_then_written_alone").await
    else {
        return;
    };
    let fine = workflow_with_events(&store, "group-fine", 1).await;
    let stale = workflow_with_events(&store, "group-stale", 1).await;
    let unclaimed = workflow_with_events(&store, "group-claim", 1).await;
    let fine_summary = store.get_workflow(&fine).await.unwrap();
    let stale_summary = store.get_workflow(&stale).await.unwrap();
    let unclaimed_summary = store.get_workflow(&unclaimed).await.unwrap();
    // Another appender moves `stale` on after its summary was read.
    store
        .append_known(&stale_summary, &batch_on(&stale_summary, 0))
        .await
        .unwrap();
    // `unclaimed` records an outcome for a claim nobody holds.
    let mut lost = batch_on(&unclaimed_summary, 1);
    lost.attempt_claim = Some(AttemptClaim {
        workflow_id: unclaimed.clone(),
        scheduled_seq: Seq::FIRST,
        attempt: 1,
        runner: "nobody".into(),
    });
    // `fine` claims the attempt it schedules, to run it itself.
    let mut claimed = batch_on(&fine_summary, 1);
    claimed.claimed_attempts = Some(ClaimedAttempts {
        runner: "group-test".into(),
        lease: std::time::Duration::from_secs(60),
        attempts: vec![(Seq::new(2).unwrap(), 1)],
    });
    let again = batch_on(&stale_summary, 1);
    let stats = store.group_stats().unwrap();
    let groups = stats.groups.load(Ordering::Relaxed);
    let fallbacks = stats.fallbacks.load(Ordering::Relaxed);
    let appends = async {
        tokio::join!(
            store.append_known(&fine_summary, &claimed),
            store.append_known(&stale_summary, &again),
            store.append_known(&unclaimed_summary, &lost),
        )
    };
    let (fine_result, stale_result, lost_result) = while_the_writer_is_busy(&store, appends).await;
    assert_eq!(
        stats.groups.load(Ordering::Relaxed) - groups,
        3,
        "the start of the workflow that held the writer (a group of its own), its append, then one group of the three"
    );
    assert_eq!(
        stats.fallbacks.load(Ordering::Relaxed) - fallbacks,
        1,
        "the lost claim failed the group statement; its batches were written one by one"
    );
    let written = fine_result.unwrap();
    assert!(
        matches!(stale_result, Err(Error::Conflict { .. })),
        "{stale_result:?}"
    );
    assert!(
        matches!(lost_result, Err(Error::ClaimLost { .. })),
        "{lost_result:?}"
    );

    // What the refused batches would have written is not there.
    assert_eq!(store.read_full_history(&stale).await.unwrap().len(), 3);
    assert_eq!(store.read_full_history(&unclaimed).await.unwrap().len(), 1);
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM outbox WHERE workflow_id = ANY($1)")
        .bind(vec![stale.to_string(), unclaimed.to_string()])
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(rows, 0);
    // The written one has its row and its attempt's claim.
    assert_eq!(written.outbox.len(), 1);
    let runners: Vec<String> =
        sqlx::query_scalar("SELECT runner FROM attempt_claims WHERE workflow_id = $1")
            .bind(fine.as_str())
            .fetch_all(store.pool())
            .await
            .unwrap();
    assert_eq!(runners, vec!["group-test".to_owned()]);
    for id in [&fine, &stale, &unclaimed] {
        store.verify_history(id).await.unwrap();
    }
}

#[tokio::test]
async fn a_stale_batch_conflicts_alone_in_a_group_that_is_written() {
    let Some(store) = grouped("a_stale_batch_conflicts_alone_in_a_group_that_is_written").await
    else {
        return;
    };
    let fine = workflow_with_events(&store, "group-ok", 1).await;
    let stale = workflow_with_events(&store, "group-old", 1).await;
    let fine_summary = store.get_workflow(&fine).await.unwrap();
    let stale_summary = store.get_workflow(&stale).await.unwrap();
    store
        .append_known(&stale_summary, &batch_on(&stale_summary, 0))
        .await
        .unwrap();
    let mut claimed = batch_on(&fine_summary, 2);
    claimed.claimed_attempts = Some(ClaimedAttempts {
        runner: "group-ok-test".into(),
        lease: Duration::from_secs(60),
        attempts: vec![(Seq::new(3).unwrap(), 1)],
    });
    let again = batch_on(&stale_summary, 1);
    let stats = store.group_stats().unwrap();
    let fallbacks = stats.fallbacks.load(Ordering::Relaxed);
    let appends = async {
        tokio::join!(
            store.append_known(&fine_summary, &claimed),
            store.append_known(&stale_summary, &again),
        )
    };
    let (fine_result, stale_result) = while_the_writer_is_busy(&store, appends).await;
    assert_eq!(
        stats.fallbacks.load(Ordering::Relaxed),
        fallbacks,
        "the group statement answered both"
    );
    assert!(
        matches!(stale_result, Err(Error::Conflict { .. })),
        "{stale_result:?}"
    );
    let written = fine_result.unwrap();
    assert_eq!(store.read_full_history(&stale).await.unwrap().len(), 3);
    assert_eq!(store.read_full_history(&fine).await.unwrap().len(), 3);
    // Both rows are written, and the attempt is claimed.
    let rows: Vec<i64> =
        sqlx::query_scalar("SELECT id FROM outbox WHERE workflow_id = $1 ORDER BY id")
            .bind(fine.as_str())
            .fetch_all(store.pool())
            .await
            .unwrap();
    let answered: Vec<i64> = written.outbox.iter().map(|row| row.id).collect();
    assert_eq!(rows, answered);
    let attempts: Vec<(i64, String)> =
        sqlx::query_as("SELECT scheduled_seq, runner FROM attempt_claims WHERE workflow_id = $1")
            .bind(fine.as_str())
            .fetch_all(store.pool())
            .await
            .unwrap();
    assert_eq!(attempts, vec![(3, "group-ok-test".to_owned())]);
    for id in [&fine, &stale] {
        store.verify_history(id).await.unwrap();
    }
}

/// Starts share a group with appends: each new workflow's index row and first events are
/// written by the group statement, and a start of an id that exists is refused alone
/// (told the first start's input digest), failing none of its neighbours.
#[tokio::test]
async fn starts_share_a_group_with_appends_and_a_duplicate_fails_alone() {
    let Some(store) =
        grouped("starts_share_a_group_with_appends_and_a_duplicate_fails_alone").await
    else {
        return;
    };
    let existing = workflow_with_events(&store, "group-start-existing", 1).await;
    let moving = workflow_with_events(&store, "group-start-moving", 1).await;
    let moving_summary = store.get_workflow(&moving).await.unwrap();
    let new_ids: Vec<WorkflowId> = (0..3)
        .map(|n| crate::support::unique_id(&format!("group-start-{n}")))
        .collect();
    let start = |id: &WorkflowId, digest: &str, events: u64| {
        let workflow = NewWorkflow {
            input_digest: Some(digest.to_owned()),
            ..crate::support::new_workflow("group-start")
        };
        let batch = AppendBatch::new(id.clone(), Seq::FIRST, (1..=events).map(event).collect());
        let store = store.clone();
        async move { store.create_workflow(&workflow, batch).await }
    };
    let stats = store.group_stats().unwrap();
    let fallbacks = stats.fallbacks.load(Ordering::Relaxed);
    let moving_batch = batch_on(&moving_summary, 1);
    let work = async {
        tokio::join!(
            join_all(new_ids.iter().map(|id| start(id, "fresh", 3))),
            start(&existing, "again", 1),
            store.append_known(&moving_summary, &moving_batch),
        )
    };
    let (starts, duplicate, appended) = while_the_writer_is_busy(&store, work).await;
    assert_eq!(
        stats.fallbacks.load(Ordering::Relaxed),
        fallbacks,
        "the group statement wrote them, not the one-by-one fallback"
    );
    for (id, started) in new_ids.iter().zip(starts) {
        let started = started.unwrap();
        assert_eq!(started.next_seq, Seq::new(4).unwrap());
        assert_eq!(
            started.status,
            Some(hcpflow_engine::WorkflowStatus::Running)
        );
        let index = store.get_workflow(id).await.unwrap();
        assert_eq!(index.next_seq, started.next_seq);
        assert_eq!(index.head_hash, started.head_hash);
        assert_eq!(index.workflow_type, "group-start");
        store.verify_history(id).await.unwrap();
    }
    assert!(
        matches!(&duplicate, Err(Error::AlreadyExists { input_digest, .. }) if input_digest.is_none()),
        "{duplicate:?}"
    );
    assert_eq!(store.read_full_history(&existing).await.unwrap().len(), 1);
    assert_eq!(appended.unwrap().next_seq, Seq::new(4).unwrap());
}

/// A store with `writers` writers and as many pooled connections, and the stack's URLs.
async fn with_writers(test: &str, writers: u32) -> Option<(Stack, EventStore)> {
    let (stack, _) = store(test).await?;
    let store = EventStore::connect(&stack.app_url, writers)
        .await
        .unwrap()
        .with_group_commit(writers as usize)
        .await
        .unwrap();
    Some((stack, store))
}

/// `enable_seqscan` and the backend of the connection `pool` lends next.
async fn planner(pool: &sqlx::PgPool) -> (String, i32) {
    sqlx::query_as("SELECT current_setting('enable_seqscan'), pg_backend_pid()")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn the_writers_plan_by_key_on_connections_of_their_own() {
    let Some((_, store)) =
        with_writers("the_writers_plan_by_key_on_connections_of_their_own", 1).await
    else {
        return;
    };
    // Asked before the first write, the writers' one connection goes back to their
    // pool idle, and the writer takes it (and keeps it).
    let writers = store.writers_pool().expect("group commit runs");
    let (writers_plan, writer) = planner(writers).await;
    assert_eq!(writers_plan, "off");
    let id = workflow_with_events(&store, "group-plans", 1).await;
    for _ in 0..3 {
        let summary = store.get_workflow(&id).await.unwrap();
        store
            .append_known(&summary, &batch_on(&summary, 0))
            .await
            .unwrap();
        let (shared_plan, _) = planner(store.pool()).await;
        assert_eq!(shared_plan, "on", "the shared pool plans as Postgres likes");
    }
    let (last_statement,): (String,) =
        sqlx::query_as("SELECT query FROM pg_stat_activity WHERE pid = $1")
            .bind(writer)
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert!(
        last_statement.trim_start().starts_with("WITH"),
        "the writer appended on its own connection: {last_statement}"
    );
    assert_eq!(
        store.get_workflow(&id).await.unwrap().next_seq,
        Seq::new(8).unwrap()
    );
    store.verify_history(&id).await.unwrap();
}

#[tokio::test]
async fn a_write_given_up_midway_leaves_the_writers_writing() {
    let Some((stack, store)) =
        with_writers("a_write_given_up_midway_leaves_the_writers_writing", 1).await
    else {
        return;
    };
    let (_, writer) = planner(store.writers_pool().unwrap()).await;
    let id = workflow_with_events(&store, "group-given-up", 1).await;
    let summary = store.get_workflow(&id).await.unwrap();
    // Another session holds the index row: the append waits on it, and is given up.
    let other = crate::support::pool(&stack.app_url).await;
    let locker = lock_index_row(&other, &id).await;
    let batch = batch_on(&summary, 0);
    let given_up = tokio::time::timeout(
        Duration::from_millis(300),
        store.append_known(&summary, &batch),
    )
    .await;
    assert!(given_up.is_err(), "the append waited on the lock");
    locker.commit().await.unwrap();
    // The given-up statement runs on to its commit on the server: an append decided
    // before it lands conflicts, as any stale one does; decided again, it is written,
    // on a connection the writers' pool opens in place of the closed one.
    let mut written = None;
    for _ in 0..50 {
        let summary = store.get_workflow(&id).await.unwrap();
        match store.append_known(&summary, &batch_on(&summary, 0)).await {
            Ok(appended) => {
                written = Some(appended);
                break;
            }
            Err(Error::Conflict { .. }) => tokio::time::sleep(Duration::from_millis(20)).await,
            Err(error) => panic!("{error:?}"),
        }
    }
    assert!(written.is_some(), "the writer writes again");
    store.verify_history(&id).await.unwrap();
    // The connection of the write given up was closed, not lent again once its
    // statement ended (its backend ends when it finds the client gone).
    let mut gone = false;
    for _ in 0..50 {
        let alive: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE pid = $1")
            .bind(writer)
            .fetch_one(store.pool())
            .await
            .unwrap();
        if alive == 0 {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "the given-up write's connection was closed");
}

#[tokio::test]
async fn a_stalled_write_leaves_the_next_group_to_a_spare_writer() {
    let Some((stack, store)) =
        with_writers("a_stalled_write_leaves_the_next_group_to_a_spare_writer", 2).await
    else {
        return;
    };
    let stalled = workflow_with_events(&store, "group-stalled", 1).await;
    let mut others = Vec::new();
    for _ in 0..2 {
        let id = workflow_with_events(&store, "group-spare", 1).await;
        others.push(store.get_workflow(&id).await.unwrap());
    }
    let stats = store.group_stats().unwrap();
    let before = (
        stats.groups.load(Ordering::Relaxed),
        stats.spares.load(Ordering::Relaxed),
    );
    // Another session holds the stalled workflow's index row: its append takes the
    // writer and waits on the lock.
    let other = crate::support::pool(&stack.app_url).await;
    let locker = lock_index_row(&other, &stalled).await;
    let held = tokio::spawn({
        let store = store.clone();
        let summary = store.get_workflow(&stalled).await.unwrap();
        async move { store.append_known(&summary, &batch_on(&summary, 0)).await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!held.is_finished(), "the append waits on the row lock");
    // Sent together while that write is in flight, the others queue (the second
    // writer is no one's at once) and go as one group on the spare, the stall being
    // older than STALLED_AFTER, while the lock still holds.
    let batches: Vec<AppendBatch> = others.iter().map(|s| batch_on(s, 1)).collect();
    let written = tokio::time::timeout(
        Duration::from_secs(10),
        join_all(
            others
                .iter()
                .zip(&batches)
                .map(|(summary, batch)| store.append_known(summary, batch)),
        ),
    )
    .await
    .expect("a stalled write holds up no other workflow");
    for (summary, appended) in others.iter().zip(written) {
        assert_eq!(appended.unwrap().next_seq, Seq::new(4).unwrap());
        store.verify_history(&summary.workflow_id).await.unwrap();
    }
    assert!(!held.is_finished(), "the stalled write still waits");
    assert_eq!(
        (
            stats.groups.load(Ordering::Relaxed) - before.0,
            stats.spares.load(Ordering::Relaxed) - before.1
        ),
        (2, 1),
        "the stalled append, then one group of the two others, on the spare writer"
    );
    // The spare's write ended: the next appends go on it again, the stall still on.
    let summary = store.get_workflow(&others[0].workflow_id).await.unwrap();
    tokio::time::timeout(
        Duration::from_secs(10),
        store.append_known(&summary, &batch_on(&summary, 0)),
    )
    .await
    .expect("the spare writes again during the stall")
    .unwrap();
    assert!(!held.is_finished(), "the stalled write still waits");
    assert_eq!(stats.spares.load(Ordering::Relaxed) - before.1, 2);
    locker.commit().await.unwrap();
    assert_eq!(held.await.unwrap().unwrap().next_seq, Seq::new(4).unwrap());
    store.verify_history(&stalled).await.unwrap();
}

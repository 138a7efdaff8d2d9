//! Appends decided on a cached index (no read), and the events-stream watermark.

use std::time::Duration;

use hcpflow_engine::{Seq, WorkflowId, WorkflowStatus};
use hcpflow_eventstore::{AppendBatch, Error, EventStore, NewWorkflow, PublishedRange};

use crate::support::{event, new_workflow, store, unique_id, workflow_with_events};

fn range(first: u64, last: u64) -> PublishedRange {
    PublishedRange {
        first: Seq::new(first).unwrap(),
        last: Seq::new(last).unwrap(),
    }
}

async fn mark(store: &EventStore, id: &WorkflowId) -> i64 {
    sqlx::query_scalar("SELECT events_published_seq FROM workflows WHERE workflow_id = $1")
        .bind(id.as_str())
        .fetch_one(store.pool())
        .await
        .unwrap()
}

#[tokio::test]
async fn an_append_on_a_stale_index_is_a_conflict_and_writes_nothing() {
    let Some((_, store)) =
        store("an_append_on_a_stale_index_is_a_conflict_and_writes_nothing").await
    else {
        return;
    };
    let id = workflow_with_events(&store, "known", 2).await;
    let cached = store.get_workflow(&id).await.unwrap();

    // Current: appends without reading.
    let batch = AppendBatch::new(id.clone(), cached.next_seq, vec![event(3)]);
    let appended = store.append_known(&cached, &batch).await.unwrap();
    assert_eq!(appended.next_seq.get(), 4);
    store.verify_history(&id).await.unwrap();

    // The same (now stale) index again: a conflict, nothing written.
    let again = AppendBatch::new(id.clone(), cached.next_seq, vec![event(99)]);
    assert!(matches!(
        store.append_known(&cached, &again).await,
        Err(Error::Conflict { .. })
    ));

    // The seq is current but the status moved on (another process blocked it): the
    // decision was made on a status that no longer holds, so it is a conflict too.
    let mut fresh = store.get_workflow(&id).await.unwrap();
    store.set_blocked(&id, "test").await.unwrap();
    fresh.status = WorkflowStatus::Running;
    let on_old_status = AppendBatch::new(id.clone(), fresh.next_seq, vec![event(4)]);
    assert!(matches!(
        store.append_known(&fresh, &on_old_status).await,
        Err(Error::Conflict { .. })
    ));

    let history = store.read_full_history(&id).await.unwrap();
    assert_eq!(history.len(), 3, "neither refused append wrote an event");
    let summary = store.get_workflow(&id).await.unwrap();
    assert_eq!(summary.next_seq.get(), 4);
    assert_eq!(summary.status, WorkflowStatus::Blocked);
    store.verify_history(&id).await.unwrap();
}

#[tokio::test]
async fn the_watermark_moves_only_over_gap_free_runs() {
    let Some((_, store)) = store("the_watermark_moves_only_over_gap_free_runs").await else {
        return;
    };
    let id = workflow_with_events(&store, "mark", 6).await;
    assert_eq!(mark(&store, &id).await, 0);

    // A run that does not start right after the mark changes nothing, and is handed
    // back as still pending.
    let pending = store
        .mark_events_published(&[(id.clone(), range(3, 4))])
        .await
        .unwrap();
    assert_eq!(pending, vec![id.clone()]);
    assert_eq!(mark(&store, &id).await, 0);
    store
        .mark_events_published(&[(id.clone(), range(1, 2))])
        .await
        .unwrap();
    assert_eq!(mark(&store, &id).await, 2);
    store
        .mark_events_published(&[(id.clone(), range(2, 5))])
        .await
        .unwrap();
    assert_eq!(mark(&store, &id).await, 5);
    // An older run never moves it back, and is done with (not pending).
    let pending = store
        .mark_events_published(&[(id.clone(), range(1, 3))])
        .await
        .unwrap();
    assert!(pending.is_empty());
    assert_eq!(mark(&store, &id).await, 5);

    // An append carrying what its process published moves the mark in the same write;
    // a range it cannot apply yet is handed back, to be kept for a later write.
    let summary = store.get_workflow(&id).await.unwrap();
    let mut batch = AppendBatch::new(id.clone(), summary.next_seq, vec![event(7)]);
    batch.events_published = Some(range(7, 7));
    let appended = store.append_known(&summary, &batch).await.unwrap();
    assert_eq!(appended.events_range_refused, Some(range(7, 7)));
    assert_eq!(mark(&store, &id).await, 5);
    let summary = store.get_workflow(&id).await.unwrap();
    let mut batch = AppendBatch::new(id.clone(), summary.next_seq, vec![event(8)]);
    batch.events_published = Some(range(6, 7));
    let appended = store.append_known(&summary, &batch).await.unwrap();
    assert_eq!(appended.events_range_refused, None);
    assert_eq!(mark(&store, &id).await, 7);

    // A row another transaction holds is skipped, not waited for: its range comes back
    // pending, and moves the mark once the row is free.
    let mut holder = store.pool().begin().await.unwrap();
    sqlx::query("SELECT 1 FROM workflows WHERE workflow_id = $1 FOR UPDATE")
        .bind(id.as_str())
        .execute(&mut *holder)
        .await
        .unwrap();
    let held = tokio::time::timeout(
        Duration::from_secs(5),
        store.mark_events_published(&[(id.clone(), range(8, 8))]),
    )
    .await
    .expect("the marks waited for a locked row");
    assert_eq!(held.unwrap(), vec![id.clone()]);
    holder.rollback().await.unwrap();
    assert_eq!(mark(&store, &id).await, 7);
    let pending = store
        .mark_events_published(&[(id.clone(), range(8, 8))])
        .await
        .unwrap();
    assert!(pending.is_empty());
    assert_eq!(mark(&store, &id).await, 8);
}

#[tokio::test]
async fn unpublished_events_are_offered_after_the_grace_period() {
    let Some((_, store)) = store("unpublished_events_are_offered_after_the_grace_period").await
    else {
        return;
    };
    let id = unique_id("unpublished");
    let subject = format!("test.events.{id}");
    let workflow = NewWorkflow {
        events_subject: Some(subject.clone()),
        ..new_workflow("test")
    };
    let batch = AppendBatch::new(id.clone(), Seq::FIRST, (1..=4).map(event).collect());
    store.create_workflow(&workflow, batch).await.unwrap();
    // Without an events subject, a workflow has no events stream to catch up on.
    let silent = workflow_with_events(&store, "silent", 2).await;
    store
        .mark_events_published(&[(id.clone(), range(1, 2))])
        .await
        .unwrap();
    let ours = |found: &hcpflow_eventstore::UnpublishedEvents| -> Vec<u64> {
        assert!(found.events.iter().all(|(_, e)| e.workflow_id != silent));
        found
            .events
            .iter()
            .filter(|(_, e)| e.workflow_id == id)
            .inspect(|(to, _)| assert_eq!(*to, subject))
            .map(|(_, e)| e.seq.get())
            .collect()
    };
    let young = store
        .unpublished_events("test.events.", Duration::from_secs(3600), 10_000)
        .await
        .unwrap();
    assert!(ours(&young).is_empty(), "still within the grace period");
    tokio::time::sleep(Duration::from_millis(50)).await;
    let due = store
        .unpublished_events("test.events.", Duration::from_millis(10), 10_000)
        .await
        .unwrap();
    assert_eq!(ours(&due), vec![3, 4]);
    store
        .mark_events_published(&[(id.clone(), range(3, 4))])
        .await
        .unwrap();
    let none = store
        .unpublished_events("test.events.", Duration::from_millis(10), 10_000)
        .await
        .unwrap();
    assert!(ours(&none).is_empty());
}

//! Outbox rows and timers are claimed by exactly one of many concurrent claimers.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chrono::Utc;
use hcpflow_engine::{Seq, WorkflowId};
use hcpflow_eventstore::{
    AppendBatch, EventStore, NewTimer, NewWorkflow, OutboxMessage, TimerKind,
};

use crate::support::{event, new_workflow, store, unique_id};

const CLAIMERS: usize = 8;
const WORKFLOWS: u64 = 20;
const PER_WORKFLOW: u64 = 10;
const LEASE: Duration = Duration::from_secs(120);

/// A claim takes due rows of every test sharing the database: the outbox claim tests
/// take turns, so that one does not hold rows another counts on.
static OUTBOX_CLAIMS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn seed_outbox(store: &EventStore, tag: &str) -> BTreeSet<String> {
    let mut msg_ids = BTreeSet::new();
    for _ in 0..WORKFLOWS {
        let id = unique_id("outbox");
        let messages: Vec<OutboxMessage> = (1..=PER_WORKFLOW)
            .map(|n| OutboxMessage {
                subject: format!("hcpflow.test.{id}"),
                msg_id: format!("{tag}-{id}-{n}"),
                payload: format!("{{\"n\":{n}}}").into_bytes(),
            })
            .collect();
        msg_ids.extend(messages.iter().map(|m| m.msg_id.clone()));
        let batch = AppendBatch::new(id, Seq::FIRST, vec![event(1)]).with_outbox(messages);
        store
            .create_workflow(&new_workflow("test"), batch)
            .await
            .unwrap();
    }
    msg_ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_outbox_row_is_claimed_exactly_once() {
    let Some((_, store)) = store("every_outbox_row_is_claimed_exactly_once").await else {
        return;
    };
    let _turn = OUTBOX_CLAIMS.lock().await;
    let tag = unique_id("claim").to_string();
    let ours = seed_outbox(&store, &tag).await;

    let claimers = (0..CLAIMERS).map(|n| {
        let store = store.clone();
        tokio::spawn(async move {
            let name = format!("relay-{n}");
            let mut claimed = Vec::new();
            loop {
                let batch = store.claim_outbox(&name, 7, LEASE).await.unwrap();
                if batch.is_empty() {
                    return claimed;
                }
                let ids: Vec<i64> = batch.iter().map(|m| m.id).collect();
                assert_eq!(
                    store.mark_published(&name, &ids).await.unwrap(),
                    ids.len() as u64
                );
                claimed.extend(batch.into_iter().map(|m| m.msg_id));
            }
        })
    });
    let mut counts = BTreeMap::<String, usize>::new();
    for claimer in futures::future::join_all(claimers).await {
        for msg_id in claimer.unwrap() {
            *counts.entry(msg_id).or_default() += 1;
        }
    }
    for msg_id in &ours {
        assert_eq!(counts.get(msg_id), Some(&1), "{msg_id}");
    }
    assert!(counts.values().all(|&n| n == 1), "a row was claimed twice");
}

#[tokio::test]
async fn an_expired_outbox_lease_is_claimed_again() {
    let Some((_, store)) = store("an_expired_outbox_lease_is_claimed_again").await else {
        return;
    };
    let _turn = OUTBOX_CLAIMS.lock().await;
    let id = unique_id("lease");
    let message = OutboxMessage {
        subject: "hcpflow.test.lease".into(),
        msg_id: format!("lease-{id}"),
        payload: b"{}".to_vec(),
    };
    let batch = AppendBatch::new(id.clone(), Seq::FIRST, vec![event(1)]).with_outbox(vec![message]);
    store
        .create_workflow(&new_workflow("test"), batch)
        .await
        .unwrap();

    let find = |batch: Vec<hcpflow_eventstore::ClaimedMessage>| {
        batch.into_iter().find(|m| m.workflow_id == id.as_str())
    };
    // The dead relay claims the row (possibly with others) and never marks it.
    let mut first = None;
    while first.is_none() {
        let batch = store
            .claim_outbox("dead-relay", 1000, Duration::from_millis(300))
            .await
            .unwrap();
        assert!(!batch.is_empty(), "our row was never offered");
        first = find(batch);
    }
    assert_eq!(first.unwrap().attempts, 1);
    // While the lease holds, nobody else gets it.
    assert!(find(store.claim_outbox("live-relay", 1000, LEASE).await.unwrap()).is_none());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let again = find(store.claim_outbox("live-relay", 1000, LEASE).await.unwrap())
        .expect("reclaimed after the lease");
    assert_eq!(again.attempts, 2);
    // The dead relay can no longer mark it; the live one can.
    assert_eq!(
        store
            .mark_published("dead-relay", &[again.id])
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        store
            .mark_published("live-relay", &[again.id])
            .await
            .unwrap(),
        1
    );
}

/// Timers of workflows of one deployment (events under `prefix`): the test's own, so
/// that servers of other deployments sharing the database neither take nor offer any.
async fn seed_timers(
    store: &EventStore,
    prefix: &str,
) -> (BTreeSet<(WorkflowId, u64)>, WorkflowId) {
    let workflow = || NewWorkflow {
        events_subject: Some(format!("{prefix}x")),
        ..new_workflow("test")
    };
    let mut ours = BTreeSet::new();
    let past = Utc::now() - chrono::Duration::seconds(5);
    for _ in 0..WORKFLOWS {
        let id = unique_id("timers");
        let timers: Vec<NewTimer> = (1..=PER_WORKFLOW)
            .map(|n| NewTimer {
                seq: Seq::new(n).unwrap(),
                kind: TimerKind::Timer,
                due_at: past,
            })
            .collect();
        ours.extend((1..=PER_WORKFLOW).map(|n| (id.clone(), n)));
        let batch = AppendBatch::new(id, Seq::FIRST, vec![event(1)]).with_timers(timers);
        store.create_workflow(&workflow(), batch).await.unwrap();
    }
    // One timer that is not due yet must not be claimed.
    let future = unique_id("timers-future");
    let later = NewTimer {
        seq: Seq::FIRST,
        kind: TimerKind::Retry,
        due_at: Utc::now() + chrono::Duration::hours(1),
    };
    let batch =
        AppendBatch::new(future.clone(), Seq::FIRST, vec![event(1)]).with_timers(vec![later]);
    store.create_workflow(&workflow(), batch).await.unwrap();
    (ours, future)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_due_timer_is_claimed_exactly_once() {
    let Some((_, store)) = store("every_due_timer_is_claimed_exactly_once").await else {
        return;
    };
    let prefix = format!("{}.events.", unique_id("deployment"));
    let (ours, future) = seed_timers(&store, &prefix).await;
    let claimers = (0..CLAIMERS).map(|n| {
        let store = store.clone();
        let prefix = prefix.clone();
        tokio::spawn(async move {
            let name = format!("timer-service-{n}");
            let mut claimed = Vec::new();
            loop {
                let batch = store
                    .claim_due_timers(&name, &prefix, 7, LEASE)
                    .await
                    .unwrap();
                if batch.is_empty() {
                    return claimed;
                }
                assert!(batch.iter().all(|t| t.due_at <= Utc::now()));
                let ids: Vec<i64> = batch.iter().map(|t| t.id).collect();
                assert_eq!(
                    store.mark_timers_fired(&name, &ids).await.unwrap(),
                    ids.len() as u64
                );
                claimed.extend(
                    batch
                        .into_iter()
                        .map(|t| (t.workflow_id, t.seq.get(), t.id)),
                );
            }
        })
    });
    let mut counts = BTreeMap::<i64, usize>::new();
    let mut seen_workflows = BTreeSet::new();
    let mut claimed_ours = BTreeMap::<(WorkflowId, u64), usize>::new();
    for claimer in futures::future::join_all(claimers).await {
        for (workflow_id, seq, row) in claimer.unwrap() {
            *counts.entry(row).or_default() += 1;
            seen_workflows.insert(workflow_id.clone());
            if ours.contains(&(workflow_id.clone(), seq)) {
                *claimed_ours.entry((workflow_id, seq)).or_default() += 1;
            }
        }
    }
    assert!(
        counts.values().all(|&n| n == 1),
        "a timer was claimed twice"
    );
    assert_eq!(
        claimed_ours.len(),
        ours.len(),
        "some due timers were never claimed"
    );
    assert!(claimed_ours.values().all(|&n| n == 1));
    assert!(
        !seen_workflows.contains(&future),
        "a timer due in an hour was claimed"
    );
}

#[tokio::test]
async fn published_rows_fired_timers_and_expired_claims_are_purged_and_nothing_else() {
    let Some((stack, store)) =
        store("published_rows_fired_timers_and_expired_claims_are_purged_and_nothing_else").await
    else {
        return;
    };
    // Purging deletes other tests' published rows too: not while they count theirs.
    let _turn = OUTBOX_CLAIMS.lock().await;
    let id = unique_id("purge");
    let messages: Vec<OutboxMessage> = (1..=2)
        .map(|n| OutboxMessage {
            subject: format!("hcpflow.test.purge.{id}"),
            msg_id: format!("purge-{id}-{n}"),
            payload: b"{}".to_vec(),
        })
        .collect();
    let timers = vec![
        NewTimer {
            seq: Seq::FIRST,
            kind: TimerKind::Timer,
            due_at: Utc::now(),
        },
        NewTimer {
            seq: Seq::FIRST,
            kind: TimerKind::Retry,
            due_at: Utc::now() + chrono::Duration::hours(1),
        },
    ];
    let appended = store
        .create_workflow(
            &new_workflow("test"),
            AppendBatch::new(id.clone(), Seq::FIRST, vec![event(1)])
                .with_outbox(messages)
                .with_timers(timers),
        )
        .await
        .unwrap();
    let published = appended.outbox[0].id;
    store.mark_published_unclaimed(&[published]).await.unwrap();
    let admin = crate::support::pool(&stack.admin_url).await;
    sqlx::query("UPDATE timers SET fired_at = now() WHERE workflow_id = $1 AND kind = 'timer'")
        .bind(id.as_str())
        .execute(&admin)
        .await
        .unwrap();
    let claim = |runner: &str| hcpflow_eventstore::AttemptClaim {
        workflow_id: id.clone(),
        scheduled_seq: Seq::FIRST,
        attempt: 1,
        runner: runner.into(),
    };
    store
        .claim_attempt(&claim("gone"), Duration::ZERO)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    // The database is shared with every other test: purge until nothing is left to.
    let mut total = hcpflow_eventstore::Purged::default();
    for _ in 0..1000 {
        let purged = store.purge_done(Duration::ZERO).await.unwrap();
        if purged.total() == 0 {
            break;
        }
        total.outbox += purged.outbox;
        total.timers += purged.timers;
        total.attempt_claims += purged.attempt_claims;
    }
    assert!(
        total.outbox >= 1 && total.timers >= 1 && total.attempt_claims >= 1,
        "{total:?}"
    );
    let left: (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM outbox WHERE workflow_id = $1),
                (SELECT count(*) FROM timers WHERE workflow_id = $1),
                (SELECT count(*) FROM attempt_claims WHERE workflow_id = $1)",
    )
    .bind(id.as_str())
    .fetch_one(&admin)
    .await
    .unwrap();
    assert_eq!(
        left,
        (1, 1, 0),
        "the unpublished row and the unfired timer stay"
    );
}

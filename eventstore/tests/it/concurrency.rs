//! Many appenders racing on one history.

use std::sync::Arc;

use hcpflow_engine::{Seq, WorkflowId};
use hcpflow_eventstore::{AppendBatch, Error, EventStore, NewEvent};
use serde_json::json;
use tokio::sync::Barrier;

use crate::support::{store, workflow_with_events};

const APPENDERS: u64 = 8;

fn marker(writer: u64, round: u64) -> Vec<NewEvent> {
    // Batches of 1-3 events, so seqs advance unevenly.
    (0..=(writer + round) % 3)
        .map(|part| {
            NewEvent::new(
                "Marker",
                json!({"writer": writer, "round": round, "part": part}),
            )
        })
        .collect()
}

/// In every round all appenders expect the same next seq at the same moment: exactly
/// one must win and every other must get a conflict.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exactly_one_winner_per_seq() {
    let Some((_, store)) = store("exactly_one_winner_per_seq").await else {
        return;
    };
    let id = workflow_with_events(&store, "race", 1).await;
    let rounds = 30;
    let mut expected = Seq::new(2).unwrap();
    let mut winners = Vec::new();
    for round in 0..rounds {
        let barrier = Arc::new(Barrier::new(APPENDERS as usize));
        let attempts = (0..APPENDERS).map(|writer| {
            let (store, id, barrier) = (store.clone(), id.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                (
                    writer,
                    store
                        .append(AppendBatch::new(id, expected, marker(writer, round)))
                        .await,
                )
            })
        });
        let mut won = Vec::new();
        for attempt in futures::future::join_all(attempts).await {
            let (writer, outcome) = attempt.unwrap();
            match outcome {
                Ok(appended) => won.push((writer, appended)),
                Err(Error::Conflict { .. }) => {}
                Err(other) => panic!("round {round}: writer {writer}: unexpected {other}"),
            }
        }
        assert_eq!(won.len(), 1, "round {round}: {} winners", won.len());
        let (writer, appended) = won.pop().unwrap();
        assert_eq!(appended.events[0].seq, expected);
        expected = appended.next_seq;
        winners.push((writer, round, appended.events.len()));
    }
    let history = store.read_full_history(&id).await.unwrap();
    assert_eq!(history.len() as u64, expected.get() - 1);
    // The history holds exactly the winners' batches, in round order.
    let mut seq = 1;
    for (writer, round, len) in winners {
        for part in 0..len {
            seq += 1;
            let data = history[seq - 1].data().unwrap();
            assert_eq!(
                data,
                json!({"writer": writer, "round": round, "part": part})
            );
        }
    }
    store.verify_history(&id).await.unwrap();
}

/// Free-running appenders that reload and retry on conflict: nothing is lost, nothing
/// is written twice, and the chain verifies.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn retrying_appenders_lose_nothing() {
    let Some((_, store)) = store("retrying_appenders_lose_nothing").await else {
        return;
    };
    let id = workflow_with_events(&store, "retry", 1).await;
    let per_writer = 25;
    let tasks = (0..APPENDERS).map(|writer| {
        let (store, id) = (store.clone(), id.clone());
        tokio::spawn(async move { append_rounds(&store, &id, writer, per_writer).await })
    });
    let conflicts: u64 = futures::future::join_all(tasks)
        .await
        .into_iter()
        .map(|t| t.unwrap())
        .sum();

    let history = store.read_full_history(&id).await.unwrap();
    let mut landed = std::collections::BTreeMap::<(u64, u64), Vec<u64>>::new();
    for event in &history[1..] {
        let data = event.data().unwrap();
        let key = (
            data["writer"].as_u64().unwrap(),
            data["round"].as_u64().unwrap(),
        );
        landed
            .entry(key)
            .or_default()
            .push(data["part"].as_u64().unwrap());
    }
    for writer in 0..APPENDERS {
        for round in 0..per_writer {
            let parts = landed
                .get(&(writer, round))
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            let expected: Vec<u64> = (0..marker(writer, round).len() as u64).collect();
            assert_eq!(parts, expected.as_slice(), "writer {writer} round {round}");
        }
    }
    assert_eq!(landed.len() as u64, APPENDERS * per_writer);
    let verified = store.verify_history(&id).await.unwrap();
    assert_eq!(verified.events, history.len() as u64);
    crate::support::say(&format!(
        "retrying_appenders_lose_nothing: {} appends by {APPENDERS} writers landed after {conflicts} conflicts",
        APPENDERS * per_writer
    ));
}

async fn append_rounds(store: &EventStore, id: &WorkflowId, writer: u64, rounds: u64) -> u64 {
    let mut conflicts = 0;
    for round in 0..rounds {
        loop {
            let next = store.get_workflow(id).await.unwrap().next_seq;
            match store
                .append(AppendBatch::new(id.clone(), next, marker(writer, round)))
                .await
            {
                Ok(_) => break,
                Err(Error::Conflict { .. }) => conflicts += 1,
                Err(other) => panic!("writer {writer}: {other}"),
            }
        }
    }
    conflicts
}

/// Appenders that decide on the history they read under the row lock: they queue, none
/// sees a stale history, and every append lands exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn appends_decided_on_the_history_all_land_once() {
    let Some((_, store)) = store("appends_decided_on_the_history_all_land_once").await else {
        return;
    };
    let id = workflow_with_events(&store, "decided", 1).await;
    let tasks = (0..APPENDERS * 5).map(|n| {
        let (store, id) = (store.clone(), id.clone());
        tokio::spawn(async move {
            let (appended, ()) = store
                .append_locked(&id, |summary, events| {
                    assert_eq!(events.len() as u64 + 1, summary.next_seq.get());
                    let event = NewEvent::new("Marker", json!({"n": n}));
                    Ok((
                        Some(AppendBatch::new(id.clone(), summary.next_seq, vec![event])),
                        (),
                    ))
                })
                .await
                .unwrap();
            assert!(appended.is_some());
        })
    });
    for task in futures::future::join_all(tasks).await {
        task.unwrap();
    }
    let history = store.read_full_history(&id).await.unwrap();
    let mut seen: Vec<u64> = history[1..]
        .iter()
        .map(|e| e.data().unwrap()["n"].as_u64().unwrap())
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..APPENDERS * 5).collect::<Vec<_>>());
    store.verify_history(&id).await.unwrap();
}

/// An audit of a running workflow reads one moment of it: while an appender keeps
/// adding events, every verification sees an index and a log that agree.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn verifying_a_history_that_grows_meanwhile_sees_one_snapshot() {
    let Some((_, store)) = store("verifying_a_history_that_grows_meanwhile").await else {
        return;
    };
    let id = workflow_with_events(&store, "growing", 1).await;
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let appender = {
        let (store, id, done) = (store.clone(), id.clone(), done.clone());
        tokio::spawn(async move {
            let mut next = Seq::new(2).unwrap();
            for round in 0..300 {
                let appended = store
                    .append(AppendBatch::new(id.clone(), next, marker(0, round)))
                    .await
                    .expect("the only appender never conflicts");
                next = appended.next_seq;
            }
            done.store(true, std::sync::atomic::Ordering::SeqCst);
        })
    };
    let mut verified = 0;
    while !done.load(std::sync::atomic::Ordering::SeqCst) {
        let outcome = store.verify_history(&id).await;
        assert!(
            outcome.is_ok(),
            "verification {verified} of a growing history: {outcome:?}"
        );
        verified += 1;
    }
    appender.await.unwrap();
    assert!(verified > 0);
    store.verify_history(&id).await.unwrap();
}

//! A 10,000-event history appends and verifies. The figures are printed, not asserted:
//! timing belongs in a benchmark.

use std::time::Instant;

use hcpflow_engine::Seq;
use hcpflow_eventstore::AppendBatch;

use crate::support::{event, new_workflow, say, store, unique_id};

#[tokio::test]
async fn ten_thousand_events_append_and_verify() {
    let Some((_, store)) = store("ten_thousand_events_append_and_verify").await else {
        return;
    };
    const EVENTS: u64 = 10_000;
    const BATCH: u64 = 100;
    let id = unique_id("large");

    let started = Instant::now();
    let mut next = Seq::FIRST;
    for start in (1..=EVENTS).step_by(BATCH as usize) {
        let events = (start..start + BATCH).map(event).collect();
        let batch = AppendBatch::new(id.clone(), next, events);
        next = if next == Seq::FIRST {
            store
                .create_workflow(&new_workflow("test"), batch)
                .await
                .unwrap()
                .next_seq
        } else {
            store.append(batch).await.unwrap().next_seq
        };
    }
    let appended = started.elapsed();

    let started = Instant::now();
    let verified = store.verify_history(&id).await.unwrap();
    let verify = started.elapsed();
    assert_eq!(verified.events, EVENTS);
    assert_eq!(next.get(), EVENTS + 1);
    say(&format!(
        "ten_thousand_events_append_and_verify: appended {EVENTS} events in {} batches of {BATCH} in {:.0} ms; verified the chain in {:.0} ms",
        EVENTS / BATCH,
        appended.as_secs_f64() * 1000.0,
        verify.as_secs_f64() * 1000.0
    ));
}

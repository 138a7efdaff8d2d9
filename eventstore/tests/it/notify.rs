//! An append wakes the relay (NOTIFY `hcpflow_outbox`) only when it writes outbox rows
//! the relay may have to publish, and the timer services (`hcpflow_timers`) only when
//! it writes timers: a NOTIFY serialises every commit on one lock.
//!
//! Other tests and servers share the database and notify too. The outbox channel's
//! payload is the workflow id, so these tests look only at their own workflows'. They
//! wait for no silence either: Postgres delivers the notifications of transactions in
//! the order they committed, so once a marker appended last has been delivered, a
//! notification from an append before it would have been too.

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::Utc;
use hcpflow_engine::{Seq, WorkflowId};
use hcpflow_eventstore::{
    AppendBatch, ClaimedAttempts, EventStore, NewTimer, OutboxMessage, TimerKind, OUTBOX_CHANNEL,
    TIMERS_CHANNEL,
};
use sqlx::postgres::PgListener;

use crate::support::{event, new_workflow, store, unique_id};

/// How long a notification may take to arrive once its append has committed.
const DELIVERY: Duration = Duration::from_secs(10);

async fn listener(url: &str) -> PgListener {
    let mut listener = PgListener::connect(url).await.unwrap();
    listener
        .listen_all([OUTBOX_CHANNEL, TIMERS_CHANNEL])
        .await
        .unwrap();
    listener
}

fn message(id: &WorkflowId) -> OutboxMessage {
    OutboxMessage {
        subject: format!("hcpflow.test.notify.{id}"),
        msg_id: format!("notify-{id}"),
        payload: b"{}".to_vec(),
    }
}

/// Creates a workflow whose first batch writes one unclaimed outbox row: the relay is
/// woken for it, with the workflow id as the payload.
async fn marker(store: &EventStore) -> WorkflowId {
    let id = unique_id("notify-marker");
    let batch =
        AppendBatch::new(id.clone(), Seq::FIRST, vec![event(1)]).with_outbox(vec![message(&id)]);
    store
        .create_workflow(&new_workflow("test"), batch)
        .await
        .unwrap();
    id
}

/// The payloads of the outbox notifications delivered up to and including `marker`'s.
async fn outbox_payloads_until(listener: &mut PgListener, marker: &WorkflowId) -> Vec<String> {
    let mut payloads = Vec::new();
    tokio::time::timeout(DELIVERY, async {
        loop {
            let notification = listener.recv().await.unwrap();
            if notification.channel() == OUTBOX_CHANNEL {
                payloads.push(notification.payload().to_owned());
                if notification.payload() == marker.as_str() {
                    return;
                }
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no NOTIFY {OUTBOX_CHANNEL} for {marker}'s outbox row"));
    payloads
}

/// An append without outbox rows (events only, or an attempt its appender claimed to
/// run itself) does not wake the relay; one with a row for it to publish does.
#[tokio::test]
async fn only_an_append_with_outbox_rows_for_the_relay_notifies_it() {
    let Some((stack, store)) =
        store("only_an_append_with_outbox_rows_for_the_relay_notifies_it").await
    else {
        return;
    };
    let mut listener = listener(&stack.app_url).await;

    // Events only: created, then appended to.
    let events_only = unique_id("notify-events-only");
    let created = store
        .create_workflow(
            &new_workflow("test"),
            AppendBatch::new(events_only.clone(), Seq::FIRST, vec![event(1)]),
        )
        .await
        .unwrap();
    store
        .append(AppendBatch::new(
            events_only.clone(),
            created.next_seq,
            vec![event(2)],
        ))
        .await
        .unwrap();
    // An attempt claimed by the appender (it runs the activity at once): no row.
    let claimed = unique_id("notify-claimed");
    let mut batch = AppendBatch::new(claimed.clone(), Seq::FIRST, vec![event(1)]);
    batch.claimed_attempts = Some(ClaimedAttempts {
        runner: "notify-test".into(),
        lease: Duration::from_secs(30),
        attempts: vec![(Seq::FIRST, 1)],
    });
    store
        .create_workflow(&new_workflow("test"), batch)
        .await
        .unwrap();

    let marker = marker(&store).await;
    let payloads = outbox_payloads_until(&mut listener, &marker).await;
    let quiet = BTreeSet::from([events_only.to_string(), claimed.to_string()]);
    let woken: Vec<&String> = payloads.iter().filter(|p| quiet.contains(*p)).collect();
    assert!(
        woken.is_empty(),
        "NOTIFY {OUTBOX_CHANNEL} for appends with nothing for the relay: {woken:?} \
         (events only: {events_only}, claimed by the appender: {claimed})"
    );
}

/// An append that writes a timer wakes the timer services. (Only this way round: their
/// channel's payload is empty, so a NOTIFY from an append without timers could not be
/// told apart from other tests' appends with timers.)
#[tokio::test]
async fn an_append_with_a_timer_notifies_the_timer_services() {
    let Some((stack, store)) = store("an_append_with_a_timer_notifies_the_timer_services").await
    else {
        return;
    };
    let mut listener = listener(&stack.app_url).await;
    let id = unique_id("notify-timer");
    // Due after the test: no timer service fires it meanwhile.
    let timer = NewTimer {
        seq: Seq::FIRST,
        kind: TimerKind::Timer,
        due_at: Utc::now() + chrono::Duration::hours(1),
    };
    store
        .create_workflow(
            &new_workflow("test"),
            AppendBatch::new(id.clone(), Seq::FIRST, vec![event(1)]).with_timers(vec![timer]),
        )
        .await
        .unwrap();
    tokio::time::timeout(DELIVERY, async {
        while listener.recv().await.unwrap().channel() != TIMERS_CHANNEL {}
    })
    .await
    .unwrap_or_else(|_| panic!("no NOTIFY {TIMERS_CHANNEL} for {id}'s timer"));
}

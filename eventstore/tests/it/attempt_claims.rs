//! At most one runner runs an activity attempt at a time, and only the holder of its
//! claim records its outcome.

use std::time::Duration;

use hcpflow_engine::{Seq, WorkflowId};
use hcpflow_eventstore::{
    AppendBatch, AttemptClaim, Claimed, Error, EventStore, OutboxClaim, OutboxMessage,
};

use crate::support::{event, new_workflow, store, unique_id};

fn claim(id: &WorkflowId, runner: &str) -> AttemptClaim {
    AttemptClaim {
        workflow_id: id.clone(),
        scheduled_seq: Seq::FIRST,
        attempt: 1,
        runner: runner.to_owned(),
    }
}

/// Appends an outcome event recorded by `claim`'s runner at `next`.
async fn record(store: &EventStore, claim: &AttemptClaim, next: u64) -> Result<(), Error> {
    let mut batch = AppendBatch::new(
        claim.workflow_id.clone(),
        Seq::new(next).unwrap(),
        vec![event(next)],
    );
    batch.attempt_claim = Some(claim.clone());
    store.append(batch).await.map(|_| ())
}

#[tokio::test]
async fn one_runner_holds_an_attempt_and_only_it_records_the_outcome() {
    let Some((_, store)) =
        store("one_runner_holds_an_attempt_and_only_it_records_the_outcome").await
    else {
        return;
    };
    let id = unique_id("attempt");
    store
        .create_workflow(
            &new_workflow("test"),
            AppendBatch::new(id.clone(), Seq::FIRST, vec![event(1)]),
        )
        .await
        .unwrap();
    let (first, second) = (claim(&id, "runner-a"), claim(&id, "runner-b"));
    let lease = Duration::from_millis(700);
    assert_eq!(
        store.claim_attempt(&first, lease).await.unwrap(),
        Claimed::Taken
    );
    match store.claim_attempt(&second, lease).await.unwrap() {
        Claimed::HeldElsewhere { expires_in } => assert!(expires_in <= lease, "{expires_in:?}"),
        Claimed::Taken => panic!("a second runner took a held attempt"),
    }
    // The holder extends its lease; a stranger cannot.
    assert!(store.extend_attempt_claim(&first, lease).await.unwrap());
    assert!(!store.extend_attempt_claim(&second, lease).await.unwrap());
    // The holder stalls past its lease: the second runner takes the attempt over ...
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert_eq!(
        store.claim_attempt(&second, lease).await.unwrap(),
        Claimed::Taken
    );
    assert!(!store.extend_attempt_claim(&first, lease).await.unwrap());
    // ... and the stalled runner's outcome is refused, writing nothing.
    let lost = record(&store, &first, 2).await;
    assert!(
        matches!(lost, Err(Error::ClaimLost { attempt: 1, .. })),
        "{lost:?}"
    );
    assert_eq!(store.get_workflow(&id).await.unwrap().next_seq.get(), 2);
    // The holder's outcome is recorded and ends the claim.
    record(&store, &second, 2).await.unwrap();
    assert_eq!(
        store.claim_attempt(&first, lease).await.unwrap(),
        Claimed::Taken,
        "the recorded attempt's claim is gone"
    );
}

#[tokio::test]
async fn an_eager_task_is_claimed_with_its_outbox_row() {
    let Some((_, store)) = store("an_eager_task_is_claimed_with_its_outbox_row").await else {
        return;
    };
    let id = unique_id("eager-attempt");
    let message = OutboxMessage {
        subject: "hcpflow.test.eager-attempt".into(),
        msg_id: format!("eager-{id}"),
        payload: b"{}".to_vec(),
    };
    let mut batch =
        AppendBatch::new(id.clone(), Seq::FIRST, vec![event(1)]).with_outbox(vec![message]);
    batch.claimed_outbox = Some(OutboxClaim {
        claimer: "eager-runner".into(),
        lease: Duration::from_secs(30),
        rows: vec![0],
        attempts: vec![(Seq::FIRST, 1)],
    });
    store
        .create_workflow(&new_workflow("test"), batch)
        .await
        .unwrap();
    assert!(matches!(
        store
            .claim_attempt(&claim(&id, "nats-runner"), Duration::from_secs(1))
            .await
            .unwrap(),
        Claimed::HeldElsewhere { .. }
    ));
    assert!(store
        .extend_attempt_claim(&claim(&id, "eager-runner"), Duration::from_secs(30))
        .await
        .unwrap());
    // Given up (its outcome could not be recorded): the next runner takes it at once.
    store
        .release_attempt_claim(&claim(&id, "eager-runner"))
        .await
        .unwrap();
    assert_eq!(
        store
            .claim_attempt(&claim(&id, "nats-runner"), Duration::from_secs(1))
            .await
            .unwrap(),
        Claimed::Taken
    );
}

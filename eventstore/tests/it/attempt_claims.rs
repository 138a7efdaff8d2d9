//! At most one runner runs an activity attempt at a time, and only the holder of its
//! claim records its outcome.

use std::time::Duration;

use hcpflow_engine::{Seq, WorkflowId};
use hcpflow_eventstore::{
    AppendBatch, AttemptClaim, Claimed, ClaimedAttempts, Error, EventStore, NewWorkflow,
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

/// An attempt the appending process runs itself is claimed in the append's statement,
/// with no outbox row: no other runner takes it while the claim holds. A runner that
/// dies stops extending the claim; once it lapses the sweeper is shown the workflow,
/// once per lapse.
#[tokio::test]
async fn an_eager_attempt_is_claimed_in_its_append_and_shown_to_the_sweeper_once_it_lapses() {
    let Some((_, store)) =
        store("an_eager_attempt_is_claimed_in_its_append_and_shown_to_the_sweeper_once_it_lapses")
            .await
    else {
        return;
    };
    let id = unique_id("eager-attempt");
    let prefix = format!("{id}.events.");
    let mut batch = AppendBatch::new(id.clone(), Seq::FIRST, vec![event(1)]);
    batch.claimed_attempts = Some(ClaimedAttempts {
        runner: "eager-runner".into(),
        lease: Duration::from_millis(1500),
        attempts: vec![(Seq::FIRST, 1)],
    });
    let workflow = NewWorkflow {
        events_subject: Some(format!("{prefix}{id}")),
        ..new_workflow("test")
    };
    let appended = store.create_workflow(&workflow, batch).await.unwrap();
    assert!(appended.outbox.is_empty());
    assert!(matches!(
        store
            .claim_attempt(&claim(&id, "nats-runner"), Duration::from_secs(1))
            .await
            .unwrap(),
        Claimed::HeldElsewhere { .. }
    ));
    assert!(store
        .extend_attempt_claim(&claim(&id, "eager-runner"), Duration::from_millis(1500))
        .await
        .unwrap());
    let resweep = Duration::from_secs(60);
    let sweep = |resweep: Duration| {
        let (store, prefix) = (&store, &prefix);
        async move {
            store
                .sweep_lapsed_claims(prefix, resweep, 10)
                .await
                .unwrap()
        }
    };
    assert!(sweep(resweep).await.is_empty());

    // The runner dies: nobody extends the claim. Whatever else moves the workflow
    // meanwhile (a sibling's step), the lapse is shown once.
    tokio::time::sleep(Duration::from_millis(1700)).await;
    store.touch(&id).await.unwrap();
    assert_eq!(sweep(resweep).await, vec![id.clone()]);
    assert!(sweep(resweep).await.is_empty(), "a lapse is swept once");
    // Nobody took it over: shown again after `resweep`.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(sweep(Duration::from_millis(200)).await, vec![id.clone()]);
    // The runner the sweeper's task reaches takes the attempt over; should it die
    // too, its lapse is a new one.
    assert_eq!(
        store
            .claim_attempt(&claim(&id, "nats-runner"), Duration::from_millis(300))
            .await
            .unwrap(),
        Claimed::Taken
    );
    assert!(sweep(resweep).await.is_empty());
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(sweep(resweep).await, vec![id.clone()]);
}

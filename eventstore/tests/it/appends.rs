//! Appending, reading, listing and the ledger, one workflow at a time.

use hcpflow_engine::{ChainHash, Checkpoint, Seq, WorkflowId, WorkflowStatus};
use hcpflow_eventstore::{
    AppendBatch, Error, LedgerAction, LedgerEntry, NewWorkflow, OutboxMessage, WorkflowFilter,
};

use crate::support::{event, new_workflow, store, unique_id, workflow_with_events};

#[tokio::test]
async fn create_then_append_chains_from_genesis() {
    let Some((_, store)) = store("create_then_append_chains_from_genesis").await else {
        return;
    };
    let id = unique_id("chain");
    let first = store
        .create_workflow(
            &new_workflow("test"),
            AppendBatch::new(id.clone(), Seq::FIRST, vec![event(1)]),
        )
        .await
        .unwrap();
    assert_eq!(first.events[0].prev_hash, ChainHash::GENESIS);
    assert_eq!(first.next_seq, Seq::new(2).unwrap());

    let second = store
        .append(
            AppendBatch::new(id.clone(), first.next_seq, vec![event(2), event(3)])
                .with_status(WorkflowStatus::Completed),
        )
        .await
        .unwrap();
    assert_eq!(second.events[0].prev_hash, first.head_hash);
    assert_eq!(second.next_seq.get(), 4);

    let summary = store.get_workflow(&id).await.unwrap();
    assert_eq!(summary.status, WorkflowStatus::Completed);
    assert_eq!(summary.next_seq.get(), 4);
    assert_eq!(summary.head_hash, second.head_hash);

    let verified = store.verify_history(&id).await.unwrap();
    assert_eq!(verified.events, 3);
    assert_eq!(verified.head_hash, second.head_hash);
    let history = store.read_full_history(&id).await.unwrap();
    assert_eq!(history[2].data().unwrap()["n"], 3);
}

#[tokio::test]
async fn stale_duplicate_and_unknown_appends_are_typed_errors() {
    let Some((_, store)) = store("stale_duplicate_and_unknown_appends_are_typed_errors").await
    else {
        return;
    };
    let id = workflow_with_events(&store, "errors", 3).await;

    let stale = store
        .append(AppendBatch::new(
            id.clone(),
            Seq::new(2).unwrap(),
            vec![event(9)],
        ))
        .await;
    assert!(
        matches!(
            stale,
            Err(Error::Conflict {
                actual: Some(4),
                ..
            })
        ),
        "{stale:?}"
    );
    assert!(stale.unwrap_err().is_retryable());

    let again = store
        .create_workflow(
            &new_workflow("test"),
            AppendBatch::new(id.clone(), Seq::FIRST, vec![event(1)]),
        )
        .await;
    assert!(
        matches!(again, Err(Error::AlreadyExists { .. })),
        "{again:?}"
    );

    let missing = unique_id("missing");
    let unknown = store
        .append(AppendBatch::new(
            missing.clone(),
            Seq::FIRST,
            vec![event(1)],
        ))
        .await;
    assert!(
        matches!(unknown, Err(Error::NotFound(ref m)) if *m == missing),
        "{unknown:?}"
    );

    let empty = store
        .append(AppendBatch::new(id.clone(), Seq::new(4).unwrap(), vec![]))
        .await;
    assert!(matches!(empty, Err(Error::InvalidInput(_))), "{empty:?}");

    // Nothing of the failed appends was written.
    assert_eq!(store.verify_history(&id).await.unwrap().events, 3);
}

/// A start without a concurrency key is one statement (the index row and the first
/// events together): of two racing starts of one id exactly one writes, and the other is
/// told who was there first, with nothing of its own written.
#[tokio::test]
async fn racing_starts_of_one_id_write_one_history() {
    let Some((_, store)) = store("racing_starts_of_one_id_write_one_history").await else {
        return;
    };
    for round in 0..20 {
        let id = unique_id(&format!("race-{round}"));
        let start = |digest: &str, events: Vec<_>| {
            let workflow = NewWorkflow {
                input_digest: Some(digest.to_owned()),
                ..new_workflow("test")
            };
            let batch = AppendBatch::new(id.clone(), Seq::FIRST, events);
            let store = store.clone();
            async move { store.create_workflow(&workflow, batch).await }
        };
        let (a, b) = tokio::join!(
            start("digest-a", vec![event(1)]),
            start("digest-b", vec![event(1), event(2)])
        );
        let (winner, loser_seen) = match (&a, &b) {
            (Ok(_), Err(Error::AlreadyExists { input_digest, .. })) => ("digest-a", input_digest),
            (Err(Error::AlreadyExists { input_digest, .. }), Ok(_)) => ("digest-b", input_digest),
            other => panic!("round {round}: not one start and one refusal: {other:?}"),
        };
        assert_eq!(loser_seen.as_deref(), Some(winner), "round {round}");
        let history = store.read_full_history(&id).await.unwrap();
        let expected = if winner == "digest-a" { 1 } else { 2 };
        assert_eq!(history.len(), expected, "round {round}: {history:?}");
        let index = store.get_workflow(&id).await.unwrap();
        assert_eq!(index.next_seq.get(), expected as u64 + 1, "round {round}");
    }
}

#[tokio::test]
async fn history_pages_end_with_no_next() {
    let Some((_, store)) = store("history_pages_end_with_no_next").await else {
        return;
    };
    let id = workflow_with_events(&store, "paging", 25).await;
    let mut sizes = Vec::new();
    let mut from = Some(Seq::FIRST);
    let mut seen = Vec::new();
    while let Some(start) = from {
        let page = store.read_history(&id, start, 10).await.unwrap();
        sizes.push(page.events.len());
        seen.extend(page.events.iter().map(|e| e.seq.get()));
        from = page.next_from;
    }
    assert_eq!(sizes, vec![10, 10, 5]);
    assert_eq!(seen, (1..=25).collect::<Vec<_>>());
    let tail = store
        .read_history(&id, Seq::new(21).unwrap(), 10)
        .await
        .unwrap();
    assert_eq!(tail.events.len(), 5);
    assert_eq!(tail.next_from, None);
}

#[tokio::test]
async fn listing_filters_and_pages_newest_first() {
    let Some((_, store)) = store("listing_filters_and_pages_newest_first").await else {
        return;
    };
    let workflow_type = unique_id("type").to_string();
    let key = unique_id("cluster").to_string();
    let mut ids: Vec<WorkflowId> = Vec::new();
    for (n, status) in [
        WorkflowStatus::Running,
        WorkflowStatus::Pending,
        WorkflowStatus::Running,
    ]
    .into_iter()
    .enumerate()
    {
        let id = unique_id("listed");
        let workflow = NewWorkflow {
            workflow_type: workflow_type.clone(),
            status,
            concurrency_key: (n > 0).then(|| key.clone()),
            parent_id: None,
            input_digest: None,
            events_subject: None,
            tenant: hcpflow_engine::TenantId::default_tenant(),
        };
        store
            .create_workflow(
                &workflow,
                AppendBatch::new(id.clone(), Seq::FIRST, vec![event(1)]),
            )
            .await
            .unwrap();
        ids.push(id);
    }
    let by_type = WorkflowFilter {
        workflow_type: Some(workflow_type.clone()),
        ..Default::default()
    };
    let first = store.list_workflows(&by_type, 2, None).await.unwrap();
    assert_eq!(first.workflows.len(), 2);
    let cursor = first.cursor.clone().expect("a second page");
    let second = store
        .list_workflows(&by_type, 2, Some(&cursor))
        .await
        .unwrap();
    assert_eq!(second.workflows.len(), 1);
    assert_eq!(second.cursor, None);
    let listed: Vec<WorkflowId> = first
        .workflows
        .iter()
        .chain(&second.workflows)
        .map(|w| w.workflow_id.clone())
        .collect();
    let mut newest_first = ids.clone();
    newest_first.reverse();
    assert_eq!(listed, newest_first);

    let running = WorkflowFilter {
        status: Some(WorkflowStatus::Running),
        ..by_type.clone()
    };
    // The third asked to run, but the second holds its concurrency key: it waits.
    assert_eq!(
        store
            .list_workflows(&running, 10, None)
            .await
            .unwrap()
            .workflows
            .len(),
        1
    );
    let pending = WorkflowFilter {
        status: Some(WorkflowStatus::Pending),
        ..by_type.clone()
    };
    assert_eq!(
        store
            .list_workflows(&pending, 10, None)
            .await
            .unwrap()
            .workflows
            .len(),
        2
    );
    let keyed = WorkflowFilter {
        concurrency_key: Some(key),
        ..by_type
    };
    assert_eq!(
        store
            .list_workflows(&keyed, 10, None)
            .await
            .unwrap()
            .workflows
            .len(),
        2
    );

    let bad = store
        .list_workflows(&WorkflowFilter::default(), 10, Some("not-a-cursor"))
        .await;
    assert!(matches!(bad, Err(Error::InvalidInput(_))), "{bad:?}");
}

#[tokio::test]
async fn ledger_rows_are_written_with_the_append() {
    let Some((_, store)) = store("ledger_rows_are_written_with_the_append").await else {
        return;
    };
    let id = workflow_with_events(&store, "ledger", 1).await;
    let cluster = unique_id("cl").to_string();
    let entry = |action, resource: &str| LedgerEntry {
        seq: Seq::new(2).unwrap(),
        attempt: 1,
        action,
        provider: "aws".into(),
        kind: "ec2:vpc".into(),
        resource_id: resource.into(),
        region: Some("us-east-1".into()),
        cluster: Some(cluster.clone()),
        owner: None,
    };
    let observed = LedgerEntry {
        action: LedgerAction::Observed,
        kind: "ec2:vpc-endpoint".into(),
        owner: Some("hypershift".into()),
        ..entry(LedgerAction::Observed, "vpce-1")
    };
    store
        .append(
            AppendBatch::new(id.clone(), Seq::new(2).unwrap(), vec![event(2)]).with_ledger(vec![
                entry(LedgerAction::Created, "vpc-1"),
                entry(LedgerAction::Deleted, "vpc-1"),
                observed.clone(),
            ]),
        )
        .await
        .unwrap();
    let rows = store.ledger_for_workflow(&id).await.unwrap();
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0].entry, entry(LedgerAction::Created, "vpc-1"));
    assert_eq!(rows[1].entry.action, LedgerAction::Deleted);
    assert_eq!(rows[2].entry, observed);
    assert_eq!(store.ledger_for_cluster(&cluster).await.unwrap().len(), 3);

    // A conflicting append writes no ledger row.
    let lost = store
        .append(
            AppendBatch::new(id.clone(), Seq::new(2).unwrap(), vec![event(2)])
                .with_ledger(vec![entry(LedgerAction::Created, "vpc-2")]),
        )
        .await;
    assert!(matches!(lost, Err(Error::Conflict { .. })));
    assert_eq!(store.ledger_for_workflow(&id).await.unwrap().len(), 3);
}

#[tokio::test]
async fn engine_events_round_trip_through_the_store() {
    use hcpflow_engine::event::{Event, SignalReceived, TimerStarted, WorkflowStarted};
    use hcpflow_engine::Timestamp;
    use hcpflow_eventstore::NewEvent;

    let Some((_, store)) = store("engine_events_round_trip_through_the_store").await else {
        return;
    };
    let id = unique_id("engine");
    let events: Vec<Event> = vec![
        WorkflowStarted {
            workflow_type: "noop_chain".into(),
            input: serde_json::json!({"steps": 2}),
            concurrency_key: Some("demo".into()),
            parent: None,
        }
        .into(),
        TimerStarted {
            duration_ms: 5,
            fire_at: Timestamp::from_millis(1_700_000_000_005),
        }
        .into(),
        SignalReceived {
            name: "go".into(),
            payload: serde_json::json!({"n": 1.5}),
        }
        .into(),
    ];
    let batch = AppendBatch::new(
        id.clone(),
        Seq::FIRST,
        events.iter().map(NewEvent::from).collect(),
    );
    store
        .create_workflow(&new_workflow("noop_chain"), batch)
        .await
        .unwrap();
    let history = store.read_full_history(&id).await.unwrap();
    let decoded: Vec<Event> = history
        .iter()
        .map(|e| e.to_history_event().unwrap().event)
        .collect();
    assert_eq!(decoded, events);

    // A kind this code does not know is an explicit error, not a skip.
    let unknown = AppendBatch::new(
        id.clone(),
        Seq::new(4).unwrap(),
        vec![NewEvent::new("FromTheFuture", serde_json::json!({"v": 1}))],
    );
    store.append(unknown).await.unwrap();
    let stored = store
        .read_history(&id, Seq::new(4).unwrap(), 1)
        .await
        .unwrap();
    assert!(matches!(
        stored.events[0].to_history_event(),
        Err(Error::Decode { seq: 4, .. })
    ));
}

#[tokio::test]
async fn a_concurrency_key_runs_one_workflow_at_a_time_in_order() {
    let Some((_, store)) = store("a_concurrency_key_runs_one_workflow_at_a_time_in_order").await
    else {
        return;
    };
    let key = unique_id("key").to_string();
    let keyed = |key: &str| NewWorkflow {
        workflow_type: "test".into(),
        status: WorkflowStatus::Running,
        concurrency_key: Some(key.to_owned()),
        parent_id: None,
        input_digest: None,
        events_subject: None,
        tenant: hcpflow_engine::TenantId::default_tenant(),
    };
    let mut ids = Vec::new();
    let mut statuses = Vec::new();
    for _ in 0..3 {
        let id = unique_id("keyed");
        let created = store
            .create_workflow(
                &keyed(&key),
                AppendBatch::new(id.clone(), Seq::FIRST, vec![event(1)]),
            )
            .await
            .unwrap();
        statuses.push(created.status);
        ids.push(id);
    }
    assert_eq!(
        statuses,
        vec![
            Some(WorkflowStatus::Running),
            Some(WorkflowStatus::Pending),
            Some(WorkflowStatus::Pending)
        ]
    );
    // The first finishing promotes the second (not the third).
    let done = store
        .append(
            AppendBatch::new(ids[0].clone(), Seq::new(2).unwrap(), vec![event(2)])
                .with_status(WorkflowStatus::Completed),
        )
        .await
        .unwrap();
    assert_eq!(done.promoted.as_ref(), Some(&ids[1]));
    assert_eq!(
        store.get_workflow(&ids[1]).await.unwrap().status,
        WorkflowStatus::Running
    );
    assert_eq!(
        store.get_workflow(&ids[2]).await.unwrap().status,
        WorkflowStatus::Pending
    );
    // A non-terminal append promotes nobody.
    let step = store
        .append(
            AppendBatch::new(ids[1].clone(), Seq::new(2).unwrap(), vec![event(2)])
                .with_status(WorkflowStatus::Running),
        )
        .await
        .unwrap();
    assert_eq!(step.promoted, None);
}

#[tokio::test]
async fn an_ended_workflow_is_never_marked_blocked() {
    let Some((_, store)) = store("an_ended_workflow_is_never_marked_blocked").await else {
        return;
    };
    let (_, ended) = ended_workflows(&store, "ended", 1).await;
    let id = ended[0].0.clone();
    // A late task of an old process finds it cannot replay the history.
    store.set_blocked(&id, "nondeterminism").await.unwrap();
    let summary = store.get_workflow(&id).await.unwrap();
    assert_eq!(summary.status, WorkflowStatus::Completed);
    assert_eq!(summary.blocked_reason, None);
}

#[tokio::test]
async fn refused_heads_do_not_fill_every_scan_for_signing() {
    let Some((_, store)) = store("refused_heads_do_not_fill_every_scan_for_signing").await else {
        return;
    };
    // Two ended workflows of one deployment (its own events prefix).
    let (prefix, ended) = ended_workflows(&store, "sign", 2).await;
    let ids: Vec<WorkflowId> = ended.into_iter().map(|(id, _)| id).collect();
    let every = std::time::Duration::from_secs(60);
    let scan = |refused: Vec<(hcpflow_engine::WorkflowId, Seq)>| {
        let (store, prefix) = (store.clone(), prefix.clone());
        async move {
            store
                .unsigned_heads(&prefix, every, 1, &refused)
                .await
                .unwrap()
                .into_iter()
                .map(Result::unwrap)
                .collect::<Vec<_>>()
        }
    };
    let first = scan(Vec::new()).await;
    assert_eq!(first.len(), 1);
    // The checkpointer refused that head (its chain does not verify): the next scan of
    // the same size reaches the other one instead of the refused one again.
    let next = scan(vec![(first[0].workflow_id.clone(), first[0].seq)]).await;
    assert_eq!(next.len(), 1);
    assert_ne!(next[0].workflow_id, first[0].workflow_id);
    assert!(ids.contains(&next[0].workflow_id));
}

#[tokio::test]
async fn a_batch_of_checkpoints_is_stored_in_one_go_and_once() {
    let Some((_, store)) = store("a_batch_of_checkpoints_is_stored_in_one_go_and_once").await
    else {
        return;
    };
    let (prefix, heads) = ended_workflows(&store, "batch", 3).await;
    let every = std::time::Duration::from_secs(60);
    let unsigned = || async {
        let mut ids: Vec<WorkflowId> = store
            .unsigned_heads(&prefix, every, 10, &[])
            .await
            .unwrap()
            .into_iter()
            .map(|head| head.unwrap().workflow_id)
            .collect();
        ids.sort();
        ids
    };
    let signed = |picked: &[usize]| -> Vec<(Checkpoint, OutboxMessage)> {
        picked
            .iter()
            .map(|&i| {
                let (id, head_hash) = &heads[i];
                let checkpoint = Checkpoint {
                    workflow_id: id.clone(),
                    seq: Seq::FIRST,
                    head_hash: *head_hash,
                    key_id: "test-key".to_owned(),
                    signature: vec![i as u8; 64],
                };
                let witness = OutboxMessage {
                    subject: format!("test.audit.{id}"),
                    msg_id: format!("ck-{id}-1"),
                    payload: vec![i as u8],
                };
                (checkpoint, witness)
            })
            .collect()
    };
    let lease = std::time::Duration::from_secs(30);

    // Two of the three, given out of id order: both stored, each with its witness.
    let first = signed(&[2, 0]);
    let rows = store
        .record_checkpoints(&first, "signer", lease)
        .await
        .unwrap();
    let positions: Vec<usize> = rows.iter().map(|&(i, _)| i).collect();
    assert_eq!(positions.len(), 2);
    assert!(positions.contains(&0) && positions.contains(&1));
    assert_ne!(rows[0].1, rows[1].1);
    assert_eq!(unsigned().await, vec![heads[1].0.clone()]);
    // Each id is a prefix of its own: one waits for its checkpoint, the other has one.
    let waiting = store
        .count_signing_backlog(heads[1].0.as_str())
        .await
        .unwrap();
    let signed_one = store
        .count_signing_backlog(heads[0].0.as_str())
        .await
        .unwrap();
    assert_eq!((waiting, signed_one), ((1, 0), (0, 1)));
    for (checkpoint, _) in &first {
        let stored = store
            .latest_checkpoint(&checkpoint.workflow_id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&stored.checkpoint, checkpoint);
    }

    // Again with the third: only the new one is stored and gets a witness to publish.
    let again = signed(&[0, 1, 2]);
    let rows = store
        .record_checkpoints(&again, "signer", lease)
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].0, 1);
    assert!(unsigned().await.is_empty());
    assert!(store
        .record_checkpoints(&[], "signer", lease)
        .await
        .unwrap()
        .is_empty());
}

/// `count` workflows that ended at their first event, of one deployment of their own (the
/// events prefix returned), with their head hashes.
async fn ended_workflows(
    store: &hcpflow_eventstore::EventStore,
    label: &str,
    count: usize,
) -> (String, Vec<(WorkflowId, ChainHash)>) {
    let prefix = format!("{}.events.", unique_id(label).as_str().replace('-', ""));
    let mut heads = Vec::new();
    for _ in 0..count {
        let id = unique_id(label);
        let mut workflow = new_workflow("test");
        workflow.status = WorkflowStatus::Completed;
        workflow.events_subject = Some(format!("{prefix}{id}"));
        let created = store
            .create_workflow(
                &workflow,
                AppendBatch::new(id.clone(), Seq::FIRST, vec![event(1)])
                    .with_status(WorkflowStatus::Completed),
            )
            .await
            .unwrap();
        heads.push((id, created.head_hash));
    }
    (prefix, heads)
}

//! The cluster registry: one live cluster per name, idempotent registration, a name
//! free again once its cluster is destroyed.

use std::sync::Arc;

use hcpflow_engine::WorkflowId;
use hcpflow_eventstore::registry::{ClusterState, Registration};

use crate::support::{store, unique_id};

fn unique(prefix: &str) -> String {
    unique_id(prefix).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_live_cluster_per_name_until_it_is_destroyed() {
    let Some((_, store)) = store("one_live_cluster_per_name_until_it_is_destroyed").await else {
        return;
    };
    let name = unique("reg");
    let first = WorkflowId::new(unique("create-a")).unwrap();
    let second = WorkflowId::new(unique("create-b")).unwrap();

    let registered = store
        .register_cluster(&name, "infra-a", "clusters", &first)
        .await
        .unwrap();
    let Registration::Registered(record) = registered else {
        panic!("the first create registers the name")
    };
    assert_eq!(record.state, ClusterState::Creating);
    // The same create again (a retried activity) is the same registration.
    assert_eq!(
        store
            .register_cluster(&name, "infra-a", "clusters", &first)
            .await
            .unwrap(),
        Registration::Registered(record.clone())
    );
    // Another create of the live name finds it taken, by whom.
    match store
        .register_cluster(&name, "infra-b", "clusters", &second)
        .await
        .unwrap()
    {
        Registration::Taken(other) => assert_eq!(other.create_workflow_id, first),
        other => panic!("expected the name to be taken, got {other:?}"),
    }
    store
        .set_cluster_state(&first, ClusterState::Ready)
        .await
        .unwrap();
    assert_eq!(
        store.live_cluster(&name).await.unwrap().unwrap().state,
        ClusterState::Ready
    );

    // Destroyed: the name is free, and a new create gets it.
    store
        .set_cluster_state(&first, ClusterState::Destroyed)
        .await
        .unwrap();
    assert!(store.live_cluster(&name).await.unwrap().is_none());
    assert!(matches!(
        store
            .register_cluster(&name, "infra-b", "clusters", &second)
            .await
            .unwrap(),
        Registration::Registered(_)
    ));
    let listed = store.list_clusters(None, true, None, 1000).await.unwrap();
    assert_eq!(listed.iter().filter(|c| c.name == name).count(), 2);
    let named = store
        .list_clusters(Some(&name), true, None, 10)
        .await
        .unwrap();
    assert_eq!(named.len(), 2);
    assert_eq!(named[0].state, ClusterState::Creating, "the live one first");
    let live_only = store
        .list_clusters(Some(&name), false, None, 10)
        .await
        .unwrap();
    assert_eq!(live_only.len(), 1);

    // Racing creates of a fresh name: exactly one wins.
    let raced = unique("race");
    let store = Arc::new(store);
    let tasks: Vec<_> = (0..6)
        .map(|n| {
            let store = store.clone();
            let raced = raced.clone();
            tokio::spawn(async move {
                let id = WorkflowId::new(format!("{raced}-{n}")).unwrap();
                store
                    .register_cluster(&raced, "infra", "clusters", &id)
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut winners = 0;
    for task in tasks {
        if matches!(task.await.unwrap(), Registration::Registered(_)) {
            winners += 1;
        }
    }
    assert_eq!(winners, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_belongs_to_the_tenant_of_its_create_and_a_tenant_never_changes() {
    let Some((_, store)) =
        store("a_cluster_belongs_to_the_tenant_of_its_create_and_a_tenant_never_changes").await
    else {
        return;
    };
    use hcpflow_engine::{Seq, TenantId};
    use hcpflow_eventstore::{AppendBatch, WorkflowFilter};
    let acme = TenantId::new("acme").unwrap();
    let globex = TenantId::new("globex").unwrap();
    let create = crate::support::unique_id("tenant-create");
    let mut workflow = crate::support::new_workflow("create_hosted_cluster");
    workflow.tenant = acme.clone();
    let batch = AppendBatch::new(create.clone(), Seq::FIRST, vec![crate::support::event(1)]);
    store.create_workflow(&workflow, batch).await.unwrap();
    assert_eq!(store.get_workflow(&create).await.unwrap().tenant, acme);

    let name = unique("tenant-reg");
    store
        .register_cluster(&name, "infra-t", "clusters", &create)
        .await
        .unwrap();
    assert_eq!(
        store.live_cluster(&name).await.unwrap().unwrap().tenant,
        acme
    );
    let of = |tenant: &TenantId| {
        let tenant = tenant.clone();
        let store = store.clone();
        let name = name.clone();
        async move {
            store
                .list_clusters(Some(&name), true, Some(&tenant), 10)
                .await
                .unwrap()
                .len()
        }
    };
    assert_eq!(of(&acme).await, 1);
    assert_eq!(of(&globex).await, 0);
    let filter = |tenant: &TenantId| WorkflowFilter {
        tenant: Some(tenant.clone()),
        ..WorkflowFilter::default()
    };
    let listed = store
        .list_workflows(&filter(&globex), 1000, None)
        .await
        .unwrap();
    assert!(listed.workflows.iter().all(|w| w.workflow_id != create));
    let listed = store
        .list_workflows(&filter(&acme), 1000, None)
        .await
        .unwrap();
    assert!(listed.workflows.iter().any(|w| w.workflow_id == create));

    // Not even the server's own statements can move a workflow to another tenant.
    let moved = sqlx::query("UPDATE workflows SET tenant = 'globex' WHERE workflow_id = $1")
        .bind(create.as_str())
        .execute(store.pool())
        .await;
    assert!(moved.is_err(), "{moved:?}");
    assert_eq!(store.get_workflow(&create).await.unwrap().tenant, acme);
}

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
    let listed = store.list_clusters(None, true, 1000).await.unwrap();
    assert_eq!(listed.iter().filter(|c| c.name == name).count(), 2);
    let named = store.list_clusters(Some(&name), true, 10).await.unwrap();
    assert_eq!(named.len(), 2);
    assert_eq!(named[0].state, ClusterState::Creating, "the live one first");
    let live_only = store.list_clusters(Some(&name), false, 10).await.unwrap();
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

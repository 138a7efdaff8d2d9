//! The cluster-registry activities (`registry.*`), run on the event store: they give
//! the HyperShift workflows the registry without giving workflow code any I/O.

use std::sync::Arc;

use hcpflow_engine::{Activity, ActivityFailure, Event, TenantId, WorkflowId};
use hcpflow_eventstore::registry::{ClusterRecord, ClusterState, Registration};
use hcpflow_eventstore::{Error as StoreError, EventStore};
use hcpflow_hypershift::registry::{
    self as contract, FindCluster, LiveCluster, MarkCluster, PendingCompensation, RegisterCluster,
    RegisteredCluster,
};
use hcpflow_hypershift::Delete;
use serde_json::Value;

use crate::catalog::activities::ActivityRegistry;

fn store_failure(doing: &str, error: StoreError) -> ActivityFailure {
    let message = format!("{doing}: {error}");
    if error.is_retryable() {
        ActivityFailure::retryable("Database", message)
    } else {
        ActivityFailure::permanent("Database", message)
    }
}

fn workflow_id(text: &str) -> Result<WorkflowId, ActivityFailure> {
    WorkflowId::new(text).map_err(|e| ActivityFailure::permanent("InvalidInput", e.to_string()))
}

fn registered(record: &ClusterRecord) -> RegisteredCluster {
    RegisteredCluster {
        name: record.name.clone(),
        infra_id: record.infra_id.clone(),
        namespace: record.namespace.clone(),
        create_workflow_id: record.create_workflow_id.to_string(),
    }
}

/// The tenant of the workflow an activity runs for: it sees only its tenant's clusters.
pub(crate) async fn tenant_of(
    store: &EventStore,
    caller: &WorkflowId,
) -> Result<TenantId, ActivityFailure> {
    store
        .get_workflow(caller)
        .await
        .map(|summary| summary.tenant)
        .map_err(|e| store_failure("reading the calling workflow", e))
}

async fn register(
    store: &EventStore,
    caller: &WorkflowId,
    request: RegisterCluster,
) -> Result<RegisteredCluster, ActivityFailure> {
    let create = workflow_id(&request.create_workflow_id)?;
    match store
        .register_cluster(&request.name, &request.infra_id, &request.namespace, &create)
        .await
        .map_err(|e| store_failure("registering the cluster", e))?
    {
        Registration::Registered(record) => Ok(registered(&record)),
        // Another tenant's cluster: nothing about it but that the name is taken.
        Registration::Taken(other) if other.tenant != tenant_of(store, caller).await? => {
            Err(ActivityFailure::permanent(
                "Conflict",
                format!("cluster name {} is taken", other.name),
            ))
        }
        Registration::Taken(other) => Err(ActivityFailure::permanent(
            "Conflict",
            format!(
                "cluster {} already exists (infra id {}, state {}, created by workflow {}); destroy it first",
                other.name,
                other.infra_id,
                other.state.as_str(),
                other.create_workflow_id
            ),
        )),
    }
}

async fn mark(
    store: &EventStore,
    create: &str,
    state: ClusterState,
) -> Result<(), ActivityFailure> {
    match store.set_cluster_state(&workflow_id(create)?, state).await {
        Ok(_) => Ok(()),
        // A release of a registration that never happened has nothing to do.
        Err(StoreError::NotFound(_)) if state == ClusterState::Destroyed => Ok(()),
        Err(e) => Err(store_failure("updating the cluster registry", e)),
    }
}

/// The live cluster of the name, if it is the calling workflow's tenant's: a scale or
/// destroy never reaches another tenant's cluster, even one created after it started.
async fn find(
    store: &EventStore,
    caller: &WorkflowId,
    request: FindCluster,
) -> Result<LiveCluster, ActivityFailure> {
    let tenant = tenant_of(store, caller).await?;
    let record = store
        .live_cluster(&request.name)
        .await
        .map_err(|e| store_failure("reading the cluster registry", e))?
        .filter(|record| record.tenant == tenant)
        .ok_or_else(|| {
            ActivityFailure::permanent(
                "NotFound",
                format!("no live cluster named {}", request.name),
            )
        })?;
    let stored = store
        .read_full_history(&record.create_workflow_id)
        .await
        .map_err(|e| store_failure("reading the create's history", e))?;
    let history = stored
        .iter()
        .map(|event| event.to_history_event())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| store_failure("decoding the create's history", e))?;
    let create_input = history
        .iter()
        .find_map(|event| match &event.event {
            Event::WorkflowStarted(started) => Some(started.input.clone()),
            _ => None,
        })
        .unwrap_or(Value::Null);
    let compensations = PendingCompensation::of(&history);
    Ok(LiveCluster {
        cluster: registered(&record),
        state: record.state.as_str().to_owned(),
        create_input,
        compensations,
    })
}

/// Every registry activity type.
pub const TYPES: &[&str] = &[
    RegisterCluster::TYPE,
    <Delete<RegisteredCluster> as Activity>::TYPE,
    MarkCluster::TYPE,
    FindCluster::TYPE,
];

async fn run(
    store: &EventStore,
    activity_type: &str,
    caller: &WorkflowId,
    input: Value,
) -> Result<Value, ActivityFailure> {
    match activity_type {
        RegisterCluster::TYPE => ActivityFailure::encode_output(
            register(
                store,
                caller,
                ActivityFailure::decode_input(activity_type, input)?,
            )
            .await?,
        ),
        t if t == <Delete<RegisteredCluster> as Activity>::TYPE => {
            let Delete(cluster): Delete<RegisteredCluster> =
                ActivityFailure::decode_input(activity_type, input)?;
            ActivityFailure::encode_output(
                mark(store, &cluster.create_workflow_id, ClusterState::Destroyed).await?,
            )
        }
        MarkCluster::TYPE => {
            let request: MarkCluster = ActivityFailure::decode_input(activity_type, input)?;
            let state = match request.state {
                contract::ClusterState::Ready => ClusterState::Ready,
                contract::ClusterState::Destroying => ClusterState::Destroying,
                contract::ClusterState::Destroyed => ClusterState::Destroyed,
                contract::ClusterState::Failed => ClusterState::Failed,
            };
            ActivityFailure::encode_output(mark(store, &request.create_workflow_id, state).await?)
        }
        FindCluster::TYPE => ActivityFailure::encode_output(
            find(
                store,
                caller,
                ActivityFailure::decode_input(activity_type, input)?,
            )
            .await?,
        ),
        other => Err(ActivityFailure::permanent(
            "UnknownActivity",
            format!("{other} is not a registry activity"),
        )),
    }
}

/// Registers every registry activity type to run on `store`.
pub fn register_all(activities: &mut ActivityRegistry, store: Arc<EventStore>) {
    for activity_type in TYPES {
        let store = store.clone();
        activities.register(activity_type, move |input| {
            let store = store.clone();
            async move { run(&store, activity_type, &input.workflow_id, input.input).await }
        });
    }
}

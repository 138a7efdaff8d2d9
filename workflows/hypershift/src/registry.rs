//! The cluster-registry activities (run by the workers, on the event store): register a
//! name for a create, move a cluster through its states, and find the live cluster of
//! a name with what its create left to undo.

use hcpflow_engine::history::{registered_compensations, CompensationState};
use hcpflow_engine::{Activity, ActivityOptions, HistoryEvent, RetryPolicy};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Delete;

/// How registry activities run: the database answers quickly; retried for a few
/// minutes while it is away.
pub fn options() -> ActivityOptions {
    let mut options = ActivityOptions::default().with_retry(RetryPolicy {
        initial_interval_ms: 500,
        backoff_coefficient: 2.0,
        max_interval_ms: 15_000,
        max_attempts: 20,
        non_retryable: Vec::new(),
    });
    options.start_to_close_timeout_ms = 60_000;
    options
}

macro_rules! registry_activity {
    ($request:ty => $output:ty, $name:literal) => {
        registry_activity!(@impl $request => $output, $name, false);
    };
    // `creates`: the call makes something, so a cancel waits for it.
    ($request:ty => $output:ty, $name:literal, creates) => {
        registry_activity!(@impl $request => $output, $name, true);
    };
    (@impl $request:ty => $output:ty, $name:literal, $creates:literal) => {
        impl Activity for $request {
            const TYPE: &'static str = $name;
            type Output = $output;
            const FINISHES_ON_CANCEL: bool = $creates;
            fn options(&self) -> ActivityOptions {
                options()
            }
        }
    };
}

/// Registers the cluster's name for this create. A live cluster of that name is a
/// permanent `Conflict` failure naming its create.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisterCluster {
    pub name: String,
    pub infra_id: String,
    pub namespace: String,
    pub create_workflow_id: String,
}

/// A registered cluster. Its compensation releases the name (state `destroyed`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisteredCluster {
    pub name: String,
    pub infra_id: String,
    pub namespace: String,
    pub create_workflow_id: String,
}

/// The states a workflow moves a cluster to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClusterState {
    Ready,
    Destroying,
    Destroyed,
    Failed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarkCluster {
    pub create_workflow_id: String,
    pub state: ClusterState,
}

/// Finds the live cluster of `name`; none is a permanent `NotFound` failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FindCluster {
    pub name: String,
}

/// A compensation the create registered and has not run (or ran and failed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingCompensation {
    pub registered_seq: u64,
    pub activity_type: String,
    pub input: Value,
    pub options: ActivityOptions,
}

impl PendingCompensation {
    /// The compensations `history` registered and did not run, or ran and failed: what
    /// a destroy still has to run (in [`crate::destroy::destroy_order`]).
    pub fn of(history: &[HistoryEvent]) -> Vec<PendingCompensation> {
        registered_compensations(history)
            .into_iter()
            .filter(|c| {
                matches!(
                    c.state,
                    CompensationState::NotRun | CompensationState::Failed(_)
                )
            })
            .map(|c| PendingCompensation {
                registered_seq: c.registered_seq.get(),
                activity_type: c.activity_type,
                input: c.input,
                options: c.options,
            })
            .collect()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LiveCluster {
    pub cluster: RegisteredCluster,
    /// `creating`, `ready`, `destroying` or `failed`.
    pub state: String,
    /// The create's input (secrets in it sealed).
    pub create_input: Value,
    /// In registration order.
    pub compensations: Vec<PendingCompensation>,
}

registry_activity!(RegisterCluster => RegisteredCluster, "registry.register_cluster", creates);
registry_activity!(Delete<RegisteredCluster> => (), "registry.release_cluster");
registry_activity!(MarkCluster => (), "registry.mark_cluster");
registry_activity!(FindCluster => LiveCluster, "registry.find_cluster");

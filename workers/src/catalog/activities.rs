//! Activity implementations by type name, and what an implementation is handed.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

pub use hcpflow_engine::Ledger;
use hcpflow_engine::{ActivityFailure, IdempotencyKey, Seq, WorkflowId};
use serde_json::Value;

/// What an activity implementation receives.
#[derive(Debug, Clone)]
pub struct ActivityInput {
    pub workflow_id: WorkflowId,
    pub scheduled_seq: Seq,
    pub attempt: u32,
    /// Pass as ClientToken / CallerReference and tag with it: the same for every attempt.
    pub idempotency_key: IdempotencyKey,
    pub input: Value,
    pub ledger: Ledger,
}

pub type ActivityFuture = Pin<Box<dyn Future<Output = Result<Value, ActivityFailure>> + Send>>;
type Handler = Arc<dyn Fn(ActivityInput) -> ActivityFuture + Send + Sync>;

#[derive(Default, Clone)]
pub struct ActivityRegistry {
    handlers: BTreeMap<String, Handler>,
}

impl fmt::Debug for ActivityRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.handlers.keys()).finish()
    }
}

impl ActivityRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn register<F, Fut>(&mut self, activity_type: &str, handler: F) -> &mut Self
    where
        F: Fn(ActivityInput) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, ActivityFailure>> + Send + 'static,
    {
        self.handlers.insert(
            activity_type.to_owned(),
            Arc::new(move |input| Box::pin(handler(input))),
        );
        self
    }

    pub fn get(&self, activity_type: &str) -> Option<Handler> {
        self.handlers.get(activity_type).cloned()
    }
}

//! The registry of workflow types: stable type names to workflow functions.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::context::WorkflowContext;
use crate::error::WorkflowError;

pub(crate) type WorkflowFuture = Pin<Box<dyn Future<Output = Result<Value, WorkflowError>>>>;
type ErasedWorkflow = Box<dyn Fn(WorkflowContext, Value) -> WorkflowFuture + Send + Sync>;

/// A type name was registered twice.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("workflow type {0:?} is already registered")]
pub struct DuplicateWorkflowType(pub String);

/// Workflow types by their stable name. The name is recorded in history and must never
/// change for a type that has running or audited workflows.
#[derive(Default)]
pub struct WorkflowRegistry {
    types: BTreeMap<String, ErasedWorkflow>,
}

impl fmt::Debug for WorkflowRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.types.keys()).finish()
    }
}

impl WorkflowRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `workflow` under `name`. Its input is decoded from JSON (a decoding
    /// error fails the workflow with `InvalidInput`) and its output encoded to JSON.
    pub fn register<I, O, F, Fut>(
        &mut self,
        name: &str,
        workflow: F,
    ) -> Result<&mut Self, DuplicateWorkflowType>
    where
        I: DeserializeOwned + 'static,
        O: Serialize + 'static,
        F: Fn(WorkflowContext, I) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, WorkflowError>> + 'static,
    {
        if self.types.contains_key(name) {
            return Err(DuplicateWorkflowType(name.to_owned()));
        }
        let erased: ErasedWorkflow = Box::new(move |ctx, raw_input| {
            let input = serde_json::from_value::<I>(raw_input);
            let run = input.map(|input| workflow(ctx, input));
            Box::pin(async move {
                let output = run
                    .map_err(|error| WorkflowError::invalid_input(error.to_string()))?
                    .await?;
                serde_json::to_value(output).map_err(|error| {
                    WorkflowError::failed(format!("workflow output does not encode: {error}"))
                })
            })
        });
        self.types.insert(name.to_owned(), erased);
        Ok(self)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.types.contains_key(name)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.types.keys().map(String::as_str)
    }

    pub(crate) fn start(
        &self,
        name: &str,
        ctx: WorkflowContext,
        input: Value,
    ) -> Option<WorkflowFuture> {
        self.types.get(name).map(|workflow| workflow(ctx, input))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn noop(_: WorkflowContext, _: Value) -> Result<(), WorkflowError> {
        Ok(())
    }

    #[test]
    fn a_type_name_is_registered_once() {
        let mut registry = WorkflowRegistry::new();
        registry.register("noop", noop).unwrap();
        assert_eq!(
            registry.register("noop", noop).err(),
            Some(DuplicateWorkflowType("noop".into()))
        );
        assert!(registry.contains("noop"));
        assert_eq!(registry.names().collect::<Vec<_>>(), vec!["noop"]);
    }
}

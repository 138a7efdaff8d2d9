//! A catalog of workflow types: the code of each (a [`WorkflowRegistry`]) and what
//! intake needs to know about it — how to validate its input, which fields are secrets,
//! which field is the concurrency key. Data the workflow crates export (see
//! `hcpflow_hypershift::catalog`), so a server, an audit and a replay test all build
//! the same catalog without depending on each other.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use crate::{
    scrub_quoted, DuplicateWorkflowType, WorkflowContext, WorkflowError, WorkflowRegistry,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// Checks a start input before anything is recorded; returns every problem found.
pub type Validator = fn(&Value) -> Result<(), Vec<String>>;

/// What intake knows about one workflow type.
#[derive(Debug, Clone)]
pub struct TypeInfo {
    pub validate: Validator,
    /// JSON pointers of string fields to seal at intake (`/pull_secret`).
    pub secret_pointers: Vec<String>,
    /// JSON pointer of the field whose value is the concurrency key (`/name`).
    pub concurrency_key_pointer: Option<String>,
    /// The concurrency key names a cluster this workflow creates: a start while that
    /// name is live in the cluster registry is refused with `conflict`.
    pub claims_cluster_name: bool,
    /// The concurrency key names a live cluster this workflow acts on: a start for a
    /// cluster of another tenant is refused with `not_found`.
    pub acts_on_cluster_name: bool,
    /// It destroys what another workflow made: started only through the API's
    /// `destroy` verb, which NATS permissions give to admins alone.
    pub destructive: bool,
}

impl TypeInfo {
    /// Validation only, no secrets, no concurrency key.
    pub fn plain(validate: Validator) -> Self {
        Self {
            validate,
            secret_pointers: Vec::new(),
            concurrency_key_pointer: None,
            claims_cluster_name: false,
            acts_on_cluster_name: false,
            destructive: false,
        }
    }
}

/// Decodes the input as `T`: the validator of types whose input struct says it all.
pub fn decodes_as<T: DeserializeOwned>(input: &Value) -> Result<(), Vec<String>> {
    serde_json::from_value::<T>(input.clone())
        .map(|_| ())
        .map_err(|error| vec![format!("input: {}", scrub_quoted(&error.to_string()))])
}

#[derive(Debug, Default)]
pub struct Catalog {
    registry: WorkflowRegistry,
    types: BTreeMap<String, TypeInfo>,
}

impl Catalog {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn register<I, O, F, Fut>(
        &mut self,
        name: &str,
        workflow: F,
        info: TypeInfo,
    ) -> Result<&mut Self, DuplicateWorkflowType>
    where
        I: DeserializeOwned + 'static,
        O: Serialize + 'static,
        F: Fn(WorkflowContext, I) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, WorkflowError>> + 'static,
    {
        self.registry.register(name, workflow)?;
        self.types.insert(name.to_owned(), info);
        Ok(self)
    }

    pub fn registry(&self) -> &WorkflowRegistry {
        &self.registry
    }

    pub fn info(&self, name: &str) -> Option<&TypeInfo> {
        self.types.get(name)
    }

    pub fn names(&self) -> Vec<String> {
        self.types.keys().cloned().collect()
    }

    /// The types started only through the `destroy` verb.
    pub fn destructive_names(&self) -> Vec<String> {
        self.types
            .iter()
            .filter(|(_, info)| info.destructive)
            .map(|(name, _)| name.clone())
            .collect()
    }

    pub fn shared(self) -> Arc<Self> {
        Arc::new(self)
    }
}

#[cfg(test)]
mod tests {
    use crate::scrub_quoted;

    #[test]
    fn quoted_values_are_elided() {
        assert_eq!(
            scrub_quoted("invalid type: string \"hunter2\", expected u32"),
            "invalid type: string \"…\", expected u32"
        );
        assert_eq!(
            scrub_quoted("missing field `steps`"),
            "missing field `steps`"
        );
    }
}

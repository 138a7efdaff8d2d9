//! The AWS activities (`hcpflow-aws`) registered under their type names, with each
//! attempt's scope built from what the activity worker hands it.

use std::sync::Arc;

use hcpflow_aws::{AwsActivities, Scope};

use crate::catalog::activities::ActivityRegistry;

/// Registers every AWS activity type to run with `aws`.
pub fn register(activities: &mut ActivityRegistry, aws: Arc<AwsActivities>) {
    for activity_type in hcpflow_aws::dispatch::TYPES {
        let aws = aws.clone();
        activities.register(activity_type, move |input| {
            let aws = aws.clone();
            async move {
                // Requests name their cluster by `infra_id`; a delete's ledger entry
                // carries the id of what it deletes instead.
                let cluster = input
                    .input
                    .get("infra_id")
                    .and_then(|id| id.as_str())
                    .map(str::to_owned);
                let scope = Scope {
                    workflow_id: &input.workflow_id,
                    idempotency_key: input.idempotency_key.as_str(),
                    region: &aws.clients.region,
                    cluster: cluster.as_deref(),
                    log: &input.ledger,
                };
                aws.run(activity_type, &scope, input.input).await
            }
        });
    }
}

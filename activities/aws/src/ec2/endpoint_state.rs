//! A VPC endpoint's state, as text: EC2 documents the states in lower case (`deleted`)
//! while the SDK's enum spells them capitalised, so every check compares lower case.

use aws_sdk_ec2::types::VpcEndpoint;

/// The state in lower case (`available`, `deleting`, ...); empty when EC2 gave none.
pub fn state(endpoint: &VpcEndpoint) -> String {
    endpoint
        .state()
        .map(|state| state.as_str().to_ascii_lowercase())
        .unwrap_or_default()
}

/// Deleted, on its way out, failed or rejected: never adopted, never waited on.
pub fn is_gone(endpoint: &VpcEndpoint) -> bool {
    matches!(
        state(endpoint).as_str(),
        "deleted" | "deleting" | "failed" | "rejected"
    )
}

//! The AWS activities the workflows call: their requests and results, and their stable
//! type names (`aws.create_vpc`, ...), under which `hcpflow-aws` implements them. Each
//! create's result, wrapped in [`Delete`], is its compensation's request.

pub mod dns;
pub mod guest;
pub mod iam;
pub mod network;
pub mod observed_privatelink;
pub mod oidc;
pub mod prerequisites;
pub mod privatelink;
pub mod sweep;
pub mod target;

pub use crate::delete::Delete;
use hcpflow_engine::{ActivityOptions, RetryPolicy};

/// How AWS activities run: retried with backoff for about 20 minutes (throttling and
/// dependencies still going away are retryable; permanent failures stop at once), and
/// up to 15 minutes per attempt (some wait for a NAT gateway or an endpoint).
pub fn options() -> ActivityOptions {
    let mut options = ActivityOptions::default().with_retry(RetryPolicy {
        initial_interval_ms: 2_000,
        backoff_coefficient: 2.0,
        max_interval_ms: 60_000,
        max_attempts: 25,
        non_retryable: Vec::new(),
    });
    options.start_to_close_timeout_ms = 15 * 60 * 1000;
    options
}

/// `aws_activity!(Request => Output, "aws.name");` implements [`hcpflow_engine::Activity`].
macro_rules! aws_activity {
    ($request:ty => $output:ty, $name:literal) => {
        aws_activity!(@impl $request => $output, $name, false);
    };
    // `creates`: the call makes something, so a cancel waits for it.
    ($request:ty => $output:ty, $name:literal, creates) => {
        aws_activity!(@impl $request => $output, $name, true);
    };
    (@impl $request:ty => $output:ty, $name:literal, $creates:literal) => {
        impl Activity for $request {
            const TYPE: &'static str = $name;
            type Output = $output;
            const FINISHES_ON_CANCEL: bool = $creates;
            fn options(&self) -> hcpflow_engine::ActivityOptions {
                crate::aws::options()
            }
        }
    };
}
pub(crate) use aws_activity;

#[cfg(test)]
mod tests {
    use hcpflow_engine::Activity;

    use super::network::{CreateVpc, Vpc};
    use super::Delete;

    #[test]
    fn a_compensation_carries_the_create_result_as_is() {
        let vpc = Vpc {
            vpc_id: "vpc-1".into(),
        };
        let wire = serde_json::to_value(Delete(vpc.clone())).unwrap();
        assert_eq!(wire, serde_json::json!({"vpc_id": "vpc-1"}));
        assert_eq!(
            serde_json::from_value::<Delete<Vpc>>(wire).unwrap(),
            Delete(vpc)
        );
        assert_eq!(<Delete<Vpc> as Activity>::TYPE, "aws.delete_vpc");
        assert_eq!(<CreateVpc as Activity>::TYPE, "aws.create_vpc");
        let create = CreateVpc {
            infra_id: "demo-x7k2p".into(),
            cidr_block: "10.0.0.0/16".into(),
            resource_tags: Default::default(),
        };
        assert_eq!(create.options().start_to_close_timeout_ms, 15 * 60 * 1000);
        // A cancel waits for a running create (so its compensation is registered), not
        // for a delete.
        const { assert!(<CreateVpc as Activity>::FINISHES_ON_CANCEL) };
        const { assert!(!<Delete<Vpc> as Activity>::FINISHES_ON_CANCEL) };
    }
}

//! Where an AWS call goes: the region and the accounts it is made in, recorded with the
//! call. A create's calls go to the create's region, whatever the server's own region
//! is; its compensations, recorded with the same target, go there too, and so do a
//! destroy's. Histories recorded before targets existed carry none, and their calls go
//! where the server's clients point (the create's region then had to be the server's).
//!
//! A target names two accounts, as HyperShift splits a cluster's objects: the hosted
//! cluster's (`account`) and the management side's (`management_account`: the OIDC
//! bucket, the management VPC). Each call uses the one its objects live in; a call that
//! spans both (a zone of the guest against the management subnets) uses both.

use hcpflow_engine::{Activity, ActivityCall, ActivityOptions, WorkflowContext};
use serde::{Deserialize, Serialize};

/// The patch after which a create's AWS calls carry their target.
pub const AWS_TARGETS: &str = "aws-targets";

/// The field of an AWS activity's input that names its target.
pub const TARGET_FIELD: &str = "aws_target";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AwsTarget {
    pub region: String,
    /// The hosted cluster's account, by its configured name; none: the server's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    /// The management side's account; none: the server's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub management_account: Option<String>,
}

/// An AWS request with its target: the request's own fields, and `aws_target`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Targeted<A> {
    #[serde(flatten)]
    pub request: A,
    pub aws_target: AwsTarget,
}

impl<A: Activity> Activity for Targeted<A> {
    const TYPE: &'static str = A::TYPE;
    type Output = A::Output;
    const FINISHES_ON_CANCEL: bool = A::FINISHES_ON_CANCEL;

    fn options(&self) -> ActivityOptions {
        self.request.options()
    }
}

/// The AWS calls of one workflow run: each carries the run's target, if it has one.
#[derive(Clone)]
pub struct AwsCalls {
    ctx: WorkflowContext,
    target: Option<AwsTarget>,
}

impl std::fmt::Debug for AwsCalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsCalls")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

impl AwsCalls {
    pub fn new(ctx: &WorkflowContext, target: Option<AwsTarget>) -> Self {
        Self {
            ctx: ctx.clone(),
            target,
        }
    }

    /// `ctx.activity(request)`, targeted.
    pub fn call<A: Activity>(&self, request: A) -> ActivityCall<A::Output> {
        match &self.target {
            Some(target) => self.ctx.activity(Targeted {
                request,
                aws_target: target.clone(),
            }),
            None => self.ctx.activity(request),
        }
    }

    /// `ctx.on_rollback(compensation)`, targeted.
    pub fn on_rollback<A: Activity>(&self, compensation: A) {
        match &self.target {
            Some(target) => self.ctx.on_rollback(Targeted {
                request: compensation,
                aws_target: target.clone(),
            }),
            None => self.ctx.on_rollback(compensation),
        }
    }
}

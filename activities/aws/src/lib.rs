//! Idempotent AWS activities (EC2, IAM, Route53, ELBv2, S3) and their compensating
//! deletes, plus the tag sweep.
//!
//! Status: the pure groundwork only — what every activity will be built on, with no AWS
//! SDK yet:
//! - [`policies`]: the IAM policy documents of the operator roles and the worker, carried
//!   as data (`policies/*.json`) with this cluster's zone ids as parameters;
//! - [`roles`]: the seven operator roles, their service accounts and web-identity trust;
//! - [`network_plan`]: the per-zone subnet plan of a /16 VPC;
//! - [`naming`]: resource names and the tags every created resource carries.
//!
//! The activities themselves (SDK calls, lookups by tag, compensations, the sweep)
//! arrive with the rest of the "AWS activities" issue.

pub mod naming;
pub mod network_plan;
pub mod policies;
pub mod roles;

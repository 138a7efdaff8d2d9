//! AWS activities against the dev stack's moto, through its fault proxy
//! (`make test` starts both). One binary for the crate: linking the SDK is slow.
//!
//! Every test signs with an access key id of its own, so the proxy keeps its faults and
//! its request log apart from other tests'; checks go to moto directly, independent of
//! the activity's own view.

// Helpers outside #[test] functions unwrap too: a failed step is a failed test.
#![allow(clippy::unwrap_used)]

mod accounts;
mod cluster;
mod guest;
mod network;
mod observed_privatelink;
mod oidc_iam;
mod prerequisites;
mod route53;
mod support;
mod vpc;

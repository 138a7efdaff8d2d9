//! The HyperShift workflows (DESIGN.md §5): `create_hosted_cluster`, `scale_node_pool`,
//! `destroy_hosted_cluster`, one module each, with the typed activity requests and
//! responses they call.
//!
//! Where to start reading: [`aws`], the AWS activities' requests, results and type
//! names (implemented in `hcpflow-aws`).
//!
//! Status: the activity contracts only. The workflows arrive with the "HyperShift
//! workflows end to end" issue.

pub mod aws;

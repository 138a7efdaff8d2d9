//! The HyperShift workflows (DESIGN.md §5): `create_hosted_cluster`, `scale_node_pool`,
//! `destroy_hosted_cluster`, one module each, with the typed activity requests and
//! responses they call.
//!
//! Where to start reading: [`aws`] and [`kube`], the activities' requests, results and
//! type names (implemented in `hcpflow-aws` and `hcpflow-kube`); [`Delete`], the
//! compensation of a create, whose request is the create's result.
//!
//! Status: the activity contracts only. The workflows arrive with the "HyperShift
//! workflows end to end" issue.

pub mod aws;
pub mod delete;
pub mod kube;

pub use delete::Delete;

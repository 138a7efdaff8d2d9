//! The HyperShift workflows (DESIGN.md §5): `create_hosted_cluster`, `scale_node_pool`,
//! `destroy_hosted_cluster`, one module each, with the typed activity requests and
//! responses they call.
//!
//! Where to start reading:
//! - [`create`], [`scale`], [`destroy`]: the three workflows, and [`input`] — their
//!   inputs (a public contract) and the validation of a create; [`catalog`]: the three
//!   registered with what intake knows of each;
//! - [`aws`], [`kube`], [`registry`]: the activities' requests, results and type names
//!   (implemented in `hcpflow-aws`, `hcpflow-kube` and the workers);
//! - [`Delete`]: the compensation of a create, whose request is the create's result;
//! - [`naming`], [`network_plan`], [`resource_tags`]: AWS names and tags, the subnet
//!   plan, and the user's tags; [`aws_accounts`]: the accounts a create may name.

pub mod admission;
pub mod aws;
pub mod aws_accounts;
pub mod catalog;
pub mod create;
pub mod delete;
pub mod destroy;
pub mod input;
pub mod kube;
pub mod naming;
pub mod network_plan;
pub mod privatelink;
pub mod pull_secret_ref;
pub mod registry;
pub mod resource_tags;
pub mod scale;
mod shape;

pub use delete::Delete;

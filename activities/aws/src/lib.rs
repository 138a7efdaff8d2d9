//! Idempotent AWS activities (EC2, IAM, Route53, ELBv2, S3) and their compensating
//! deletes, plus the tag sweep.
//!
//! Where to start reading:
//! - [`scope`]: what an activity is handed (idempotency key, resource ledger);
//! - [`clients`]: the SDK clients (standard credential chain, endpoint override);
//! - [`error`]: AWS errors classified once into retryable and permanent failures;
//! - [`ec2`]: EC2 activities, each create finding an earlier attempt's resource by tag;
//! - [`policies`], [`roles`], [`network_plan`], [`naming`]: the data they are built on —
//!   IAM policy documents (`policies/*.json`) with this cluster's zone ids as
//!   parameters, the seven operator roles, the per-zone subnet plan, names and tags.
//!
//! Status: the EC2 network of hypershift-aws.md §1.1–1.3 — the VPC, its DHCP options,
//! internet gateway, subnets, per-zone NAT gateways with their addresses, route tables
//! and the S3 gateway endpoint (create and delete). Route53 zones, OIDC, IAM,
//! PrivateLink and the tag sweep follow.

pub mod clients;
pub mod ec2;
pub mod error;
pub mod naming;
pub mod network_plan;
pub mod policies;
pub mod roles;
pub mod scope;

pub use clients::{AwsClients, AwsSettings};
pub use error::AwsError;
pub use scope::{MemoryLog, ResourceLog, Scope};

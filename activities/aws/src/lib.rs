//! Idempotent AWS activities (EC2, IAM, Route53, ELBv2, S3) and their compensating
//! deletes, plus the tag sweep.
//!
//! Where to start reading:
//! - [`scope`]: what an activity is handed (idempotency key, resource ledger);
//! - [`clients`]: the SDK clients (standard credential chain, endpoint override);
//!   [`accounts`]: clients per (account, region), other accounts by an assumed role;
//! - [`error`]: AWS errors classified once into retryable and permanent failures;
//! - [`ec2`]: EC2 activities, each create finding an earlier attempt's resource by tag;
//! - [`policies`], [`roles`], [`network_plan`], [`naming`]: the data they are built on —
//!   IAM policy documents (`policies/*.json`) with this cluster's zone ids as
//!   parameters, the seven operator roles, the per-zone subnet plan, names and tags;
//! - [`route53`], [`oidc`], [`iam`]: the zones and records, the OIDC signing key and
//!   documents, the OIDC provider and roles;
//! - [`observed_privatelink`]: PrivateLink as the HyperShift operators build it — the
//!   zone coverage check before, the per-zone observation after, the removal check;
//!   [`privatelink`]: the one hcpflow built itself before, kept for recorded histories;
//! - [`guest`]: what the guest cluster left (load balancers, volumes, the registry
//!   bucket, security groups, the public `*.apps` record), deleted by tag after the
//!   HostedCluster as `hypershift destroy infra` does;
//! - [`sweep`]: everything AWS still holds of an infra id.
//!
//! Every create finds what an earlier attempt made before creating ([`lookup`]); every
//! delete of something already gone is done.

pub mod accounts;
pub mod clients;
pub mod dispatch;
pub mod ec2;
pub mod error;
pub mod guest;
pub mod iam;
pub mod lookup;
pub mod observed_privatelink;
pub mod oidc;
pub mod policies;
pub mod poll;
pub mod prerequisites;
pub mod privatelink;
pub mod roles;
pub mod route53;
pub mod scope;
pub mod secrets_manager;
pub mod sweep;

// Names, tags and the subnet plan are the workflows' as much as ours: they live in
// hcpflow-hypershift and are re-exported under their old paths.
pub use hcpflow_hypershift::{naming, network_plan, resource_tags};

pub use clients::{AwsClients, AwsSettings};
pub use dispatch::AwsActivities;
pub use error::AwsError;
pub use scope::Scope;

//! hcpflow's NATS protocol (DESIGN.md §4), a public contract, for the server and for any
//! Rust client: it depends on the engine's id types, serde and async-nats, not on the
//! server's database, cloud SDKs or Kubernetes client.
//!
//! - [`subjects`]: every subject and stream name, from one prefix;
//! - [`error`]: the replies' shape and error codes, and the checks every body passes;
//! - [`requests`]: one request body per verb, with the engine's validated ids;
//! - [`replies`]: the replies, and the history entry read through the engine's `Event`;
//! - [`tasks`]: the internal task messages, whose workflow ids and seqs are validated
//!   types (a wrong one does not decode);
//! - [`connection`]: connecting to NATS (credentials, TLS, retry while it starts);
//! - [`client`]: the request/reply API client the `hcpflow` commands use.

pub mod client;
pub mod connection;
pub mod error;
pub mod replies;
pub mod requests;
pub mod subjects;
pub mod tasks;

pub use client::{ApiClient, CallError};
pub use connection::{connect, NatsConfig, Secret};
pub use error::{ok_reply, parse_body, ApiError, ErrorCode};
pub use replies::{
    CancelReply, ClusterView, ClustersReply, DescribeReply, EmptyReply, HistoryEntry, HistoryPage,
    ListReply, StartReply, StartStatus, WorkflowView,
};
pub use requests::{
    ApiRequest, CancelRequest, ClustersRequest, DescribeRequest, DestroyRequest, HistoryRequest,
    ListRequest, SignalRequest, StartRequest, VerifyRequest, VERBS,
};
pub use subjects::{InvalidPrefix, StreamRole, Subjects};
pub use tasks::{ActivityTaskMessage, ChildDone, WorkflowTask, PARENT_HEADER};

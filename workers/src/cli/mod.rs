//! The `hcpflow` command: its [`commands`] and [`config`]uration, and the commands that
//! are clients of the NATS API — [`cluster`] (with [`cluster_spec`]), [`workflow`],
//! [`audit`] (on `hcpflow-audit`), [`bench`], [`soak`] — with live [`progress`] ([`follow`]) and
//! the audit [`timeline`]; [`migrate`] sets up the database and the streams; [`seal`]
//! reports which seal keys live workflows still need.

pub mod audit;
pub mod bench;
pub mod cluster;
pub mod cluster_spec;
pub mod commands;
pub mod config;
pub mod follow;
pub mod migrate;
pub mod nats_permissions;
pub mod progress;
pub mod seal;
pub mod soak;
pub mod timeline;
pub mod workflow;

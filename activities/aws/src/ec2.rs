//! EC2 activities: each create finds an earlier attempt's resource by its idempotency
//! tag before creating (moto ignores ClientToken; real AWS needs the lookup after a
//! crash anyway), and each delete treats "not found" as done.

pub mod dhcp;
pub mod endpoint_state;
pub mod internet_gateway;
pub mod nat_gateway;
pub mod route_table;
pub mod s3_endpoint;
pub mod subnet;
pub mod tags;
pub mod vpc;

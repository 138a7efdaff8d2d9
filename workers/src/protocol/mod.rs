//! The NATS protocol, a public contract (DESIGN.md §4): the message bodies ([`wire`]),
//! the subject and stream names ([`subjects`]), and the API [`client`] the commands use.

pub mod client;
pub mod subjects;
pub mod wire;

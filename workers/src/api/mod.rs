//! The public NATS API (DESIGN.md §4), server side: the request/reply [`router`], which
//! reads each body into the protocol's request type for its verb ([`fields`]); the
//! durable [`submit`] stream; [`queue`], the bounds on requests handled and waiting
//! (beyond them, `overloaded`); and [`intake`], where every start — from either, or from
//! a parent workflow — is validated, sealed and committed. [`views`]: what the event
//! store holds, as the replies show it.
//!
//! What it guarantees: every request gets exactly one reply; a start is answered only
//! once it is committed; bad input gets an error naming every problem and records
//! nothing.

pub mod fields;
#[cfg(test)]
mod fuzz;
pub mod intake;
pub mod queue;
pub mod router;
pub mod submit;
pub mod views;

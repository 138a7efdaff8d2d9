//! Engine tests: workflows run by the in-process driver, replayed, crashed and resumed.

#![allow(clippy::unwrap_used)]

mod context;
mod nondeterminism;
mod properties;
mod saga;
mod support;

//! The emulator over HTTP, as clients see it: each test starts its own emulator on a
//! free 127.0.0.1 port (in process), and talks plain HTTP/1.1 to it; `kubectl` tests
//! run the machine's kubectl against it.

#![allow(clippy::unwrap_used)]

mod api;
mod cloud;
mod guest;
mod identity;
mod kubectl;
mod operator;
mod support;
mod watch;

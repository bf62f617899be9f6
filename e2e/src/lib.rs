//! Shared helpers for the end-to-end tests that run against the local control plane.
//!
//! Start the control plane with `make cluster-up` (or run everything with `make test`); tests
//! that find no control plane fail with a message saying so, they never pass silently.

pub mod appservice;
pub mod cluster;
pub mod faults;
pub mod fleet;
pub mod kubectl;
pub mod namespace;
pub mod operator;
pub mod process;
pub mod prom;
pub mod registry;
pub mod scenario;
pub mod snapshot;
pub mod swap;
pub mod wait;

pub use cluster::client;
pub use kubectl::{kubectl, kubectl_with_stderr};
pub use namespace::TestNamespace;

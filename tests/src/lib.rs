//! Shared helpers for the end-to-end tests that run against the local control plane.

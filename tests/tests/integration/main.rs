#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a panic is the failure report.

//! The integration tests, one binary: one link, and one DynamoDB Local and
//! one local KMS for all of them (the fault tests start their own, to stop
//! them). Kept apart, each in a binary of its own, are only the tests that
//! need a process to themselves: `memory_bounds` (a counting global
//! allocator), `panics` (the panic hook) and `access_log` (which counts the
//! log lines of its own requests).

mod authorization;
mod concurrency;
mod deadline;
mod events;
mod fail_closed;
mod faults;
mod handlers;
mod idempotency;
mod key_verify;
mod lambda_events;
mod load;
mod local_api;
mod local_auth;
mod mcp_sealing;
mod merge_patch;
mod openapi;
mod packaging;
mod pins;
mod properties;
mod readme;
mod resources;
mod sdk_errors;
mod sealing;
mod secrets;
mod store_conformance;
mod verify;

//! `PUT /api/agent-server/api-keys/{id}`: updates a
//! provider API key (name, secret, enabled flag). The secret is write-only: no response, error or log line carries it.
//!
//! The Lambda entry point: the shared runner for ApiKey records. Every rule
//! lives in `agent-server-shared`.

use std::process::ExitCode;

use agent_server_shared::ApiKey;

fn main() -> ExitCode {
    agent_server_shared::lambda::main::<ApiKey>()
}

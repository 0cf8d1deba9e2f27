//! `PUT /api/agent-server/models/{id}?project_id=...`: updates a
//! model definition (name, model_id, provider_type, parameters) within a project.
//!
//! The Lambda entry point: the shared runner for Model records. Every rule
//! lives in `agent-server-shared`.

use std::process::ExitCode;

use agent_server_shared::Model;

fn main() -> ExitCode {
    agent_server_shared::lambda::main::<Model>()
}

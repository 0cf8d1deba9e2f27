//! `PUT /api/agent-server/mcp-servers/{id}?project_id=...`: updates a
//! MCP server connection (name, endpoint, headers) within a project. Header values may be secrets: they are stored and returned, never logged or echoed in errors.
//!
//! The Lambda entry point: the shared runner for McpServer records. Every rule
//! lives in `agent-server-shared`.

use std::process::ExitCode;

use agent_server_shared::McpServer;

fn main() -> ExitCode {
    agent_server_shared::lambda::main::<McpServer>()
}

//! `PUT /api/agent-server/mcp-servers/{id}?project_id=...`: updates a
//! MCP server connection (name, endpoint, headers) within a project. Header values may be secrets: they are stored and returned, never logged or echoed in errors.
//!
//! The rules live in `agent-server-shared`; this crate names the record
//! kind, so the Lambda binary and the local API run the same handler.

use agent_server_shared::{App, McpServer, Request, Response, Store};

/// Handles one request. Every outcome, failures included, is an envelope.
pub async fn handle<S: Store>(app: &App<S>, request: Request) -> Response {
    agent_server_shared::update::<McpServer, S>(app, request).await
}

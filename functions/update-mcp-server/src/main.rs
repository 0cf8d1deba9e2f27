//! Lambda entry point for `update-mcp-server`: the shared runner, for McpServer records.

use std::process::ExitCode;

use agent_server_shared::McpServer;

#[tokio::main]
async fn main() -> ExitCode {
    agent_server_shared::lambda::run::<McpServer>().await
}

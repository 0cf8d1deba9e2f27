//! `PUT /api/agent-server/api-keys/{id}`: updates a
//! provider API key (name, secret, enabled flag). The secret is write-only: no response, error or log line carries it.
//!
//! The rules live in `agent-server-shared`; this crate names the record
//! kind, so the Lambda binary and the local API run the same handler.

use agent_server_shared::{ApiKey, App, Request, Response, Store};

/// Handles one request. Every outcome, failures included, is an envelope.
pub async fn handle<S: Store>(app: &App<S>, request: Request) -> Response {
    agent_server_shared::update::<ApiKey, S>(app, request).await
}

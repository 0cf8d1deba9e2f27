//! `PUT /api/agent-server/models/{id}?project_id=...`: updates a
//! model definition (name, model_id, provider_type, parameters) within a project.
//!
//! The rules live in `agent-server-shared`; this crate names the record
//! kind, so the Lambda binary and the local API run the same handler.

use agent_server_shared::{App, Model, Request, Response, Store};

/// Handles one request. Every outcome, failures included, is an envelope.
pub async fn handle<S: Store>(app: &App<S>, request: Request) -> Response {
    agent_server_shared::update::<Model, S>(app, request).await
}

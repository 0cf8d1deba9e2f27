//! The sample records `make run` loads, one of each kind, with fixed ids
//! that the README's examples and the files in `events/` use.

use agent_server_shared::Table;
use agent_server_shared::item::{Attr, Item};

/// The sample API key's id.
pub const API_KEY_ID: &str = "3f1c2a9e-7b4d-4e8a-9c21-5d6e7f8a9b01";
/// The project owning the sample MCP server and model.
pub const PROJECT_ID: &str = "8a4b2c1d-3e5f-4a6b-8c7d-9e0f1a2b3c4d";
/// The sample MCP server's id.
pub const MCP_SERVER_ID: &str = "5b6c7d8e-9f01-4a2b-8c3d-4e5f6a7b8c9d";
/// The sample model's id.
pub const MODEL_ID: &str = "7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f";
/// Another team's project, for trying authorization: the sample-project
/// development token may not change its records.
pub const OTHER_PROJECT_ID: &str = "0b7c6d5e-4f3a-4b2c-9d1e-0f9a8b7c6d5e";
/// The other project's model.
pub const OTHER_MODEL_ID: &str = "9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b";
/// When the samples were "created".
pub const CREATED_AT: &str = "2026-01-01T00:00:00.000Z";

fn s(text: &str) -> Attr {
    Attr::S(text.into())
}

fn n(text: &str) -> Attr {
    Attr::N(text.into())
}

fn item(attributes: Vec<(&str, Attr)>) -> Item {
    let common = [
        ("created_at", s(CREATED_AT)),
        ("updated_at", s(CREATED_AT)),
        ("version", n("1")),
    ];
    attributes
        .into_iter()
        .chain(common)
        .map(|(name, value)| (name.to_string(), value))
        .collect()
}

/// Every sample item, with its table.
pub fn items() -> Vec<(Table, Item)> {
    vec![
        (
            Table::ApiKeys,
            item(vec![
                ("id", s(API_KEY_ID)),
                ("provider_type", s("OpenAI")),
                ("name", s("Sample OpenAI key")),
                ("enabled", Attr::Bool(true)),
                ("api_key", s("sk-sample-0000000000000000")),
            ]),
        ),
        (
            Table::McpServers,
            item(vec![
                ("project_id", s(PROJECT_ID)),
                ("id", s(MCP_SERVER_ID)),
                ("name", s("Docs search")),
                ("endpoint", s("https://mcp.example.com/sse")),
                (
                    "headers",
                    Attr::M([("Authorization".to_string(), s("Bearer sample-token"))].into()),
                ),
            ]),
        ),
        (
            Table::Models,
            item(vec![
                ("project_id", s(PROJECT_ID)),
                ("id", s(MODEL_ID)),
                ("name", s("Claude Sonnet")),
                ("model_id", s("claude-sonnet-4-5")),
                ("provider_type", s("Anthropic")),
                (
                    "parameters",
                    Attr::M(
                        [
                            ("temperature".to_string(), n("0.7")),
                            ("max_tokens".to_string(), n("4096")),
                        ]
                        .into(),
                    ),
                ),
            ]),
        ),
        (
            Table::Models,
            item(vec![
                ("project_id", s(OTHER_PROJECT_ID)),
                ("id", s(OTHER_MODEL_ID)),
                ("name", s("Another team's model")),
                ("model_id", s("gpt-4o")),
                ("provider_type", s("OpenAI")),
                (
                    "parameters",
                    Attr::M([("temperature".to_string(), n("1"))].into()),
                ),
            ]),
        ),
    ]
}

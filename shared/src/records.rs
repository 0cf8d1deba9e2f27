//! The three record kinds: what a request may change, and what a response
//! returns (fields in the documented order).

use serde::Serialize;
use serde_json::{Map, Value};

use crate::item::{self, Item, ItemError, Kind};
pub use crate::provider::ProviderType;
use crate::rules::Rule;
use crate::store::Table;

/// A record kind served by one update route.
pub trait Resource: Serialize + Sized {
    /// Where it is stored.
    const TABLE: Table;
    /// The API Gateway route that updates it.
    const ROUTE: &'static str;
    /// How messages name it ("Model").
    const NOUN: &'static str;
    /// The success message.
    const UPDATED: &'static str;
    /// The fields a request may set, each with its rule.
    const FIELDS: &'static [(&'static str, Rule)];
    /// Fields a response shows but a request may not set.
    const READ_ONLY: &'static [&'static str];
    /// The stored attributes a response shows besides the key, `updated_at`
    /// and `version`, with the type each must have to be shown.
    const READABLE: &'static [(&'static str, Kind)];

    /// Reads the record from its stored item.
    fn from_item(item: &Item) -> Result<Self, ItemError>;
}

/// A provider API key. The secret `api_key` has no field here, so no
/// response can carry it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApiKey {
    /// Record id.
    pub id: Option<String>,
    /// Provider the key belongs to (read-only).
    pub provider_type: Option<String>,
    /// Display name.
    pub name: Option<String>,
    /// Whether agents may use the key.
    pub enabled: Option<bool>,
    /// Creation time.
    pub created_at: Option<String>,
    /// Time of the last write.
    pub updated_at: Option<String>,
}

impl Resource for ApiKey {
    const TABLE: Table = Table::ApiKeys;
    const ROUTE: &'static str = "/api/agent-server/api-keys/{id}";
    const NOUN: &'static str = "API key";
    const UPDATED: &'static str = "API key updated successfully";
    const FIELDS: &'static [(&'static str, Rule)] = &[
        ("name", Rule::Text),
        ("api_key", Rule::Secret),
        ("enabled", Rule::Flag),
    ];
    const READ_ONLY: &'static [&'static str] =
        &["id", "project_id", "created_at", "updated_at", "provider_type"];
    const READABLE: &'static [(&'static str, Kind)] = &[
        ("provider_type", Kind::String),
        ("name", Kind::String),
        ("enabled", Kind::Boolean),
        ("created_at", Kind::String),
    ];

    fn from_item(item: &Item) -> Result<Self, ItemError> {
        Ok(Self {
            id: item::string(item, "id")?,
            provider_type: item::string(item, "provider_type")?,
            name: item::string(item, "name")?,
            enabled: item::boolean(item, "enabled")?,
            created_at: item::string(item, "created_at")?,
            updated_at: item::string(item, "updated_at")?,
        })
    }
}

/// An MCP server connection.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpServer {
    /// Record id.
    pub id: Option<String>,
    /// Owning project.
    pub project_id: Option<String>,
    /// Display name.
    pub name: Option<String>,
    /// Server URL.
    pub endpoint: Option<String>,
    /// HTTP headers sent to the server.
    pub headers: Option<Map<String, Value>>,
    /// Creation time.
    pub created_at: Option<String>,
    /// Time of the last write.
    pub updated_at: Option<String>,
}

impl Resource for McpServer {
    const TABLE: Table = Table::McpServers;
    const ROUTE: &'static str = "/api/agent-server/mcp-servers/{id}";
    const NOUN: &'static str = "MCP server";
    const UPDATED: &'static str = "MCP server updated successfully";
    const FIELDS: &'static [(&'static str, Rule)] = &[
        ("name", Rule::Text),
        ("endpoint", Rule::Endpoint),
        ("headers", Rule::Headers),
    ];
    const READ_ONLY: &'static [&'static str] = &["id", "project_id", "created_at", "updated_at"];
    const READABLE: &'static [(&'static str, Kind)] = &[
        ("name", Kind::String),
        ("endpoint", Kind::String),
        ("headers", Kind::Map),
        ("created_at", Kind::String),
    ];

    fn from_item(item: &Item) -> Result<Self, ItemError> {
        Ok(Self {
            id: item::string(item, "id")?,
            project_id: item::string(item, "project_id")?,
            name: item::string(item, "name")?,
            endpoint: item::string(item, "endpoint")?,
            headers: item::object(item, "headers")?,
            created_at: item::string(item, "created_at")?,
            updated_at: item::string(item, "updated_at")?,
        })
    }
}

/// A model definition.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Model {
    /// Record id.
    pub id: Option<String>,
    /// Owning project.
    pub project_id: Option<String>,
    /// Display name.
    pub name: Option<String>,
    /// The provider's model identifier.
    pub model_id: Option<String>,
    /// The provider.
    pub provider_type: Option<String>,
    /// Free-form model parameters.
    pub parameters: Option<Map<String, Value>>,
    /// Creation time.
    pub created_at: Option<String>,
    /// Time of the last write.
    pub updated_at: Option<String>,
}

impl Resource for Model {
    const TABLE: Table = Table::Models;
    const ROUTE: &'static str = "/api/agent-server/models/{id}";
    const NOUN: &'static str = "Model";
    const UPDATED: &'static str = "Model updated successfully";
    const FIELDS: &'static [(&'static str, Rule)] = &[
        ("name", Rule::Text),
        ("model_id", Rule::Text),
        ("provider_type", Rule::Provider),
        ("parameters", Rule::Parameters),
    ];
    const READ_ONLY: &'static [&'static str] = &["id", "project_id", "created_at", "updated_at"];
    const READABLE: &'static [(&'static str, Kind)] = &[
        ("name", Kind::String),
        ("model_id", Kind::String),
        ("provider_type", Kind::String),
        ("parameters", Kind::Map),
        ("created_at", Kind::String),
    ];

    fn from_item(item: &Item) -> Result<Self, ItemError> {
        Ok(Self {
            id: item::string(item, "id")?,
            project_id: item::string(item, "project_id")?,
            name: item::string(item, "name")?,
            model_id: item::string(item, "model_id")?,
            provider_type: item::string(item, "provider_type")?,
            parameters: item::object(item, "parameters")?,
            created_at: item::string(item, "created_at")?,
            updated_at: item::string(item, "updated_at")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_api_key_record_has_no_secret() {
        let item: Item = [
            (
                "id".to_string(),
                aws_sdk_dynamodb::types::AttributeValue::S("k".into()),
            ),
            (
                "api_key".to_string(),
                aws_sdk_dynamodb::types::AttributeValue::S("SENTINEL".into()),
            ),
        ]
        .into();
        let record = ApiKey::from_item(&item).map(|r| serde_json::to_string(&r).unwrap_or_default());
        let json = record.unwrap_or_default();
        assert!(json.starts_with(r#"{"id":"k","provider_type":null"#), "{json}");
        assert!(!json.contains("SENTINEL"));
        assert!(!json.contains("api_key"));
    }

    #[test]
    fn fields_serialise_in_documented_order() {
        let model = Model {
            id: Some("i".into()),
            project_id: Some("p".into()),
            name: Some("n".into()),
            model_id: Some("m".into()),
            provider_type: Some("xAI".into()),
            parameters: Some(Map::new()),
            created_at: Some("c".into()),
            updated_at: Some("u".into()),
        };
        let json = serde_json::to_string(&model).unwrap_or_default();
        assert_eq!(
            json,
            r#"{"id":"i","project_id":"p","name":"n","model_id":"m","provider_type":"xAI","parameters":{},"created_at":"c","updated_at":"u"}"#
        );
    }
}

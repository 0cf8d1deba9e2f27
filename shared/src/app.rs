//! What a running function holds for its whole life: settings and store,
//! built once at start-up and shared by every invocation.

use crate::config::{ConfigError, Settings};
use crate::store::DynamoStore;

/// Settings plus the store every request goes through.
#[derive(Debug, Clone)]
pub struct App<S = DynamoStore> {
    /// Store of records.
    pub store: S,
    /// Table names and field-rule policy.
    pub settings: Settings,
}

impl App<DynamoStore> {
    /// Reads the environment and builds the one DynamoDB client.
    pub async fn from_env() -> Result<Self, ConfigError> {
        let settings = Settings::from_env()?;
        let store = DynamoStore::from_env(settings.tables.clone()).await;
        Ok(Self { store, settings })
    }
}

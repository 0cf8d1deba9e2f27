//! What the harness and its subject binaries share: the one conditional
//! `UpdateItem` every implementation makes.

use agent_server_shared::Table;
use agent_server_shared::item::Attr;
use agent_server_shared::store::{Key, Update};
use local_api::samples;

/// The sample API key the sealing subjects update.
pub const API_KEY_ID: &str = samples::API_KEY_ID;

/// The provider key the sealing subjects send: the size of a real one.
pub const SEALED_KEY: &str = "sk-proj-bench0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ01234567";

/// The update `events/update-model/200-switch-provider.json` asks for, made
/// without the handler: the sample model, a name, a provider and two
/// parameters (`max_tokens` = `round`, so every write changes the item).
pub fn sample_update(round: usize) -> Update {
    Update {
        table: Table::Models,
        key: Key {
            project_id: Some(samples::PROJECT_ID.into()),
            id: samples::MODEL_ID.into(),
        },
        set: vec![
            ("name", Attr::S("Claude Sonnet".into())),
            ("provider_type", Attr::S("Anthropic".into())),
            (
                "parameters",
                Attr::M(
                    [
                        ("temperature".to_string(), Attr::N("0.2".into())),
                        ("max_tokens".to_string(), Attr::N(round.to_string())),
                    ]
                    .into(),
                ),
            ),
        ]
        .into(),
        remove: Vec::new(),
        expected_versions: None,
        none_match: None,
        unmodified_before: None,
        now: agent_server_shared::writes::timestamp(),
        write_id: Update::new_write_id(),
        fields: <agent_server_shared::Model as agent_server_shared::Resource>::FIELDS,
        updated_by: Some("bench".into()),
        budget: agent_server_shared::budget::TIME_BUDGET,
        unchanged: Vec::new(),
    }
}

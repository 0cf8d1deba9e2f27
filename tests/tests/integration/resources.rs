//! `tools/resources.json`: what the template's and the events' tools (through `tools/kinds.py`)
//! read of the code, written from the record kinds' own declarations, so the checks restate nothing the code
//! says. Stale, it fails here; `UPDATE_RESOURCES=1 cargo test -p integration-tests --test
//! integration resources` writes it again.

use agent_server_shared::Table;
use agent_server_shared::seal;
use agent_server_shared::store::Key;
use serde_json::{Value, json};

/// Each record kind's function (its binary, as template.yaml's `BuildProperties.Binary` names it),
/// its route, the variable naming its table and the table's local name, whether `project_id` keys
/// it, the string sets its change event carries beside every event's fields, the client its
/// `verify=true` dials (`mcp`, `provider`) or null, the KMS calls it
/// makes on the secrets key, and the encryption context they are bound to (the sealed fields'
/// names, and the context's keys as `seal::context` builds them), or null.
fn declared() -> Value {
    let kinds: Vec<Value> = Table::ALL
        .into_iter()
        .map(|table| {
            json!({
                "function": table.function(),
                "route": table.route(),
                "table_variable": table.env_var(),
                "table_default": table.default_name(),
                "scoped_by_project": table.scoped_by_project(),
                "event_sets": table.event_sets(),
                "verify_client": table.verify_client(),
                "kms": table.kms_calls(),
                "kms_context": kms_context(table),
            })
        })
        .collect();
    json!({
        "about": "Written from shared/src/records.rs by tests/tests/integration/resources.rs: edit the code, not this file.",
        "kinds": kinds,
    })
}

/// The fields `table`'s function seals and the keys of their encryption context, if any.
fn kms_context(table: Table) -> Value {
    let sealed: Vec<&str> = table
        .fields()
        .iter()
        .filter(|field| field.is_sealed())
        .map(|field| field.name)
        .collect();
    let Some(first) = sealed.first() else {
        return Value::Null;
    };
    let key = Key {
        project_id: table.scoped_by_project().then(String::new),
        id: String::new(),
    };
    let keys: Vec<&str> = seal::context(first, &key)
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    json!({ "fields": sealed, "keys": keys })
}

#[test]
fn tools_resources_json_is_the_code_s_list() {
    let path = integration_tests::repo_root().join("tools/resources.json");
    let expected = format!(
        "{}\n",
        serde_json::to_string_pretty(&declared()).unwrap_or_default()
    );
    if std::env::var_os("UPDATE_RESOURCES").is_some() {
        std::fs::write(&path, &expected).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    let written = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        written == expected,
        "{} is not the code's list; UPDATE_RESOURCES=1 cargo test -p integration-tests --test integration resources writes it:\n{expected}",
        path.display()
    );
}

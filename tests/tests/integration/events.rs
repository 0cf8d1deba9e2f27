//! Replays every API Gateway event in `events/` through the functions'
//! Lambda entry (event reading, guarded handler, API Gateway's response
//! shape), against DynamoDB Local
//! holding the sample records `make run` loads. Each file is named
//! `events/<function>/<status>-<case>.json`, and must produce that status,
//! so an event can never go stale.

use std::path::PathBuf;

use agent_server_shared::rules::Policy;
use agent_server_shared::store::TableNames;
use integration_tests::{Route, client, dynamo_app, dynamo_local, repo_root};
use serde_json::Value;

fn event_files() -> Vec<(Route, u16, PathBuf)> {
    let mut files = Vec::new();
    for route in Route::ALL {
        let function = match route {
            Route::ApiKeys => "update-api-key",
            Route::McpServers => "update-mcp-server",
            Route::Models => "update-model",
        };
        let folder = repo_root().join("events").join(function);
        let entries = std::fs::read_dir(&folder).unwrap_or_else(|e| panic!("{}: {e}", folder.display()));
        for entry in entries.flatten() {
            let path = entry.path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_string();
            let status = name
                .split('-')
                .next()
                .and_then(|s| s.parse::<u16>().ok())
                .unwrap_or_else(|| panic!("{name}: must be named <status>-<case>.json"));
            files.push((route, status, path));
        }
    }
    files.sort_by_key(|(_, status, path)| (std::cmp::Reverse(*status), path.clone()));
    files
}

#[tokio::test]
async fn every_event_produces_its_documented_status() {
    let local = dynamo_local().await;
    let loaded = local_api::setup::load_samples(&client(&local.endpoint), &TableNames::default(), None).await;
    assert!(loaded.is_ok(), "{loaded:?}");
    let app = dynamo_app(Policy::default()).await;

    let files = event_files();
    for route in Route::ALL {
        for status in [200, 400, 404] {
            assert!(
                files.iter().any(|(r, s, _)| *r == route && *s == status),
                "{route:?} has no {status} event"
            );
        }
    }
    for (route, status, path) in files {
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let event: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let response = route.respond(&app, event.clone()).await;
        let text = response
            .body
            .as_ref()
            .map(|b| b.as_ref().to_vec())
            .unwrap_or_default();
        let body: Value = serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(
            response.status_code,
            i64::from(status),
            "{}: {body}",
            path.display()
        );
        if status == 200 {
            assert_eq!(body["message"], route.success_message());
            let sent: Value =
                serde_json::from_str(event["body"].as_str().unwrap_or("{}")).unwrap_or_default();
            let merge = event["requestContext"]["http"]["method"] == "PATCH";
            for (name, value) in sent.as_object().cloned().unwrap_or_default() {
                let shown = &body["data"][&name];
                match (&value, merge) {
                    // A merge patch's object: each member it sets shown as
                    // sent, each it removes gone (the rest kept).
                    (Value::Object(members), true) => {
                        for (member, value) in members {
                            let expected = if value.is_null() { &Value::Null } else { value };
                            assert!(
                                integration_tests::same_json(&shown[member], expected),
                                "{}: {name}.{member}",
                                path.display()
                            );
                        }
                    }
                    _ => assert!(
                        integration_tests::same_json(shown, &value),
                        "{}: {name}",
                        path.display()
                    ),
                }
            }
        }
    }
}

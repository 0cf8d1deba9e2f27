//! `PATCH` with a JSON Merge Patch (RFC 7396), through the functions' own
//! handlers: RFC 7396's examples on a model's parameters, headers merged by
//! name and sealed, limits on the merged result, preconditions, media
//! types, the calls a patch makes, and concurrent patches, on the memory
//! store and on DynamoDB Local.

use std::sync::Arc;

use agent_server_shared::item::Attr;
use agent_server_shared::item::{self, Item};
use agent_server_shared::rules::Policy;
use agent_server_shared::seal::{MemorySealer, Sealer};
use agent_server_shared::store::{Key, MemoryStore, Store};
use agent_server_shared::{App, Settings, Table};
use integration_tests::events::Event;
use integration_tests::{
    Route, body_json, client, dynamo_app, dynamo_local, get_item, put_item, stored_json,
};
use serde_json::{Value, json};

fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

struct Answer {
    status: u16,
    body: Value,
    etag: Option<String>,
    headers: aws_lambda_events::http::HeaderMap,
}

async fn patch<S: Store>(
    app: &App<S>,
    route: Route,
    key: &Key,
    body: &Value,
    headers: &[(&str, &str)],
) -> Answer {
    let mut event = Event::patch(route, &key.id, key.project_id.as_deref()).json(body);
    for (name, value) in headers {
        event = event.header(name, value);
    }
    let response = route.call(app, event.request()).await;
    Answer {
        status: response.status().as_u16(),
        body: body_json(&response),
        etag: response
            .headers()
            .get("etag")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        headers: response.headers().clone(),
    }
}

fn memory_app() -> (App<MemoryStore>, Arc<MemorySealer>) {
    let sealer = Arc::new(MemorySealer::new());
    let app = App {
        store: MemoryStore::new(),
        settings: Settings::default(),
        sealer: Some(Sealer::Memory(sealer.clone())),
    };
    (app, sealer)
}

/// Stores `item` for `route` in the memory store and returns its key.
fn seeded(app: &App<MemoryStore>, route: Route, item: Item) -> Key {
    let key = Key::of_item(route.table(), &item).expect("no key");
    assert!(app.store.put(route.table(), item));
    key
}

fn model_with(parameters: Value) -> Item {
    let mut item = Route::Models.item(&new_id(), &new_id());
    item.insert("parameters".into(), item::to_attribute(&parameters));
    item
}

/// RFC 7396, Appendix A, on a model's parameters: the answer and the
/// stored item both hold the merged result.
async fn the_rfc_examples_on<S: Store>(
    app: &App<S>,
    put: impl AsyncFn(Item) -> Key,
    get: impl AsyncFn(&Key) -> Item,
) {
    let cases = [
        (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
        (json!({"a": "b"}), json!({"b": "c"}), json!({"a": "b", "b": "c"})),
        (json!({"a": "b"}), json!({"a": null}), json!({})),
        (json!({"a": "b", "b": "c"}), json!({"a": null}), json!({"b": "c"})),
        (json!({"a": ["b"]}), json!({"a": "c"}), json!({"a": "c"})),
        (json!({"a": "c"}), json!({"a": ["b"]}), json!({"a": ["b"]})),
        (
            json!({"a": {"b": "c"}}),
            json!({"a": {"b": "d", "c": null}}),
            json!({"a": {"b": "d"}}),
        ),
        (json!({"a": [{"b": "c"}]}), json!({"a": [1]}), json!({"a": [1]})),
        (json!({"e": null}), json!({"a": 1}), json!({"e": null, "a": 1})),
        (
            json!({}),
            json!({"a": {"bb": {"ccc": null}}}),
            json!({"a": {"bb": {}}}),
        ),
    ];
    for (original, change, expected) in cases {
        let key = put(model_with(original.clone())).await;
        let answer = patch(app, Route::Models, &key, &json!({"parameters": change}), &[]).await;
        assert_eq!(answer.status, 200, "{change}: {}", answer.body);
        assert_eq!(
            answer.body["data"]["parameters"], expected,
            "{original} + {change}"
        );
        assert_eq!(answer.body["message"], "Model updated successfully");
        assert_eq!(
            stored_json(&get(&key).await, "parameters"),
            expected,
            "stored: {change}"
        );
        let fields = get(&key).await.get("updated_fields").cloned();
        assert_eq!(fields, Some(Attr::Ss(vec!["parameters".into()])));
    }
}

#[tokio::test]
async fn the_rfc_examples_hold_in_process() {
    let (app, _) = memory_app();
    let app = &app;
    the_rfc_examples_on(
        app,
        async |item| seeded(app, Route::Models, item),
        async |key| app.store.get(Table::Models, key).unwrap_or_default(),
    )
    .await;
}

#[tokio::test]
async fn the_rfc_examples_hold_on_dynamodb_local() {
    let app = dynamo_app(Policy::default()).await;
    let dynamo = client(&dynamo_local().await.endpoint);
    let dynamo = &dynamo;
    the_rfc_examples_on(
        &app,
        async |item| {
            let key = Key::of_item(Table::Models, &item).expect("no key");
            put_item(dynamo, Table::Models, item).await;
            key
        },
        async |key| get_item(dynamo, Table::Models, key).await.unwrap_or_default(),
    )
    .await;
}

#[tokio::test]
async fn one_header_changes_or_goes_without_sending_the_others() {
    let (app, sealer) = memory_app();
    let key = seeded(
        &app,
        Route::McpServers,
        Route::McpServers.item(&new_id(), &new_id()),
    );
    let headers = json!({"Authorization": "Bearer one", "X-Api-Key": "k", "Accept": "*/*"});
    let set = integration_tests::events::Event::put(Route::McpServers, &key.id, key.project_id.as_deref())
        .json(&json!({"headers": headers}));
    assert_eq!(Route::McpServers.call(&app, set.request()).await.status(), 200);
    let sealed_key = app
        .store
        .get(Table::McpServers, &key)
        .and_then(|item| item.get("headers_key").cloned());
    let (calls, kms) = (app.store.calls(), sealer.calls());
    // Rotate one token (named in another case) and drop one header.
    let answer = patch(
        &app,
        Route::McpServers,
        &key,
        &json!({"headers": {"authorization": "Bearer two", "x_api_key": null}}),
        &[],
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let expected = json!({"Accept": "*/*", "authorization": "Bearer two"});
    assert_eq!(answer.body["data"]["headers"], expected);
    assert_eq!(answer.body["message"], "MCP server updated successfully");
    // A read, one Decrypt of the record's key, one write.
    assert_eq!((app.store.calls() - calls, sealer.calls() - kms), (2, 1));
    let stored = app.store.get(Table::McpServers, &key).unwrap_or_default();
    assert_eq!(
        stored_json(&stored, "headers"),
        expected,
        "stored sealed under the record's key"
    );
    assert_eq!(
        stored.get("headers_key").cloned(),
        sealed_key,
        "the record kept its data key"
    );
    let Some(Attr::M(members)) = stored.get("headers") else {
        panic!("no headers")
    };
    assert!(
        members.values().all(|value| matches!(value, Attr::B(_))),
        "a plain value at rest"
    );
    // A rename by PATCH is a partial update: one write, headers shown.
    let (calls, kms) = (app.store.calls(), sealer.calls());
    let renamed = patch(&app, Route::McpServers, &key, &json!({"name": "Renamed"}), &[]).await;
    assert_eq!(
        (renamed.status, renamed.body["data"]["headers"].clone()),
        (200, expected)
    );
    assert!(app.store.calls() - calls <= 2 && sealer.calls() - kms == 1);
    // null removes the headers, and their key.
    let removed = patch(&app, Route::McpServers, &key, &json!({"headers": null}), &[]).await;
    assert_eq!(
        (removed.status, removed.body["data"]["headers"].clone()),
        (200, Value::Null)
    );
    let stored = app.store.get(Table::McpServers, &key).unwrap_or_default();
    assert!(!stored.contains_key("headers") && !stored.contains_key("headers_key"));
    // Headers added to a record with none get a new key, one KMS call.
    let kms = sealer.calls();
    let added = patch(
        &app,
        Route::McpServers,
        &key,
        &json!({"headers": {"X-New": "v"}}),
        &[],
    )
    .await;
    assert_eq!(
        (added.status, added.body["data"]["headers"].clone()),
        (200, json!({"X-New": "v"}))
    );
    assert_eq!(sealer.calls() - kms, 1);
    let stored = app.store.get(Table::McpServers, &key).unwrap_or_default();
    assert_eq!(stored_json(&stored, "headers"), json!({"X-New": "v"}));
}

/// The same on DynamoDB Local, with the local KMS: a sealed record's one
/// header rotated, another removed, the key kept; every combination of what
/// the write does to the data key (keep, set, remove) accepted by DynamoDB.
#[tokio::test]
async fn one_header_changes_on_dynamodb_local_with_the_local_kms() {
    let kms = integration_tests::kms_local().await;
    let mut app = dynamo_app(Policy::default()).await;
    app.sealer = Some(kms.sealer());
    let dynamo = client(&dynamo_local().await.endpoint);
    let item = Route::McpServers.item(&new_id(), &new_id());
    let key = Key::of_item(Table::McpServers, &item).expect("no key");
    put_item(&dynamo, Table::McpServers, item).await;
    // Plain headers merged: a new key.
    let first = patch(
        &app,
        Route::McpServers,
        &key,
        &json!({"headers": {"Authorization": "Bearer one", "X-Old": null}}),
        &[],
    )
    .await;
    assert_eq!(
        (first.status, first.body["data"]["headers"].clone()),
        (200, json!({"Authorization": "Bearer one"})),
        "{}",
        first.body
    );
    let sealed_key = get_item(&dynamo, Table::McpServers, &key)
        .await
        .and_then(|item| item.get("headers_key").cloned());
    assert!(matches!(sealed_key, Some(Attr::B(_))));
    // Sealed headers merged: the key kept.
    let second = patch(
        &app,
        Route::McpServers,
        &key,
        &json!({"headers": {"authorization": "Bearer two", "X-More": "m"}}),
        &[],
    )
    .await;
    assert_eq!(
        (second.status, second.body["data"]["headers"].clone()),
        (200, json!({"authorization": "Bearer two", "X-More": "m"})),
        "{}",
        second.body
    );
    let stored = get_item(&dynamo, Table::McpServers, &key)
        .await
        .unwrap_or_default();
    assert_eq!(stored.get("headers_key").cloned(), sealed_key);
    assert!(!format!("{stored:?}").contains("Bearer two"));
    // Every member removed: the key goes too.
    let third = patch(
        &app,
        Route::McpServers,
        &key,
        &json!({"headers": {"authorization": null, "x-more": null}}),
        &[],
    )
    .await;
    assert_eq!(
        (third.status, third.body["data"]["headers"].clone()),
        (200, json!({})),
        "{}",
        third.body
    );
    let stored = get_item(&dynamo, Table::McpServers, &key)
        .await
        .unwrap_or_default();
    assert_eq!(stored.get("headers_key"), None);
}

#[tokio::test]
async fn plain_headers_stored_before_sealing_are_sealed_by_a_patch_that_touches_them() {
    let (app, sealer) = memory_app();
    // Route::item stores headers as plain text (M of S), as written before.
    let key = seeded(
        &app,
        Route::McpServers,
        Route::McpServers.item(&new_id(), &new_id()),
    );
    let answer = patch(
        &app,
        Route::McpServers,
        &key,
        &json!({"headers": {"X-Added": "a"}}),
        &[],
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(
        answer.body["data"]["headers"],
        json!({"X-Old": "old", "X-Added": "a"})
    );
    assert_eq!(sealer.calls(), 1, "a new data key");
    let stored = app.store.get(Table::McpServers, &key).unwrap_or_default();
    let Some(Attr::M(members)) = stored.get("headers") else {
        panic!("no headers")
    };
    assert!(members.values().all(|value| matches!(value, Attr::B(_))));
    assert_eq!(
        stored_json(&stored, "headers"),
        json!({"X-Old": "old", "X-Added": "a"})
    );
}

#[tokio::test]
async fn every_limit_holds_on_the_merged_result_and_a_refusal_writes_nothing() {
    let (app, _) = memory_app();
    let full: serde_json::Map<String, Value> = (0..64).map(|i| (format!("H{i}"), json!("v"))).collect();
    let mut item = Route::McpServers.item(&new_id(), &new_id());
    item.insert("headers".into(), item::to_attribute(&Value::Object(full)));
    let key = seeded(&app, Route::McpServers, item);
    let before = app.store.get(Table::McpServers, &key);
    for (change, field, code) in [
        (json!({"headers": {"H64": "v"}}), "headers", "too_many_entries"),
        (
            json!({"headers": {"X-A": "1", "x_a": "2"}}),
            "headers.x_a",
            "duplicate_name",
        ),
        (
            json!({"headers": {"Host": "h"}}),
            "headers.Host",
            "forbidden_name",
        ),
        (json!({"headers": {"A": 1}}), "headers.A", "invalid_type"),
        (json!({"headers": ["x"]}), "headers", "invalid_type"),
        (json!({"name": null}), "name", "invalid_type"),
        (json!({"endpoint": null}), "endpoint", "invalid_type"),
        (json!({"id": "x"}), "id", "read_only"),
        (json!({"parameters": {}}), "parameters", "unknown_field"),
    ] {
        let answer = patch(&app, Route::McpServers, &key, &change, &[]).await;
        assert_eq!(answer.status, 400, "{change}: {}", answer.body);
        assert_eq!(answer.body["errorDetails"]["code"], "validation_failed");
        let found: Vec<(String, String)> = answer.body["errorDetails"]["fields"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|f| {
                (
                    f["field"].as_str().unwrap_or_default().into(),
                    f["code"].as_str().unwrap_or_default().into(),
                )
            })
            .collect();
        assert!(
            found.contains(&(field.to_string(), code.to_string())),
            "{change}: {found:?}"
        );
        assert_eq!(app.store.get(Table::McpServers, &key), before, "{change} wrote");
    }
    // Patches that each fit a body cannot grow the headers past what a PUT
    // could store (64 KiB as compact JSON): the one that would is a 400.
    let (big_app, _) = memory_app();
    let big = seeded(
        &big_app,
        Route::McpServers,
        Route::McpServers.item(&new_id(), &new_id()),
    );
    let mut refused = None;
    for round in 0..12 {
        let change: serde_json::Map<String, Value> = (0..7)
            .map(|i| (format!("R{round}-{i}"), json!("v".repeat(8000))))
            .collect();
        let before = big_app.store.get(Table::McpServers, &big);
        let answer = patch(
            &big_app,
            Route::McpServers,
            &big,
            &json!({"headers": change}),
            &[],
        )
        .await;
        if answer.status != 200 {
            assert_eq!(answer.status, 400, "round {round}: {}", answer.body);
            assert_eq!(answer.body["errorDetails"]["fields"][0]["code"], "too_large");
            assert_eq!(answer.body["errorDetails"]["fields"][0]["field"], "headers");
            assert_eq!(
                big_app.store.get(Table::McpServers, &big),
                before,
                "a refused patch wrote"
            );
            refused = Some(round);
            break;
        }
    }
    assert_eq!(refused, Some(1), "the second 56 KB patch must be refused");
    // Another spelling of a stored name replaces it: still 64.
    let respelled = patch(
        &app,
        Route::McpServers,
        &key,
        &json!({"headers": {"h0": "w"}}),
        &[],
    )
    .await;
    assert_eq!(respelled.status, 200, "{}", respelled.body);
    assert_eq!(
        respelled.body["data"]["headers"].as_object().map(|h| h.len()),
        Some(64)
    );
    assert_eq!(respelled.body["data"]["headers"]["h0"], "w");
    // Removing one and adding one stays within the limit.
    let swap = patch(
        &app,
        Route::McpServers,
        &key,
        &json!({"headers": {"H1": null, "H64": "v"}}),
        &[],
    )
    .await;
    assert_eq!(swap.status, 200, "{}", swap.body);
    // Parameters: a merge that makes them too deep is refused.
    let (project, id) = (new_id(), new_id());
    let mut deep = json!(1);
    for _ in 0..15 {
        deep = json!({"d": deep});
    }
    let mut model = Route::Models.item(&project, &id);
    model.insert("parameters".into(), item::to_attribute(&json!({"d": deep})));
    let key = seeded(&app, Route::Models, model);
    let mut deeper = json!(1);
    for _ in 0..17 {
        deeper = json!({"d": deeper});
    }
    let answer = patch(&app, Route::Models, &key, &json!({"parameters": deeper}), &[]).await;
    assert_eq!(answer.status, 400, "{}", answer.body);
}

#[tokio::test]
async fn only_a_merge_patch_is_a_patch_and_every_415_says_so() {
    let (app, _) = memory_app();
    let key = seeded(&app, Route::Models, Route::Models.item(&new_id(), &new_id()));
    for content_type in [
        "application/json",
        "application/json-patch+json",
        "text/plain",
        "",
    ] {
        let answer = patch(
            &app,
            Route::Models,
            &key,
            &json!({"name": "x"}),
            &[("content-type", content_type)],
        )
        .await;
        assert_eq!(answer.status, 415, "{content_type:?}: {}", answer.body);
        assert_eq!(answer.body["errorDetails"]["code"], "unsupported_media_type");
        assert_eq!(answer.headers["accept-patch"], "application/merge-patch+json");
    }
    let with_charset = patch(
        &app,
        Route::Models,
        &key,
        &json!({"name": "x"}),
        &[("content-type", "Application/Merge-Patch+JSON; charset=utf-8")],
    )
    .await;
    assert_eq!(with_charset.status, 200, "{}", with_charset.body);
    // PUT refuses the merge patch type, and says where it goes.
    let put = Event::put(Route::Models, &key.id, key.project_id.as_deref())
        .header("content-type", "application/merge-patch+json")
        .json(&json!({"name": "x"}));
    let response = Route::Models.call(&app, put.request()).await;
    assert_eq!(response.status().as_u16(), 415);
    assert_eq!(response.headers()["accept-patch"], "application/merge-patch+json");
}

#[tokio::test]
async fn preconditions_hold_and_a_stale_one_writes_nothing() {
    let (app, _) = memory_app();
    let key = seeded(&app, Route::Models, model_with(json!({"temperature": 0.5})));
    let change = json!({"parameters": {"max_tokens": 10}});
    let stale = patch(&app, Route::Models, &key, &change, &[("if-match", "\"7\"")]).await;
    assert_eq!((stale.status, stale.etag.as_deref()), (412, Some("\"0\"")));
    let none_match = patch(&app, Route::Models, &key, &change, &[("if-none-match", "*")]).await;
    assert_eq!(none_match.status, 412);
    assert_eq!(
        app.store
            .get(Table::Models, &key)
            .and_then(|i| i.get("version").cloned()),
        None
    );
    let fresh = patch(&app, Route::Models, &key, &change, &[("if-match", "\"0\"")]).await;
    assert_eq!((fresh.status, fresh.etag.as_deref()), (200, Some("\"1\"")));
    assert_eq!(
        fresh.body["data"]["parameters"],
        json!({"temperature": 0.5, "max_tokens": 10})
    );
    assert!(fresh.headers.contains_key("last-modified"));
    let missing = Key {
        id: new_id(),
        ..key.clone()
    };
    let gone = patch(&app, Route::Models, &missing, &change, &[]).await;
    assert_eq!(gone.status, 404);
}

#[tokio::test]
async fn an_api_key_patch_is_sealed_as_a_put_is() {
    let (app, sealer) = memory_app();
    let key = seeded(&app, Route::ApiKeys, Route::ApiKeys.item("", &new_id()));
    let answer = patch(
        &app,
        Route::ApiKeys,
        &key,
        &json!({"api_key": "sk-PATCHED", "enabled": false}),
        &[],
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(!answer.body.to_string().contains("sk-PATCHED"));
    assert_eq!(sealer.calls(), 1);
    let stored = app.store.get(Table::ApiKeys, &key).unwrap_or_default();
    assert!(matches!(stored.get("api_key"), Some(Attr::B(_))));
    assert_eq!(stored_json(&stored, "api_key"), json!("sk-PATCHED"));
    let refused = patch(&app, Route::ApiKeys, &key, &json!({"api_key": null}), &[]).await;
    assert_eq!(refused.status, 400);
}

/// Concurrent patches on DynamoDB Local: two writers of different members
/// both land; of many writers holding the same ETag, one wins.
#[tokio::test]
async fn concurrent_patches_merge_and_if_match_lets_one_win() {
    let app = Arc::new(dynamo_app(Policy::default()).await);
    let dynamo = client(&dynamo_local().await.endpoint);
    for round in 0..5 {
        let item = model_with(json!({"kept": round}));
        let key = Key::of_item(Table::Models, &item).expect("no key");
        put_item(&dynamo, Table::Models, item).await;
        let writers: Vec<_> = ["a", "b"]
            .into_iter()
            .map(|member| {
                let (app, key) = (app.clone(), key.clone());
                tokio::spawn(async move {
                    patch(
                        &*app,
                        Route::Models,
                        &key,
                        &json!({"parameters": {member: member}}),
                        &[],
                    )
                    .await
                    .status
                })
            })
            .collect();
        for writer in writers {
            assert_eq!(writer.await.ok(), Some(200), "round {round}");
        }
        let stored = get_item(&dynamo, Table::Models, &key).await.unwrap_or_default();
        assert_eq!(
            stored_json(&stored, "parameters"),
            json!({"kept": round, "a": "a", "b": "b"}),
            "round {round}: a member was lost"
        );
    }
    let item = model_with(json!({}));
    let key = Key::of_item(Table::Models, &item).expect("no key");
    put_item(&dynamo, Table::Models, item).await;
    let writers: Vec<_> = (0..24)
        .map(|writer| {
            let (app, key) = (app.clone(), key.clone());
            tokio::spawn(async move {
                let change = json!({"parameters": {"writer": writer}});
                patch(&*app, Route::Models, &key, &change, &[("if-match", "\"0\"")])
                    .await
                    .status
            })
        })
        .collect();
    let mut statuses = Vec::new();
    for writer in writers {
        statuses.push(writer.await.unwrap_or_default());
    }
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 1, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 412).count(), 23, "{statuses:?}");
    let stored = get_item(&dynamo, Table::Models, &key).await.unwrap_or_default();
    assert_eq!(item::version(&stored), Ok(1));
}

mod properties {
    //! Random merge patches applied to random stored records through the
    //! in-memory store: never a 500, a 200 holds exactly RFC 7396's merge
    //! (computed here independently) and a record every rule accepts, and
    //! anything else writes nothing.

    use super::*;
    use agent_server_shared::patch;
    use agent_server_shared::records::{McpServer, Model};
    use proptest::prelude::*;
    use serde_json::Map;

    /// RFC 7396's MergePatch, as its section 2 states it.
    fn merged(target: &Value, patch: &Value) -> Value {
        let Value::Object(members) = patch else {
            return patch.clone();
        };
        let mut result = match target {
            Value::Object(target) => target.clone(),
            _ => Map::new(),
        };
        for (name, value) in members {
            if value.is_null() {
                result.remove(name);
            } else {
                let merged = merged(result.get(name).unwrap_or(&Value::Null), value);
                result.insert(name.clone(), merged);
            }
        }
        Value::Object(result)
    }

    fn leaf() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            (-1000i64..1000).prop_map(Value::from),
            "[a-z ]{0,8}".prop_map(Value::from),
        ]
    }

    /// Nested objects over a few keys (so patches meet stored members),
    /// with an empty key now and then (a rule a merge must still hold).
    fn tree() -> impl Strategy<Value = Value> {
        leaf().prop_recursive(5, 40, 4, |inner| {
            prop_oneof![
                prop::collection::btree_map(
                    prop::sample::select(vec!["a", "b", "c", "d", ""]),
                    inner.clone(),
                    0..4
                )
                .prop_map(|map| Value::Object(map.into_iter().map(|(k, v)| (k.to_string(), v)).collect())),
                prop::collection::vec(inner, 0..3).prop_map(Value::Array),
            ]
        })
    }

    fn object(value: Value) -> Value {
        match value {
            Value::Object(_) => value,
            other => json!({"x": other}),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        #[test]
        fn a_parameters_patch_merges_exactly_or_writes_nothing(stored in tree(), change in tree()) {
            let (app, _) = memory_app();
            let stored = object(stored);
            // A record a PUT could have stored: what the rules accept.
            prop_assume!(patch::parse::<Model>(&json!({"parameters": stored}).as_object().cloned().unwrap_or_default(), Policy::default()).is_ok());
            let key = seeded(&app, Route::Models, model_with(stored.clone()));
            let before = app.store.get(Table::Models, &key);
            let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let answer = runtime.block_on(patch(&app, Route::Models, &key, &json!({"parameters": change}), &[]));
            prop_assert!(answer.status == 200 || answer.status == 400, "{}: {}", answer.status, answer.body);
            if answer.status == 200 {
                let expected = merged(&stored, &change);
                prop_assert_eq!(&answer.body["data"]["parameters"], &expected);
                let after = app.store.get(Table::Models, &key).unwrap_or_default();
                prop_assert_eq!(stored_json(&after, "parameters"), expected.clone());
                // Removed (null), or a value every rule accepts.
                let as_body = json!({"parameters": expected});
                prop_assert!(
                    expected.is_null()
                        || patch::parse::<Model>(as_body.as_object().unwrap_or(&Map::new()), Policy::default()).is_ok()
                );
            } else {
                prop_assert_eq!(app.store.get(Table::Models, &key), before);
            }
        }

        #[test]
        fn a_headers_patch_merges_by_name_or_writes_nothing(
            stored in prop::collection::btree_map("[A-Ca-c][-_]?[a-b]?", "[a-z]{0,6}", 0..6),
            change in prop::collection::btree_map(
                "[A-Ca-c][-_]?[a-b]?|Host|X_aws_ec2_metadata_token",
                prop_oneof![Just(Value::Null), "[a-z]{0,6}".prop_map(Value::from), Just(json!("bad\n")), Just(json!(1))],
                0..6,
            ),
        ) {
            let (app, _) = memory_app();
            let stored: Map<String, Value> = stored.into_iter().map(|(k, v)| (k, Value::from(v))).collect();
            prop_assume!(patch::parse::<McpServer>(&json!({"headers": stored}).as_object().cloned().unwrap_or_default(), Policy::default()).is_ok());
            let mut item = Route::McpServers.item(&new_id(), &new_id());
            item.insert("headers".into(), item::to_attribute(&Value::Object(stored.clone())));
            let key = seeded(&app, Route::McpServers, item);
            let before = app.store.get(Table::McpServers, &key);
            let change: Map<String, Value> = change.into_iter().collect();
            let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let answer = runtime.block_on(patch(&app, Route::McpServers, &key, &json!({"headers": change}), &[]));
            prop_assert!(answer.status == 200 || answer.status == 400, "{}: {}", answer.status, answer.body);
            let same = |a: &str, b: &str| a.replace('_', "-").eq_ignore_ascii_case(&b.replace('_', "-"));
            if answer.status == 200 {
                let mut expected = stored.clone();
                for (name, value) in &change {
                    expected.retain(|existing, _| !same(existing, name));
                    if !value.is_null() {
                        expected.insert(name.clone(), value.clone());
                    }
                }
                prop_assert_eq!(&answer.body["data"]["headers"], &Value::Object(expected.clone()));
                let after = app.store.get(Table::McpServers, &key).unwrap_or_default();
                prop_assert_eq!(stored_json(&after, "headers"), Value::Object(expected.clone()));
                let as_body = json!({"headers": expected});
                prop_assert!(patch::parse::<McpServer>(as_body.as_object().unwrap_or(&Map::new()), Policy::default()).is_ok());
            } else {
                prop_assert_eq!(app.store.get(Table::McpServers, &key), before);
            }
        }
    }
}

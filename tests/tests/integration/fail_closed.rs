//! Writes on records other hands changed, on the memory store and on
//! DynamoDB Local alike: sealed values tampered with in the table are a 500
//! with nothing written, on every route and method that answers with them;
//! a fractional version and members stored as other DynamoDB types survive
//! a merge; a `null` removes any stored header name; `PATCH {}` answers the
//! record and writes nothing; concurrent member patches all land.

use std::sync::Arc;

use agent_server_shared::item::Attr;
use agent_server_shared::item::{self, Item};
use agent_server_shared::rules::Policy;
use agent_server_shared::store::{DynamoStore, Key, MemoryStore, Store};
use agent_server_shared::{App, Table};
use integration_tests::events::Event;
use integration_tests::{
    Route, body_json, client, dynamo_app, dynamo_local, get_item, memory_app, put_item, stored_json,
};
use serde_json::{Value, json};

/// A store the test can also read and write behind the service's back.
trait Backdoor: Store {
    async fn plant(&self, table: Table, item: Item);
    async fn item(&self, table: Table, key: &Key) -> Item;
}

impl Backdoor for MemoryStore {
    async fn plant(&self, table: Table, item: Item) {
        assert!(self.put(table, item));
    }
    async fn item(&self, table: Table, key: &Key) -> Item {
        self.get(table, key).expect("the record")
    }
}

impl Backdoor for DynamoStore {
    async fn plant(&self, table: Table, item: Item) {
        put_item(self.client(), table, item).await;
    }
    async fn item(&self, table: Table, key: &Key) -> Item {
        get_item(self.client(), table, key).await.expect("the record")
    }
}

struct Answer {
    status: u16,
    body: Value,
    etag: Option<String>,
    last_modified: Option<String>,
}

async fn send<S: Store>(app: &App<S>, route: Route, event: Event) -> Answer {
    let response = route.call(app, event.request()).await;
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    };
    Answer {
        status: response.status().as_u16(),
        etag: header("etag"),
        last_modified: header("last-modified"),
        body: body_json(&response),
    }
}

fn put(route: Route, key: &Key, body: &Value) -> Event {
    Event::put(route, &key.id, key.project_id.as_deref()).json(body)
}

fn patch(route: Route, key: &Key, body: &Value) -> Event {
    Event::patch(route, &key.id, key.project_id.as_deref()).json(body)
}

fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A fresh record of `route` as the fixtures store it.
async fn record<S: Backdoor>(app: &App<S>, route: Route) -> (Key, Item) {
    let item = route.item(&new_id(), &new_id());
    let key = Key::of_item(route.table(), &item).expect("no key");
    app.store.plant(route.table(), item.clone()).await;
    (key, item)
}

/// An MCP server record whose headers were set (and so sealed) through the
/// API, and another's, to copy from.
async fn sealed_record<S: Backdoor>(app: &App<S>) -> (Key, Item, Item) {
    let route = Route::McpServers;
    let headers = json!({"Authorization": "Bearer SENTINEL-a", "X-Api-Key": "SENTINEL-b"});
    let mut sealed = Vec::new();
    for _ in 0..2 {
        let (key, _) = record(app, route).await;
        let set = send(app, route, put(route, &key, &json!({"headers": headers}))).await;
        assert_eq!(set.status, 200, "{}", set.body);
        sealed.push((key.clone(), app.store.item(route.table(), &key).await));
    }
    let (_, other) = sealed.pop().expect("two records");
    let (key, item) = sealed.pop().expect("two records");
    (key, item, other)
}

fn members(item: &mut Item) -> &mut std::collections::HashMap<String, Attr> {
    match item.get_mut("headers") {
        Some(Attr::M(members)) => members,
        _ => panic!("no headers"),
    }
}

fn bytes(value: &Attr) -> Vec<u8> {
    match value {
        Attr::B(blob) => blob.clone(),
        _ => panic!("not sealed"),
    }
}

/// Each way of tampering with a record's sealed headers, applied to `item`
/// (`other` is another record's, sealed the same way).
/// A change made to a record behind the service's back, given another
/// record to copy from.
type Tamper = fn(&mut Item, &Item);

fn tamperings() -> Vec<(&'static str, Tamper)> {
    vec![
        ("two values swapped between members", |item, _| {
            let headers = members(item);
            let a = headers.remove("Authorization").expect("a");
            let b = headers.remove("X-Api-Key").expect("b");
            headers.insert("Authorization".into(), b);
            headers.insert("X-Api-Key".into(), a);
        }),
        ("one bit flipped", |item, _| {
            let value = members(item).get_mut("Authorization").expect("a");
            let mut flipped = bytes(value);
            let last = flipped.len() - 1;
            flipped[last] ^= 1;
            *value = Attr::B(flipped);
        }),
        ("a value copied from another record", |item, other| {
            let mut other = other.clone();
            let copied = members(&mut other).remove("Authorization").expect("a");
            members(item).insert("Authorization".into(), copied);
        }),
        ("a member renamed", |item, _| {
            let headers = members(item);
            let value = headers.remove("Authorization").expect("a");
            headers.insert("X-Renamed".into(), value);
        }),
        ("the layout byte changed to the first layout", |item, _| {
            let value = members(item).get_mut("Authorization").expect("a");
            let mut changed = bytes(value);
            changed[0] = 1;
            *value = Attr::B(changed);
        }),
        ("the layout byte changed to an unknown one", |item, _| {
            let value = members(item).get_mut("Authorization").expect("a");
            let mut changed = bytes(value);
            changed[0] = 9;
            *value = Attr::B(changed);
        }),
        ("headers_key removed", |item, _| {
            item.remove("headers_key");
        }),
        ("headers_key from another record", |item, other| {
            item.insert("headers_key".into(), other["headers_key"].clone());
        }),
    ]
}

/// Every request that answers with a tampered record's values: a 500 and
/// the item exactly as it was; a request that replaces them all is fine.
async fn tampered_values_fail_closed<S: Backdoor>(app: &App<S>) {
    let route = Route::McpServers;
    for (tampering, tamper) in tamperings() {
        let (key, mut item, other) = sealed_record(app).await;
        tamper(&mut item, &other);
        app.store.plant(route.table(), item.clone()).await;
        for event in [
            put(route, &key, &json!({"name": "Renamed"})),
            put(route, &key, &json!({"endpoint": "https://mcp.example.com/mcp"})),
            patch(route, &key, &json!({"name": "Renamed"})),
            patch(route, &key, &json!({"headers": {"X-More": "m"}})),
            patch(route, &key, &json!({"headers": {"X-Api-Key": null}})),
            patch(route, &key, &json!({})),
            patch(route, &key, &json!({"name": "Renamed"})).header("if-match", "\"1\""),
        ] {
            let answer = send(app, route, event).await;
            assert_eq!(answer.status, 500, "{tampering}: {}", answer.body);
            assert_eq!(answer.body["errorDetails"]["code"], "internal", "{tampering}");
            assert!(!answer.body.to_string().contains("SENTINEL"), "{tampering}");
            assert_eq!(
                app.store.item(route.table(), &key).await,
                item,
                "{tampering}: written under a 500"
            );
        }
        // Replacing every value opens none: the record is whole again.
        let replaced = send(app, route, put(route, &key, &json!({"headers": {"A": "1"}}))).await;
        assert_eq!(replaced.status, 200, "{tampering}: {}", replaced.body);
        let renamed = send(app, route, put(route, &key, &json!({"name": "Whole"}))).await;
        assert_eq!(renamed.status, 200, "{tampering}: {}", renamed.body);
        assert_eq!(renamed.body["data"]["headers"], json!({"A": "1"}));
    }
}

/// A version another writer stored as a fraction: a merge patch behaves as
/// a PUT does (the next version, `2.5`), preconditions included.
async fn a_fractional_version_merges<S: Backdoor>(app: &App<S>) {
    let route = Route::Models;
    let (key, mut item) = record(app, route).await;
    item.insert("version".into(), Attr::N("1.5".into()));
    item.insert("parameters".into(), item::to_attribute(&json!({"a": 1})));
    app.store.plant(route.table(), item).await;
    let merge = json!({"parameters": {"b": 2}});
    for (header, value) in [
        ("if-match", "\"1\""),
        ("if-none-match", "*"),
        ("if-unmodified-since", "Thu, 01 Jan 1970 00:00:00 GMT"),
    ] {
        let refused = send(app, route, patch(route, &key, &merge).header(header, value)).await;
        assert_eq!(refused.status, 412, "{header}: {}", refused.body);
        assert_eq!(refused.etag.as_deref(), Some("\"1.5\""), "{header}");
    }
    for (header, value) in [
        ("if-none-match", "\"1\""),
        ("if-unmodified-since", "Fri, 31 Dec 9999 23:59:59 GMT"),
        ("if-match", "*"),
    ] {
        let (key, mut item) = record(app, route).await;
        item.insert("version".into(), Attr::N("1.5".into()));
        app.store.plant(route.table(), item).await;
        let merged = send(app, route, patch(route, &key, &merge).header(header, value)).await;
        assert_eq!(merged.status, 200, "{header}: {}", merged.body);
        assert_eq!(merged.etag.as_deref(), Some("\"2.5\""), "{header}");
    }
    let merged = send(app, route, patch(route, &key, &merge)).await;
    assert_eq!(
        (merged.status, merged.etag.as_deref()),
        (200, Some("\"2.5\"")),
        "{}",
        merged.body
    );
    assert_eq!(merged.body["data"]["parameters"], json!({"a": 1, "b": 2}));
}

/// Members a merge patch does not touch keep the DynamoDB type another
/// tool stored them as.
async fn untouched_members_keep_their_types<S: Backdoor>(app: &App<S>) {
    let route = Route::Models;
    let (key, mut item) = record(app, route).await;
    let stored = std::collections::HashMap::from([
        ("bin".to_string(), Attr::B(b"raw".to_vec())),
        ("strings".to_string(), Attr::Ss(vec!["a".into(), "b".into()])),
        ("numbers".to_string(), Attr::Ns(vec!["1".into(), "2.5".into()])),
        (
            "nested".to_string(),
            Attr::M(std::collections::HashMap::from([
                ("blobs".to_string(), Attr::Bs(vec![b"x".to_vec()])),
                ("n".to_string(), Attr::N("1".into())),
            ])),
        ),
    ]);
    item.insert("parameters".into(), Attr::M(stored.clone()));
    app.store.plant(route.table(), item).await;
    let merged = send(
        app,
        route,
        patch(
            route,
            &key,
            &json!({"parameters": {"nested": {"n": 2}, "added": true}}),
        ),
    )
    .await;
    assert_eq!(merged.status, 200, "{}", merged.body);
    let after = app.store.item(route.table(), &key).await;
    let Some(Attr::M(members)) = after.get("parameters") else {
        panic!("parameters lost");
    };
    for kept in ["bin", "strings", "numbers"] {
        assert_eq!(members.get(kept), stored.get(kept), "{kept} changed type");
    }
    let Some(Attr::M(nested)) = members.get("nested") else {
        panic!("nested lost");
    };
    assert_eq!(nested.get("blobs"), Some(&Attr::Bs(vec![b"x".to_vec()])));
    assert_eq!(nested.get("n"), Some(&Attr::N("2".into())));
    assert_eq!(members.get("added"), Some(&Attr::Bool(true)));
}

/// A `null` removes a stored header whatever its name, one the rules refuse
/// now included; a name being set is still held to them.
async fn null_removes_any_stored_name<S: Backdoor>(app: &App<S>) {
    let route = Route::McpServers;
    let (key, mut item) = record(app, route).await;
    item.insert(
        "headers".into(),
        item::to_attribute(&json!({"Host": "legacy", "X_aws_ec2_metadata_token": "t", "X-Keep": "k"})),
    );
    app.store.plant(route.table(), item).await;
    let refused = send(
        app,
        route,
        patch(route, &key, &json!({"headers": {"host": "again"}})),
    )
    .await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    let removed = send(
        app,
        route,
        patch(
            route,
            &key,
            &json!({"headers": {"host": null, "x-aws-ec2-metadata-token": null}}),
        ),
    )
    .await;
    assert_eq!(removed.status, 200, "{}", removed.body);
    assert_eq!(removed.body["data"]["headers"], json!({"X-Keep": "k"}));
    let stored = app.store.item(route.table(), &key).await;
    let names: Vec<&String> = match stored.get("headers") {
        Some(Attr::M(members)) => members.keys().collect(),
        _ => Vec::new(),
    };
    assert_eq!(names, ["X-Keep"]);
}

/// `PATCH {}`: the record as it is, with its `ETag` and `Last-Modified`,
/// after the key, authorization and preconditions; nothing written.
async fn an_empty_patch_answers_the_record<S: Backdoor>(app: &App<S>) {
    for route in Route::ALL {
        let (key, _) = record(app, route).await;
        let body = route.full_body();
        let set = send(app, route, put(route, &key, &body)).await;
        assert_eq!(set.status, 200, "{route:?}: {}", set.body);
        let before = app.store.item(route.table(), &key).await;
        let empty = send(app, route, patch(route, &key, &json!({}))).await;
        assert_eq!(empty.status, 200, "{route:?}: {}", empty.body);
        assert_eq!(empty.body["data"], set.body["data"], "{route:?}");
        assert_eq!(empty.body["message"], set.body["message"], "{route:?}");
        assert_eq!(empty.etag, set.etag, "{route:?}");
        assert_eq!(empty.last_modified, set.last_modified, "{route:?}");
        assert!(empty.last_modified.is_some(), "{route:?}");
        let current = empty.etag.clone().unwrap_or_default();
        for (header, value, status) in [
            ("if-match", current.as_str(), 200),
            ("if-match", "\"999\"", 412),
            ("if-none-match", current.as_str(), 412),
            ("if-none-match", "*", 412),
            ("if-match", "*, \"1\"", 400),
        ] {
            let answer = send(app, route, patch(route, &key, &json!({})).header(header, value)).await;
            assert_eq!(
                answer.status, status,
                "{route:?} {header}: {value}: {}",
                answer.body
            );
        }
        assert_eq!(
            app.store.item(route.table(), &key).await,
            before,
            "{route:?}: written"
        );
        // The same checks as any update, before any read.
        let missing = Key {
            id: new_id(),
            ..key.clone()
        };
        assert_eq!(
            send(app, route, patch(route, &missing, &json!({}))).await.status,
            404
        );
        let forbidden = patch(route, &key, &json!({})).jwt(&[
            ("sub", "someone"),
            ("projects", "[00000000-0000-4000-8000-000000000000]"),
        ]);
        assert_eq!(send(app, route, forbidden).await.status, 403, "{route:?}");
        let as_json = patch(route, &key, &json!({})).header("content-type", "application/json");
        assert_eq!(send(app, route, as_json).await.status, 415, "{route:?}");
        // PUT {} is still nothing to update.
        let empty_put = send(app, route, put(route, &key, &json!({}))).await;
        assert_eq!(empty_put.body["errorDetails"]["code"], "empty_update");
    }
}

macro_rules! both_stores {
    ($($case:ident),* $(,)?) => {
        mod memory_store {
            $(#[tokio::test]
            async fn $case() {
                super::$case(&super::memory_app(super::Policy::default())).await;
            })*
        }
        mod dynamodb_local {
            $(#[tokio::test]
            async fn $case() {
                super::$case(&super::dynamo_app(super::Policy::default()).await).await;
            })*
        }
    };
}

both_stores!(
    tampered_values_fail_closed,
    a_fractional_version_merges,
    untouched_members_keep_their_types,
    null_removes_any_stored_name,
    an_empty_patch_answers_the_record,
);

/// Twelve `PATCH`es to different members of one record at once, on
/// DynamoDB Local: every one lands (the losers of a race wait a jittered
/// while and apply their patch again), and the record holds all twelve and
/// what it held before.
#[tokio::test]
async fn concurrent_member_patches_all_land() {
    let app = Arc::new(dynamo_app(Policy::default()).await);
    let dynamo = client(&dynamo_local().await.endpoint);
    for route in [Route::McpServers, Route::Models] {
        let (key, _) = record(&*app, route).await;
        let field = if route == Route::Models {
            "parameters"
        } else {
            "headers"
        };
        // Sealed first: a data key made by one racer cannot seal beside
        // another's without a second KMS call (that race is a 409).
        let sealed = send(&*app, route, put(route, &key, &json!({field: {"X-Old": "old"}}))).await;
        assert_eq!(sealed.status, 200, "{}", sealed.body);
        let writers: Vec<_> = (0..12)
            .map(|writer| {
                let (app, key) = (app.clone(), key.clone());
                tokio::spawn(async move {
                    let change = json!({field: {format!("X-Member-{writer}"): format!("v{writer}")}});
                    send(&*app, route, patch(route, &key, &change)).await.status
                })
            })
            .collect();
        let mut statuses = Vec::new();
        for writer in writers {
            statuses.push(writer.await.unwrap_or_default());
        }
        assert!(
            statuses.iter().all(|status| *status == 200),
            "{route:?}: {statuses:?}"
        );
        let stored = get_item(&dynamo, route.table(), &key).await.unwrap_or_default();
        let merged = stored_json(&stored, field);
        assert_eq!(merged["X-Old"], json!("old"), "{route:?}");
        for writer in 0..12 {
            assert_eq!(
                merged[format!("X-Member-{writer}")],
                json!(format!("v{writer}")),
                "{route:?}: member {writer} lost"
            );
        }
    }
}

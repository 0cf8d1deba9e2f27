//! `Idempotency-Key` (retries that write once), on the memory store and on
//! DynamoDB Local: a retry answers the kept outcome and writes nothing; a
//! key is the caller's and the record's; another request under it is 422;
//! concurrent requests with one key write once; a lost response, retried
//! through a proxy that dropped it, gets the original answer; nothing is
//! kept for a request that failed; an expired outcome is as none.

use std::sync::Arc;

use agent_server_shared::item::Attr;
use agent_server_shared::item::{self, Item};
use agent_server_shared::rules::Policy;
use agent_server_shared::store::{Key, MemoryStore, Store, TableNames, kept};
use agent_server_shared::{App, Response};
use integration_tests::events::Event;
use integration_tests::{
    Route, body_json, client, dynamo_app, dynamo_local, get_item, http, memory_app, put_item, serve_local_api,
};
use serde_json::{Value, json};

fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A fresh record of `route` on `app`'s store (memory, or DynamoDB Local).
async fn seed(route: Route, store: Seed<'_>) -> Key {
    let (project, id) = (new_id(), new_id());
    match store {
        Seed::Memory(memory) => {
            memory.put(route.table(), route.item(&project, &id));
        }
        Seed::Dynamo => {
            put_item(
                &client(&dynamo_local().await.endpoint),
                route.table(),
                route.item(&project, &id),
            )
            .await
        }
    }
    Key {
        project_id: route.scoped().then_some(project),
        id,
    }
}

enum Seed<'a> {
    Memory(&'a MemoryStore),
    Dynamo,
}

fn keyed(route: Route, key: &Key, idempotency_key: &str, body: &Value) -> Event {
    Event::put(route, &key.id, key.project_id.as_deref())
        .header("Idempotency-Key", idempotency_key)
        .json(body)
}

/// Every outcome kept on DynamoDB Local, as its items are stored.
async fn kept_items() -> Vec<Item> {
    client(&dynamo_local().await.endpoint)
        .scan()
        .table_name(TableNames::default().idempotency)
        .send()
        .await
        .expect("scan")
        .items
        .unwrap_or_default()
        .into_iter()
        .map(integration_tests::own)
        .collect()
}

fn summary(response: &Response) -> (u16, Value, Option<String>, Option<String>) {
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    (
        response.status().as_u16(),
        body_json(response),
        header("etag"),
        header("last-modified"),
    )
}

async fn stored<S: Store>(app: &App<S>, route: Route, key: &Key) -> Item {
    app.store
        .read(route.table(), key, std::time::Duration::from_secs(3))
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("{route:?}: record missing"))
}

/// `body` with its secret's value changed (an API key's `api_key`, an MCP
/// server's first header value), if it holds one.
fn with_another_secret(body: &Value) -> Option<Value> {
    let mut other = body.clone();
    if let Some(key) = other.get_mut("api_key") {
        *key = json!("sk-another-key");
        return Some(other);
    }
    let (_, value) = other.get_mut("headers")?.as_object_mut()?.iter_mut().next()?;
    *value = json!("Bearer another-token");
    Some(other)
}

/// `body` as other JSON text for the same value: members in reverse order,
/// whitespace around each, names and strings with a `\u` escape.
fn respelled(body: &Value) -> String {
    fn write(value: &Value) -> String {
        let text = |s: &str| {
            serde_json::to_string(s)
                .unwrap_or_default()
                .replacen('e', "\\u0065", 1)
        };
        match value {
            Value::Object(members) => {
                let inner: Vec<String> = members
                    .iter()
                    .rev()
                    .map(|(name, value)| format!(" {} :\n {} ", text(name), write(value)))
                    .collect();
                format!("{{{}}}", inner.join(","))
            }
            Value::Array(items) => format!("[ {} ]", items.iter().map(write).collect::<Vec<_>>().join(" , ")),
            Value::String(s) => text(s),
            other => other.to_string(),
        }
    }
    write(body)
}

async fn each_route<S: Store>(app: &App<S>, memory: Option<&MemoryStore>) {
    for route in Route::ALL {
        let key = seed(route, memory.map_or(Seed::Dynamo, Seed::Memory)).await;
        let body = route.full_body();
        let first = route
            .call(app, keyed(route, &key, "retry-1", &body).request())
            .await;
        let (status, envelope, etag, modified) = summary(&first);
        assert_eq!(status, 200, "{route:?}: {envelope}");
        assert_eq!(first.headers().get("idempotent-replayed"), None);
        let written = stored(app, route, &key).await;
        assert_eq!(item::version(&written), Ok(1));

        // The retry: the same answer, marked, and nothing written.
        let retry = route
            .call(app, keyed(route, &key, "\"retry-1\"", &body).request())
            .await;
        assert_eq!(
            summary(&retry),
            (200, envelope.clone(), etag.clone(), modified.clone()),
            "{route:?}"
        );
        assert_eq!(retry.headers()["idempotent-replayed"], "true");
        assert_eq!(
            stored(app, route, &key).await,
            written,
            "{route:?}: a replay wrote"
        );

        // The same key with another request: 422, nothing written.
        let other = route
            .call(
                app,
                keyed(route, &key, "retry-1", &json!({"name": "Other"})).request(),
            )
            .await;
        assert_eq!(other.status().as_u16(), 422, "{route:?}");
        assert_eq!(
            body_json(&other)["errorDetails"]["code"],
            "idempotency_key_reused"
        );
        // The same request but for a secret's value (the key, a header's): another request.
        if let Some(other_secret) = with_another_secret(&body) {
            let answer = route
                .call(app, keyed(route, &key, "retry-1", &other_secret).request())
                .await;
            assert_eq!(answer.status().as_u16(), 422, "{route:?}");
            assert_eq!(
                body_json(&answer)["errorDetails"]["code"],
                "idempotency_key_reused"
            );
        }
        // The same request spelled otherwise (members reversed, whitespace): replayed.
        assert_ne!(respelled(&body), body.to_string());
        let respelled = Event::put(route, &key.id, key.project_id.as_deref())
            .header("Idempotency-Key", "retry-1")
            .body(respelled(&body));
        let answer = route.call(app, respelled.request()).await;
        assert_eq!(
            (
                summary(&answer),
                answer.headers().get("idempotent-replayed").map(|v| v.as_bytes())
            ),
            (
                (200, envelope.clone(), etag.clone(), modified.clone()),
                Some(&b"true"[..])
            ),
            "{route:?}"
        );
        let preconditioned = keyed(route, &key, "retry-1", &body).header("If-Match", "\"1\"");
        assert_eq!(
            route.call(app, preconditioned.request()).await.status().as_u16(),
            422
        );
        assert_eq!(stored(app, route, &key).await, written);

        // The key is the caller's and the record's: another caller, or
        // another record, runs anew.
        let other_caller =
            keyed(route, &key, "retry-1", &body).iam_arn("arn:aws:iam::123456789012:user/other");
        let answer = route.call(app, other_caller.request()).await;
        assert_eq!(
            (
                answer.status().as_u16(),
                answer.headers().get("idempotent-replayed")
            ),
            (200, None)
        );
        assert_eq!(item::version(&stored(app, route, &key).await), Ok(2));
        let elsewhere = seed(route, memory.map_or(Seed::Dynamo, Seed::Memory)).await;
        let answer = route
            .call(app, keyed(route, &elsewhere, "retry-1", &body).request())
            .await;
        assert_eq!(
            (
                answer.status().as_u16(),
                answer.headers().get("idempotent-replayed")
            ),
            (200, None)
        );

        // Without a key nothing is kept, and the key leaves the record.
        let plain = Event::put(route, &key.id, key.project_id.as_deref()).json(&body);
        assert_eq!(route.call(app, plain.request()).await.status().as_u16(), 200);
        assert_eq!(stored(app, route, &key).await.get("idempotency_key"), None);
    }
}

#[tokio::test]
async fn a_retry_answers_the_kept_outcome_on_the_memory_store() {
    let app = memory_app(Policy::default());
    // The store outlives the app's borrow: leak it for the test's life.
    let app: &'static App<MemoryStore> = Box::leak(Box::new(app));
    each_route(app, Some(&app.store)).await;
}

#[tokio::test]
async fn a_retry_answers_the_kept_outcome_on_dynamodb_local() {
    let app = dynamo_app(Policy::default()).await;
    each_route(&app, None).await;
    // The kept outcome has its time to live, 24 hours on.
    let items = kept_items().await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| i64::try_from(elapsed.as_secs()).unwrap_or(0));
    assert!(!items.is_empty());
    for item in items {
        let expires = item[kept::EXPIRES_AT]
            .as_n()
            .and_then(|n| n.parse::<i64>().ok())
            .unwrap_or(0);
        let at = item[kept::KEPT_AT]
            .as_n()
            .and_then(|n| n.parse::<i64>().ok())
            .unwrap_or(0);
        assert_eq!(expires - at, 24 * 60 * 60);
        assert!(at <= now && at > now - 600);
        // No answer shows api_key; one a request set is kept sealed, as the
        // record holds it, for a retry's to be compared with.
        let record = item[kept::RECORD].as_m().expect("a kept record");
        assert!(
            matches!(record.get("api_key"), None | Some(Attr::B(_))),
            "{:?}",
            record.get("api_key").map(|_| "api_key as text")
        );
        assert!(
            item[kept::FINGERPRINT]
                .as_s()
                .is_some_and(|print| print.starts_with("2:"))
        );
    }
}

/// Requests with one key at once: one writes, the others answer its
/// outcome (or lose the record's race and are told to retry), never a
/// second write.
#[tokio::test]
async fn concurrent_requests_with_one_key_write_once() {
    let app = Arc::new(dynamo_app(Policy::default()).await);
    let route = Route::Models;
    let key = seed(route, Seed::Dynamo).await;
    let body = json!({"name": "Raced", "parameters": {"a": 1}});
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (app, key, body) = (app.clone(), key.clone(), body.clone());
            tokio::spawn(async move {
                summary(
                    &route
                        .call(&app, keyed(route, &key, "race", &body).request())
                        .await,
                )
            })
        })
        .collect();
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(task.await.expect("task"));
    }
    let written = stored(&app, route, &key).await;
    assert_eq!(item::version(&written), Ok(1), "{answers:?}");
    for (status, envelope, etag, _) in &answers {
        match status {
            200 => assert_eq!(etag.as_deref(), Some("\"1\""), "{envelope}"),
            409 => assert_eq!(envelope["errorDetails"]["code"], "conflict"),
            other => panic!("{other}: {envelope}"),
        }
    }
    assert!(answers.iter().filter(|(status, ..)| *status == 200).count() >= 1);
}

/// A request that failed keeps nothing: its retry runs again. An invalid
/// key is refused before any database call.
#[tokio::test]
async fn failures_keep_nothing_and_invalid_keys_cost_nothing() {
    let app = memory_app(Policy::default());
    let route = Route::Models;
    let key = seed(route, Seed::Memory(&app.store)).await;
    let body = json!({"name": "Later"});
    let stale = || keyed(route, &key, "k-412", &body).header("If-Match", "\"7\"");
    assert_eq!(route.call(&app, stale().request()).await.status().as_u16(), 412);
    assert_eq!(route.call(&app, stale().request()).await.status().as_u16(), 412);
    // Both ran (a read each), and nothing was kept.
    let fresh = keyed(route, &key, "k-412", &body).header("If-Match", "\"0\"");
    let answer = route.call(&app, fresh.request()).await;
    assert_eq!(answer.status().as_u16(), 200, "{}", body_json(&answer));
    assert_eq!(answer.headers().get("idempotent-replayed"), None);

    let before = app.store.calls();
    for bad in ["a b", "\"open", "a,b", "\"\"", &"k".repeat(256)] {
        let answer = route.call(&app, keyed(route, &key, bad, &body).request()).await;
        assert_eq!(answer.status().as_u16(), 400, "{bad:?}");
        assert_eq!(
            body_json(&answer)["errorDetails"]["code"],
            "invalid_idempotency_key"
        );
    }
    assert_eq!(app.store.calls(), before, "an invalid key reached the store");
}

/// An outcome past its 24 hours is as none, whether or not DynamoDB's time
/// to live has deleted it yet: the request runs again.
#[tokio::test]
async fn an_expired_outcome_is_as_none() {
    let app = dynamo_app(Policy::default()).await;
    let dynamo = client(&dynamo_local().await.endpoint);
    let route = Route::Models;
    let key = seed(route, Seed::Dynamo).await;
    let body = json!({"name": "Once"});
    assert_eq!(
        route
            .call(&app, keyed(route, &key, "old", &body).request())
            .await
            .status()
            .as_u16(),
        200
    );
    // Age every kept outcome of this record by a day and a second.
    let outcomes = TableNames::default().idempotency;
    let items = dynamo
        .scan()
        .table_name(&outcomes)
        .send()
        .await
        .expect("scan")
        .items
        .unwrap_or_default()
        .into_iter()
        .map(integration_tests::own)
        .collect::<Vec<_>>();
    let mine: Vec<_> = items
        .into_iter()
        .filter(|item| {
            item[kept::RECORD]
                .as_m()
                .is_some_and(|record| record.get("id") == Some(&Attr::S(key.id.clone())))
        })
        .collect();
    assert_eq!(mine.len(), 1);
    for mut item in mine {
        let aged = |name: &str| {
            let n = item[name].as_n().and_then(|n| n.parse::<i64>().ok()).unwrap_or(0);
            Attr::N((n - 24 * 60 * 60 - 1).to_string())
        };
        let (expires, at) = (aged(kept::EXPIRES_AT), aged(kept::KEPT_AT));
        item.insert(kept::EXPIRES_AT.into(), expires);
        item.insert(kept::KEPT_AT.into(), at);
        dynamo
            .put_item()
            .table_name(&outcomes)
            .set_item(Some(agent_server_shared::item::to_sdk(item)))
            .send()
            .await
            .expect("age");
    }
    let again = route.call(&app, keyed(route, &key, "old", &body).request()).await;
    assert_eq!(
        (
            again.status().as_u16(),
            again.headers().get("idempotent-replayed")
        ),
        (200, None)
    );
    assert_eq!(item::version(&stored(&app, route, &key).await), Ok(2));
    // And the new outcome is kept in its place: a retry replays it.
    let retry = route.call(&app, keyed(route, &key, "old", &body).request()).await;
    assert_eq!(retry.headers()["idempotent-replayed"], "true");
    assert_eq!(retry.headers()["etag"], "\"2\"");
}

/// A response lost on the way back (a proxy in front of local-api forwards
/// the request and drops the answer), retried with the same key: the
/// original 200 and ETag, and exactly one write.
#[tokio::test]
async fn a_lost_response_retried_gets_the_original_answer() {
    let app = Arc::new(dynamo_app(Policy::default()).await);
    let (api, _server) = serve_local_api(app.clone(), std::future::pending::<()>()).await;
    let proxy = dropping_proxy(api.trim_start_matches("http://").to_string()).await;
    let route = Route::McpServers;
    let key = seed(route, Seed::Dynamo).await;
    let url = |base: &str| {
        format!(
            "{base}/api/agent-server/mcp-servers/{}?project_id={}",
            key.id,
            key.project_id.as_deref().unwrap_or_default()
        )
    };
    let body = json!({"name": "Renamed", "headers": {"Authorization": "Bearer lost"}}).to_string();
    let headers = [
        ("content-type", "application/json"),
        ("idempotency-key", "lost-1"),
    ];
    // The first answer never arrives.
    assert!(send_raw(&proxy, &url(""), &headers, &body).await.is_none());
    let written = get_item(&client(&dynamo_local().await.endpoint), route.table(), &key)
        .await
        .expect("item");
    assert_eq!(item::version(&written), Ok(1), "the lost request was not written");
    let retry = http("PUT", &url(&format!("http://{proxy}")), &headers, body.clone()).await;
    assert_eq!(retry.status, 200, "{}", retry.body);
    assert_eq!(retry.headers["idempotent-replayed"], "true");
    assert_eq!(retry.headers["etag"], "\"1\"");
    assert_eq!(retry.body["data"]["name"], "Renamed");
    assert_eq!(
        retry.body["data"]["headers"],
        json!({"Authorization": "Bearer lost"})
    );
    let after = get_item(&client(&dynamo_local().await.endpoint), route.table(), &key)
        .await
        .expect("item");
    assert_eq!(after, written, "the retry wrote");
}

/// A TCP proxy to `upstream` that drops the answer to the first connection
/// it carries (closing it once the answer began), and carries every later
/// one whole. Its address.
async fn dropping_proxy(upstream: String) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("listen");
    let address = listener.local_addr().expect("address").to_string();
    tokio::spawn(async move {
        let mut first = true;
        while let Ok((mut downstream, _)) = listener.accept().await {
            let Ok(mut up) = tokio::net::TcpStream::connect(&upstream).await else {
                continue;
            };
            if std::mem::take(&mut first) {
                tokio::spawn(async move {
                    let mut buffer = vec![0; 64 * 1024];
                    let (mut down_read, mut down_write) = downstream.split();
                    let (mut up_read, mut up_write) = up.split();
                    // The request goes through; the answer is read and thrown away.
                    let request = async {
                        let mut chunk = vec![0; 64 * 1024];
                        while let Ok(n @ 1..) = down_read.read(&mut chunk).await {
                            if up_write.write_all(&chunk[..n]).await.is_err() {
                                break;
                            }
                        }
                    };
                    tokio::select! {
                        () = request => {}
                        _ = up_read.read(&mut buffer) => {}
                    }
                    let _ = down_write.shutdown().await;
                });
            } else {
                tokio::spawn(async move {
                    let _ = tokio::io::copy_bidirectional(&mut downstream, &mut up).await;
                });
            }
        }
    });
    address
}

/// One HTTP/1.1 request over a fresh connection to `address`: its answer's
/// status, or `None` when the connection closed without one.
async fn send_raw(address: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Option<u16> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address).await.ok()?;
    let mut request = format!(
        "PUT {path} HTTP/1.1\r\nhost: {address}\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("connection: close\r\n\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        stream.read_to_end(&mut answer),
    )
    .await;
    let text = String::from_utf8_lossy(&answer);
    text.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()
}

/// What a keyed request costs: one store call more than without a key (a
/// read of the record and the key, then the transaction), and a replay one
/// read and, where the kept record holds sealed headers, one KMS call and
/// nothing sealed; a reused key is refused before any sealing. A keyed
/// PATCH merges and replays alike, and a PATCH {} under a used key is 422.
#[tokio::test]
async fn keyed_requests_cost_one_call_more_and_replays_one_read() {
    use agent_server_shared::Settings;
    use agent_server_shared::seal::{MemorySealer, Sealer};
    let sealer = Arc::new(MemorySealer::new());
    let app = App {
        store: MemoryStore::new(),
        settings: Settings::default(),
        sealer: Some(Sealer::Memory(sealer.clone())),
    };
    let route = Route::McpServers;
    let costs = |before: (usize, usize)| (app.store.calls() - before.0, sealer.calls() - before.1);
    let now = || (app.store.calls(), sealer.calls());
    let headers = json!({"headers": {"Authorization": "Bearer sealed", "X-Other": "kept"}});

    let plain = seed(route, Seed::Memory(&app.store)).await;
    let before = now();
    let unkeyed = Event::put(route, &plain.id, plain.project_id.as_deref()).json(&headers);
    assert_eq!(route.call(&app, unkeyed.request()).await.status().as_u16(), 200);
    let (unkeyed_calls, unkeyed_kms) = costs(before);

    let key = seed(route, Seed::Memory(&app.store)).await;
    let before = now();
    let first = route
        .call(&app, keyed(route, &key, "cost", &headers).request())
        .await;
    assert_eq!(first.status().as_u16(), 200, "{}", body_json(&first));
    assert_eq!(
        costs(before),
        (unkeyed_calls + 1, unkeyed_kms),
        "a keyed write's cost"
    );

    let before = now();
    let replay = route
        .call(&app, keyed(route, &key, "cost", &headers).request())
        .await;
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    assert_eq!(body_json(&replay), body_json(&first));
    assert_eq!(
        costs(before),
        (1, 1),
        "a replay: one read, one Decrypt, nothing sealed"
    );

    let before = now();
    let reused = route
        .call(
            &app,
            keyed(route, &key, "cost", &json!({"headers": {"A": "b"}})).request(),
        )
        .await;
    assert_eq!(reused.status().as_u16(), 422);
    assert_eq!(costs(before), (1, 0), "a reused key: one read, nothing sealed");

    // A keyed PATCH that merges a header in, and its replay.
    let patch = || {
        Event::patch(route, &key.id, key.project_id.as_deref())
            .header("Idempotency-Key", "merge")
            .json(&json!({"headers": {"x-other": null, "X-New": "n"}}))
    };
    let merged = route.call(&app, patch().request()).await;
    assert_eq!(merged.status().as_u16(), 200, "{}", body_json(&merged));
    let expected = json!({"Authorization": "Bearer sealed", "X-New": "n"});
    assert_eq!(body_json(&merged)["data"]["headers"], expected);
    let again = route.call(&app, patch().request()).await;
    assert_eq!(
        (
            again.headers()["idempotent-replayed"].to_str().ok(),
            body_json(&again)
        ),
        (Some("true"), body_json(&merged))
    );
    assert_eq!(
        item::version(&app.store.get(route.table(), &key).expect("record")),
        Ok(2)
    );

    // PATCH {} keeps nothing, and under a key used for another request is 422.
    let empty = |idempotency_key: &str| {
        Event::patch(route, &key.id, key.project_id.as_deref())
            .header("Idempotency-Key", idempotency_key)
            .json(&json!({}))
    };
    assert_eq!(
        route.call(&app, empty("merge").request()).await.status().as_u16(),
        422
    );
    let fresh = route.call(&app, empty("nothing").request()).await;
    assert_eq!(
        (
            fresh.status().as_u16(),
            fresh.headers().get("idempotent-replayed")
        ),
        (200, None)
    );
    assert_eq!(
        route
            .call(&app, empty("nothing").request())
            .await
            .headers()
            .get("idempotent-replayed"),
        None
    );
}

/// A key is its caller's: a caller with no name (a JWT without `sub`) can
/// own none, and is told so before anything is read.
#[tokio::test]
async fn a_caller_without_a_name_cannot_use_a_key() {
    let app = memory_app(Policy::default());
    let route = Route::Models;
    let key = seed(route, Seed::Memory(&app.store)).await;
    let before = app.store.calls();
    let anonymous = keyed(route, &key, "k", &json!({"name": "n"})).jwt(&[("projects", "*")]);
    let answer = route.call(&app, anonymous.request()).await;
    assert_eq!(answer.status().as_u16(), 400);
    assert_eq!(
        body_json(&answer)["errorDetails"]["code"],
        "invalid_idempotency_key"
    );
    assert_eq!(app.store.calls(), before);
    // Without the key the same caller may write.
    let plain = Event::put(route, &key.id, key.project_id.as_deref())
        .jwt(&[("projects", "*")])
        .json(&json!({"name": "n"}));
    assert_eq!(route.call(&app, plain.request()).await.status().as_u16(), 200);
}

/// The lost response, on the memory store behind the same proxy.
#[tokio::test]
async fn a_lost_response_retried_gets_the_original_answer_on_the_memory_store() {
    // Served by reference: the test reads the same store.
    let store: &'static MemoryStore = Box::leak(Box::new(MemoryStore::new()));
    let app = App {
        store,
        settings: agent_server_shared::Settings::default(),
        sealer: Some(integration_tests::memory_sealer()),
    };
    let route = Route::Models;
    let key = seed(route, Seed::Memory(store)).await;
    let (api, _server) = serve_local_api(Arc::new(app), std::future::pending::<()>()).await;
    let proxy = dropping_proxy(api.trim_start_matches("http://").to_string()).await;
    let path = format!(
        "/api/agent-server/models/{}?project_id={}",
        key.id,
        key.project_id.as_deref().unwrap_or_default()
    );
    let body = json!({"name": "Lost", "parameters": {"t": 1}}).to_string();
    let headers = [
        ("content-type", "application/json"),
        ("idempotency-key", "\"lost-2\""),
    ];
    assert!(send_raw(&proxy, &path, &headers, &body).await.is_none());
    let written = store.get(route.table(), &key).expect("record");
    assert_eq!(item::version(&written), Ok(1));
    let retry = http("PUT", &format!("http://{proxy}{path}"), &headers, body).await;
    assert_eq!(
        (retry.status, retry.headers["etag"].to_str().ok()),
        (200, Some("\"1\""))
    );
    assert_eq!(retry.headers["idempotent-replayed"], "true");
    assert!(retry.headers.contains_key("last-modified"));
    assert_eq!(store.get(route.table(), &key), Some(written));
}

/// A keyed rename of a record whose headers were stored before sealing
/// keeps no value in the clear: the kept copy's values are sealed under a
/// key of its own, and the replay shows them as the record does.
#[tokio::test]
async fn a_kept_copy_of_headers_stored_in_the_clear_is_sealed() {
    let app = dynamo_app(Policy::default()).await;
    let route = Route::McpServers;
    let key = seed(route, Seed::Dynamo).await;
    let rename = || keyed(route, &key, "rename-legacy", &json!({"name": "Renamed"}));
    let first = route.call(&app, rename().request()).await;
    assert_eq!(first.status().as_u16(), 200, "{}", body_json(&first));
    assert_eq!(body_json(&first)["data"]["headers"], json!({"X-Old": "old"}));
    let items = kept_items().await;
    let kept = items
        .iter()
        .filter_map(|item| item[kept::RECORD].as_m())
        .find(|record| record.get("id") == Some(&Attr::S(key.id.clone())))
        .expect("the outcome is kept");
    let headers = kept["headers"].as_m().expect("headers");
    assert!(matches!(headers.get("X-Old"), Some(Attr::B(_))), "{headers:?}");
    assert!(matches!(kept.get("headers_key"), Some(Attr::B(_))));
    // The record itself keeps its text, as a rename leaves it.
    let dynamo = client(&dynamo_local().await.endpoint);
    let record = get_item(&dynamo, route.table(), &key).await.expect("record");
    assert_eq!(
        record["headers"].as_m().and_then(|m| m.get("X-Old")),
        Some(&Attr::S("old".into()))
    );
    let replay = route.call(&app, rename().request()).await;
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    assert_eq!(body_json(&replay), body_json(&first));
}

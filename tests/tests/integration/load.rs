//! Load without loss: a few hundred concurrent updates through local-api,
//! of distinct fields of many records, mixed with updates that must be
//! refused (stale If-Match, invalid value, missing record). Afterwards every
//! item is read back: each acknowledged write is there, no refused one is,
//! and each version counts exactly the acknowledged writes.

use std::collections::HashMap;
use std::sync::Arc;

use agent_server_shared::item;
use agent_server_shared::rules::Policy;
use agent_server_shared::store::Key;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::rt::TokioExecutor;
use integration_tests::{
    Route, client, dynamo_app, dynamo_local, get_item, put_item, same_json, serve_local_api, stored_json,
};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

const RECORDS_PER_ROUTE: usize = 30;
const IN_FLIGHT: usize = 64;

/// One request: where, what, and whether it must be acknowledged.
struct Write {
    route: Route,
    key: Key,
    field: &'static str,
    value: Value,
    if_match: Option<&'static str>,
    /// 200 for a write that must land; 412, 400 or 404 for one that must not.
    expected: u16,
}

fn fields(route: Route, n: usize) -> Vec<(&'static str, Value, Value)> {
    // (field, value to write and keep, value a refused write tries)
    match route {
        Route::ApiKeys => vec![
            ("name", json!(format!("key {n}")), json!(format!("lost {n}"))),
            (
                "api_key",
                json!(format!("sk-load-{n}")),
                json!(format!("sk-lost-{n}")),
            ),
            ("enabled", json!(n.is_multiple_of(2)), json!(!n.is_multiple_of(2))),
        ],
        Route::McpServers => vec![
            ("name", json!(format!("server {n}")), json!(format!("lost {n}"))),
            (
                "endpoint",
                json!(format!("https://mcp{n}.example.com/sse")),
                json!(format!("https://lost{n}.example.com")),
            ),
            (
                "headers",
                json!({"Authorization": format!("Bearer {n}")}),
                json!({"X-Lost": "yes"}),
            ),
        ],
        Route::Models => vec![
            ("name", json!(format!("model {n}")), json!(format!("lost {n}"))),
            (
                "model_id",
                json!(format!("model-{n}")),
                json!(format!("lost-{n}")),
            ),
            (
                "provider_type",
                json!(["OpenAI", "Anthropic", "Gemini", "xAI"][n % 4]),
                json!(["OpenAI", "Anthropic", "Gemini", "xAI"][(n + 1) % 4]),
            ),
            (
                "parameters",
                json!({"temperature": n, "stop": [n.to_string()]}),
                json!({"lost": true}),
            ),
        ],
    }
}

/// Records of one route, by key.
type Records = Vec<(Route, Key)>;

/// The writes to send, the records they target, and keys that must stay missing.
fn plan(project: &str) -> (Vec<Write>, Records, Records) {
    let mut writes = Vec::new();
    let mut records = Vec::new();
    let mut missing = Vec::new();
    for route in Route::ALL {
        for n in 0..RECORDS_PER_ROUTE {
            let key = Key {
                project_id: route.scoped().then(|| project.to_string()),
                id: uuid::Uuid::new_v4().to_string(),
            };
            for (field, kept, lost) in fields(route, n) {
                writes.push(Write {
                    route,
                    key: key.clone(),
                    field,
                    value: kept,
                    if_match: None,
                    expected: 200,
                });
                // A stale ETag: refused with 412, nothing written.
                writes.push(Write {
                    route,
                    key: key.clone(),
                    field,
                    value: lost.clone(),
                    if_match: Some("\"999\""),
                    expected: 412,
                });
            }
            // An invalid value: refused with 400 before any database call.
            writes.push(Write {
                route,
                key: key.clone(),
                field: "name",
                value: json!(""),
                if_match: None,
                expected: 400,
            });
            records.push((route, key));
            let ghost = Key {
                project_id: route.scoped().then(|| project.to_string()),
                id: uuid::Uuid::new_v4().to_string(),
            };
            writes.push(Write {
                route,
                key: ghost.clone(),
                field: "name",
                value: json!("ghost"),
                if_match: None,
                expected: 404,
            });
            missing.push((route, ghost));
        }
    }
    // Interleave routes and records so concurrent requests hit the same items.
    writes.sort_by_key(|w| (w.field, w.key.id.clone()));
    (writes, records, missing)
}

async fn send(
    http: &HttpClient<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>,
    base: &str,
    write: &Write,
) -> u16 {
    let query = write
        .key
        .project_id
        .as_ref()
        .map(|p| format!("?project_id={p}"))
        .unwrap_or_default();
    let url = format!(
        "{base}/api/agent-server/{}/{}{query}",
        write.route.collection(),
        write.key.id
    );
    let mut request = hyper::Request::put(url).header("content-type", "application/json");
    if let Some(tag) = write.if_match {
        request = request.header("if-match", tag);
    }
    let body = json!({ write.field: write.value }).to_string();
    let request = request.body(Full::new(Bytes::from(body))).unwrap();
    let response = http.request(request).await.expect("local-api failed");
    let status = response.status().as_u16();
    let _ = response.into_body().collect().await;
    status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_write_lands_and_no_refused_one_does() {
    let app = Arc::new(dynamo_app(Policy::default()).await);
    let dynamo = client(&dynamo_local().await.endpoint);
    let project = uuid::Uuid::new_v4().to_string();
    let (writes, records, missing) = plan(&project);
    for (route, key) in &records {
        put_item(&dynamo, route.table(), route.item(&project, &key.id)).await;
    }

    let (base, _server) = serve_local_api(app, std::future::pending::<()>()).await;

    let http = HttpClient::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let gate = Arc::new(Semaphore::new(IN_FLIGHT));
    let writes = Arc::new(writes);
    let mut tasks = Vec::new();
    for index in 0..writes.len() {
        let (http, base, gate, writes) = (http.clone(), base.clone(), Arc::clone(&gate), Arc::clone(&writes));
        tasks.push(tokio::spawn(async move {
            let _permit = gate.acquire().await;
            send(&http, &base, &writes[index]).await
        }));
    }
    let mut statuses = Vec::with_capacity(tasks.len());
    for task in tasks {
        statuses.push(task.await.unwrap_or(0));
    }
    println!(
        "load: {} requests, {} concurrent, {} acknowledged",
        writes.len(),
        IN_FLIGHT,
        statuses.iter().filter(|s| **s == 200).count()
    );

    let mut acknowledged: HashMap<String, Vec<(&'static str, &Value)>> = HashMap::new();
    for (write, status) in writes.iter().zip(&statuses) {
        assert_eq!(
            *status, write.expected,
            "{:?} {} {}",
            write.route, write.key.id, write.field
        );
        if *status == 200 {
            acknowledged
                .entry(write.key.id.clone())
                .or_default()
                .push((write.field, &write.value));
        }
    }
    let mut lost = 0;
    for (route, key) in &records {
        let item = get_item(&dynamo, route.table(), key)
            .await
            .unwrap_or_else(|| panic!("{route:?} {} vanished", key.id));
        let writes = acknowledged.get(&key.id).cloned().unwrap_or_default();
        for (field, value) in &writes {
            if !same_json(&stored_json(&item, field), value) {
                lost += 1;
                eprintln!(
                    "{route:?} {}: {field} is {} not {value}",
                    key.id,
                    stored_json(&item, field)
                );
            }
        }
        assert_eq!(
            item::version(&item),
            Ok(writes.len() as u64),
            "{route:?} {}: version",
            key.id
        );
    }
    for (route, key) in &missing {
        assert!(
            get_item(&dynamo, route.table(), key).await.is_none(),
            "{route:?}: a refused write created {}",
            key.id
        );
    }
    assert_eq!(lost, 0, "acknowledged writes lost");
}

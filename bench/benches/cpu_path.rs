//! The CPU path of one request, without the database: the API Gateway
//! event (as JSON) read into a request, extraction, strict JSON, validation, one (stubbed) store
//! call, record decoding and the envelope out. Small and large (up to
//! 16 KiB) valid bodies for each route.

use std::hint::black_box;
use std::sync::Arc;

use agent_server_shared::item::{self, Attr, Item};
use agent_server_shared::seal::{MemorySealer, Sealer};
use agent_server_shared::store::{Store, StoreError, Update};
use agent_server_shared::{ApiKey, App, McpServer, Model, Request, Resource, Settings};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};

/// Answers every update with the item it was built with, as DynamoDB's
/// ALL_NEW would.
struct Stub(Item);

impl Store for Stub {
    async fn update(&self, update: Update) -> Result<Item, StoreError> {
        let mut item = self.0.clone();
        item.extend(
            update
                .set
                .into_iter()
                .map(|(name, value)| (name.to_string(), value)),
        );
        Ok(item)
    }

    async fn read(
        &self,
        _: agent_server_shared::Table,
        _: &agent_server_shared::store::Key,
        _: std::time::Duration,
    ) -> Result<Option<Item>, StoreError> {
        Ok(Some(self.0.clone()))
    }
}

/// The payload 2.0 event API Gateway sends for a PUT of `body` on `path`
/// by a JWT caller granted every project (the API-key route needs that).
fn event(route: &str, path: &str, scoped: bool, body: &str) -> Value {
    let query = if scoped {
        "project_id=8a4b2c1d-3e5f-4a6b-8c7d-9e0f1a2b3c4d"
    } else {
        ""
    };
    json!({
        "version": "2.0",
        "routeKey": format!("PUT {route}"),
        "rawPath": path,
        "rawQueryString": query,
        "headers": {"content-type": "application/json", "host": "id.execute-api.us-east-1.amazonaws.com"},
        "requestContext": {
            "authorizer": {"jwt": {"claims": {"sub": "bench", "projects": "*"}, "scopes": null}},
            "domainName": "id.execute-api.us-east-1.amazonaws.com",
            "http": {"method": "PUT", "path": path, "protocol": "HTTP/1.1", "sourceIp": "192.0.2.1", "userAgent": "bench"},
            "requestId": "bench",
            "stage": "$default",
        },
        "pathParameters": {"id": "7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f"},
        "isBase64Encoded": false,
        "body": body,
    })
}

/// The request the Lambda entry reads of `event`.
fn request(event: Value) -> Request {
    Request::from_event(event, lambda_runtime::Context::default()).unwrap_or_else(|e| panic!("{e}"))
}

fn stored(extra: &[(&str, Value)]) -> Item {
    let mut item: Item = [
        ("id", json!("7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f")),
        ("project_id", json!("8a4b2c1d-3e5f-4a6b-8c7d-9e0f1a2b3c4d")),
        ("created_at", json!("2026-01-01T00:00:00.000Z")),
        ("updated_at", json!("2026-01-01T00:00:00.000Z")),
    ]
    .iter()
    .chain(extra)
    .map(|(name, value)| (name.to_string(), item::to_attribute(value)))
    .collect();
    item.insert("version".into(), Attr::N("7".into()));
    item
}

fn bench_route<R: Resource>(c: &mut Criterion, name: &str, item: Item, bodies: [(&str, Value); 2]) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let app = App {
        store: Stub(item),
        settings: Settings::default(),
        sealer: Some(Sealer::Memory(Arc::new(MemorySealer::new()))),
    };
    let scoped = R::TABLE.scoped_by_project();
    for (size, body) in bodies {
        let text = body.to_string();
        let path = R::ROUTE.replace("{id}", "7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f");
        let event = event(R::ROUTE, &path, scoped, &text);
        let check = runtime.block_on(agent_server_shared::handler::update_record::<R, Stub>(
            &app,
            request(event.clone()),
        ));
        assert_eq!(check.status(), 200, "{name} {size}: {:?}", check.body());
        c.bench_function(&format!("{name}/{size} ({} bytes)", text.len()), |b| {
            b.iter_batched(
                || event.clone(),
                |event| {
                    runtime.block_on(agent_server_shared::handler::update_record::<R, Stub>(
                        &app,
                        request(black_box(event)),
                    ))
                },
                BatchSize::SmallInput,
            )
        });
    }
}

fn cpu_path(c: &mut Criterion) {
    bench_route::<ApiKey>(
        c,
        "api-key",
        stored(&[("provider_type", json!("OpenAI")), ("enabled", json!(true))]),
        [
            (
                "small",
                json!({"name": "Production OpenAI key", "enabled": false}),
            ),
            // The largest valid API-key body: a 255-character name and a 4096-character secret.
            (
                "large",
                json!({"name": "n".repeat(255), "api_key": "k".repeat(4096), "enabled": true}),
            ),
        ],
    );
    let headers: serde_json::Map<String, Value> = (0..60)
        .map(|i| (format!("X-Header-{i}"), json!("v".repeat(250))))
        .collect();
    bench_route::<McpServer>(
        c,
        "mcp-server",
        stored(&[("name", json!("Docs search"))]),
        [
            (
                "small",
                json!({"endpoint": "https://mcp.example.com/sse", "headers": {"Authorization": "Bearer t"}}),
            ),
            (
                "16KiB",
                json!({"endpoint": "https://mcp.example.com/sse", "headers": headers}),
            ),
        ],
    );
    let parameters: serde_json::Map<String, Value> = (0..300)
        .map(|i| {
            (
                format!("p{i:03}"),
                json!({"value": i, "weight": 0.5, "tags": ["a", "b"]}),
            )
        })
        .collect();
    bench_route::<Model>(
        c,
        "model",
        stored(&[
            ("name", json!("Claude Sonnet")),
            ("model_id", json!("claude-sonnet-4-5")),
        ]),
        [
            (
                "small",
                json!({"provider_type": "Anthropic", "parameters": {"temperature": 0.2, "max_tokens": 8192}}),
            ),
            (
                "16KiB",
                json!({"provider_type": "Anthropic", "parameters": parameters}),
            ),
        ],
    );
}

/// What the DynamoDB store adds to that path: an item crossing to the
/// SDK's types and back (`item::to_sdk`, `item::from_sdk`), once for what a
/// write sets and once for what it answers, here the model's whole stored
/// item (small, and with the 16 KiB of parameters) both ways.
fn crossing(c: &mut Criterion) {
    let parameters: serde_json::Map<String, Value> = (0..300)
        .map(|i| {
            (
                format!("p{i:03}"),
                json!({"value": i, "weight": 0.5, "tags": ["a", "b"]}),
            )
        })
        .collect();
    for (size, extra) in [
        ("small", json!({"temperature": 0.2, "max_tokens": 8192})),
        ("16KiB", Value::Object(parameters)),
    ] {
        let item = stored(&[
            ("name", json!("Claude Sonnet")),
            ("model_id", json!("claude-sonnet-4-5")),
            ("provider_type", json!("Anthropic")),
            ("parameters", extra),
        ]);
        c.bench_function(&format!("crossing/model {size}"), |b| {
            b.iter_batched(
                || item.clone(),
                |item| black_box(item::from_sdk(item::to_sdk(black_box(item)))),
                BatchSize::SmallInput,
            );
        });
    }
}

criterion_group!(benches, cpu_path, crossing);
criterion_main!(benches);

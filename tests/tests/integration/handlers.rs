//! Every row of the status table, for each of the three routes, through the
//! real handler functions and the Lambda entry's own event reading. Uses the
//! in-memory store, which counts calls: a rejected request must make none.

use agent_server_shared::item::Attr;
use agent_server_shared::rules::Policy;
use agent_server_shared::store::{MemoryStore, Store, StoreError};
use agent_server_shared::{App, Response, Settings};
use integration_tests::events::Event;
use integration_tests::{Failing, Route, body_json, memory_app};
use serde_json::{Value, json};

const PROJECT: &str = "8a4b2c1d-3e5f-4a6b-8c7d-9e0f1a2b3c4d";
const OTHER_PROJECT: &str = "00000000-0000-4000-8000-000000000000";
const ID: &str = "7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f";

/// A fresh app holding one record for `route`.
fn seeded(route: Route) -> App<MemoryStore> {
    let app = memory_app(Policy::default());
    assert!(app.store.put(route.table(), route.item(PROJECT, ID)));
    app
}

fn put(route: Route) -> Event {
    Event::put(route, ID, route.scoped().then_some(PROJECT))
}

struct Outcome {
    status: u16,
    body: Value,
    response: Response,
}

async fn send<S: Store>(route: Route, app: &App<S>, event: Event) -> Outcome {
    let response = route.call(app, event.request()).await;
    let body = body_json(&response);
    let status = response.status().as_u16();
    assert_eq!(body["status"], status, "status field must equal the HTTP status");
    assert_eq!(response.headers()["content-type"], "application/json");
    let mut keys: Vec<&str> = body
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    keys.sort_unstable();
    let mut expected = ["data", "error", "errorDetails", "message", "status"];
    expected.sort_unstable();
    assert_eq!(keys, expected, "exactly the five envelope keys");
    Outcome {
        status,
        body,
        response,
    }
}

/// Sends `event` to a seeded app and asserts a 400 with `code` that never
/// reached the store; returns the body.
async fn rejected(route: Route, event: Event, status: u16, code: &str) -> Value {
    let app = seeded(route);
    let outcome = send(route, &app, event).await;
    assert_eq!(outcome.status, status, "{route:?}: {}", outcome.body);
    assert_eq!(outcome.body["error"], true);
    assert_eq!(outcome.body["data"], Value::Null);
    assert_eq!(
        outcome.body["errorDetails"]["code"], code,
        "{route:?}: {}",
        outcome.body
    );
    assert_eq!(
        app.store.calls(),
        0,
        "{route:?}: a rejected request reached the store"
    );
    outcome.body
}

fn field_codes(body: &Value) -> Vec<(String, String)> {
    body["errorDetails"]["fields"]
        .as_array()
        .map(|fields| {
            fields
                .iter()
                .map(|f| {
                    (
                        f["field"].as_str().unwrap_or("").into(),
                        f["code"].as_str().unwrap_or("").into(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn success_returns_the_updated_record_in_order_with_an_etag() {
    for route in Route::ALL {
        let app = seeded(route);
        let body = route.full_body();
        let outcome = send(route, &app, put(route).json(&body)).await;
        assert_eq!(outcome.status, 200, "{route:?}: {}", outcome.body);
        assert_eq!(outcome.body["error"], false);
        assert_eq!(outcome.body["message"], route.success_message());
        assert_eq!(outcome.body["errorDetails"], json!({}));
        assert_eq!(outcome.response.headers()["etag"], "\"1\"");
        assert_eq!(app.store.calls(), 1);
        let data = &outcome.body["data"];
        let keys: Vec<&str> = data
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        // Every field the record kind declares as shown, in its order (which
        // tests/openapi.rs holds to the documented one); a verification only
        // once a verify=true write set one.
        use agent_server_shared::records::Access;
        let mut expected: Vec<&str> = route
            .fields()
            .iter()
            .filter(|field| !matches!(field.access, Access::WriteOnly(_) | Access::Verification { .. }))
            .map(|field| field.name)
            .collect();
        // serde_json's map sorts keys; the order on the wire is checked below.
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        let wire = String::from_utf8_lossy(outcome.response.body().as_ref()).into_owned();
        let positions: Vec<usize> = expected
            .iter()
            .filter_map(|k| wire.find(&format!("\"{k}\":")))
            .collect();
        assert!(
            positions.windows(2).all(|w| w[0] < w[1]),
            "{route:?}: fields out of order: {wire}"
        );
        expected.sort_unstable();
        assert_eq!(sorted, expected, "{route:?}");
        for (name, value) in body.as_object().cloned().unwrap_or_default() {
            if name != "api_key" {
                assert_eq!(data[&name], value, "{route:?}.{name}");
            }
        }
        assert_eq!(data["id"], ID);
        assert_eq!(data["created_at"], "2026-01-01T00:00:00.000Z");
        let updated = data["updated_at"].as_str().unwrap_or_default();
        assert!(
            updated.len() == 24 && updated.ends_with('Z') && updated > "2026-01-01",
            "{updated}"
        );
    }
}

#[tokio::test]
async fn partial_update_keeps_the_other_fields() {
    for route in Route::ALL {
        let app = seeded(route);
        let outcome = send(route, &app, put(route).json(&json!({"name": "Only the name"}))).await;
        assert_eq!(outcome.status, 200);
        let data = &outcome.body["data"];
        assert_eq!(data["name"], "Only the name");
        match route {
            Route::ApiKeys => assert_eq!(data["enabled"], true),
            Route::McpServers => assert_eq!(data["headers"], json!({"X-Old": "old"})),
            Route::Models => assert_eq!(data["parameters"], json!({"old": 1})),
        }
    }
}

#[tokio::test]
async fn uppercase_ids_are_accepted_and_normalised() {
    for route in Route::ALL {
        let app = seeded(route);
        let event = Event::put(
            route,
            &ID.to_uppercase(),
            route.scoped().then_some(&*PROJECT.to_uppercase()),
        );
        let outcome = send(route, &app, event.json(&json!({"name": "x"}))).await;
        assert_eq!(outcome.status, 200, "{route:?}: {}", outcome.body);
        assert_eq!(outcome.body["data"]["id"], ID);
    }
}

#[tokio::test]
async fn a_bad_id_is_invalid_id() {
    for route in Route::ALL {
        for id in [
            "not-a-uuid",
            "7c8d9e0f1a2b4c3d9e4f5a6b7c8d9e0f",
            "{7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f}",
            "%20",
        ] {
            let event = Event::put(route, id, route.scoped().then_some(PROJECT)).json(&json!({"name": "x"}));
            let body = rejected(route, event, 400, "invalid_id").await;
            assert_eq!(
                field_codes(&body),
                [("id".to_string(), "invalid_uuid".to_string())]
            );
        }
    }
}

#[tokio::test]
async fn a_bad_project_id_is_invalid_project_id() {
    for route in [Route::McpServers, Route::Models] {
        for (query, code) in [
            ("", "required"),
            ("project_id=", "required"),
            ("other=1", "required"),
            ("project_id=nope", "invalid_uuid"),
            (&*format!("project_id={PROJECT}&project_id={PROJECT}"), "repeated"),
            (
                &*format!("project_id={PROJECT}&project_id={OTHER_PROJECT}"),
                "repeated",
            ),
        ] {
            let event = put(route).query(query).json(&json!({"name": "x"}));
            let body = rejected(route, event, 400, "invalid_project_id").await;
            assert_eq!(
                field_codes(&body),
                [("project_id".to_string(), code.to_string())],
                "{query}"
            );
        }
    }
    // API keys have no project: a project_id there changes nothing.
    let app = seeded(Route::ApiKeys);
    let event = put(Route::ApiKeys)
        .query("project_id=nope")
        .json(&json!({"name": "x"}));
    assert_eq!(send(Route::ApiKeys, &app, event).await.status, 200);
}

#[tokio::test]
async fn a_body_that_is_not_a_json_object_is_invalid_json() {
    for route in Route::ALL {
        for (event, code) in [
            (put(route), "empty"),
            (put(route).body(""), "empty"),
            (put(route).body("{\"name\": "), "syntax"),
            (put(route).body("{'name': 'x'}"), "syntax"),
            (put(route).body("[{\"name\": \"x\"}]"), "not_object"),
            (put(route).body("\"name\""), "not_object"),
            (put(route).body("null"), "not_object"),
            (put(route).body("{\"name\": \"a\", \"name\": \"b\"}"), "syntax"),
            (put(route).binary(b"{\"name\": \"\xc3\x28\"}"), "invalid_utf8"),
        ] {
            let body = rejected(route, event, 400, "invalid_json").await;
            assert_eq!(field_codes(&body), [("body".to_string(), code.to_string())]);
        }
    }
}

#[tokio::test]
async fn a_base64_encoded_json_body_is_accepted() {
    for route in Route::ALL {
        let app = seeded(route);
        let event = put(route).binary(br#"{"name": "from base64"}"#);
        let outcome = send(route, &app, event).await;
        assert_eq!(outcome.status, 200);
        assert_eq!(outcome.body["data"]["name"], "from base64");
    }
}

/// `(field path, code)` pairs, in the order the response lists them.
type ExpectedFields = &'static [(&'static str, &'static str)];

#[tokio::test]
async fn field_problems_are_validation_failed_and_all_listed() {
    let cases: [(Route, Value, ExpectedFields); 6] = [
        (
            Route::ApiKeys,
            json!({"name": null, "enabled": "yes", "api_key": "has space", "provider_type": "OpenAI"}),
            &[
                ("api_key", "invalid_character"),
                ("enabled", "invalid_type"),
                ("name", "invalid_type"),
                ("provider_type", "read_only"),
            ],
        ),
        (
            Route::ApiKeys,
            json!({"name": "x".repeat(256), "id": ID, "created_at": "x", "updated_at": "y", "color": 1}),
            &[
                ("color", "unknown_field"),
                ("created_at", "read_only"),
                ("id", "read_only"),
                ("name", "too_long"),
                ("updated_at", "read_only"),
            ],
        ),
        (
            Route::McpServers,
            json!({"endpoint": "http://169.254.169.254/", "headers": {"Authorization": 1, "Bad Name": "v"}, "project_id": PROJECT}),
            &[
                ("endpoint", "forbidden_host"),
                ("headers.Authorization", "invalid_type"),
                ("headers.Bad Name", "invalid_name"),
                ("project_id", "read_only"),
            ],
        ),
        (
            Route::McpServers,
            json!({"endpoint": "http://10.0.0.1/", "name": "   "}),
            &[("endpoint", "private_host"), ("name", "blank")],
        ),
        (
            Route::Models,
            json!({"provider_type": "openai", "model_id": "", "parameters": {"reasoning": {"effort": 1e126}}}),
            &[
                ("model_id", "too_short"),
                ("parameters.reasoning.effort", "invalid_number"),
                ("provider_type", "invalid_enum"),
            ],
        ),
        (
            Route::Models,
            json!({"parameters": null, "api_key": "k", "name": "a\u{7}"}),
            &[
                ("api_key", "unknown_field"),
                ("name", "control_character"),
                ("parameters", "invalid_type"),
            ],
        ),
    ];
    for (route, body, expected) in cases {
        let found = rejected(route, put(route).json(&body), 400, "validation_failed").await;
        assert_eq!(found["message"], "Invalid request body");
        let expected: Vec<(String, String)> = expected
            .iter()
            .map(|(f, c)| (f.to_string(), c.to_string()))
            .collect();
        assert_eq!(field_codes(&found), expected, "{route:?}");
    }
    let enum_error = rejected(
        Route::Models,
        put(Route::Models).json(&json!({"provider_type": "xai"})),
        400,
        "validation_failed",
    )
    .await;
    assert_eq!(
        enum_error["errorDetails"]["fields"][0]["message"],
        "must be one of OpenAI, Anthropic, Gemini, xAI"
    );
}

/// Header names read as a CGI-style server reads them (case ignored, `_`
/// as `-`), every cloud's metadata-unlock header, and text that shows
/// nothing: 400 `validation_failed` naming the field, nothing written.
#[tokio::test]
async fn hostile_header_names_and_invisible_text_are_validation_failed() {
    let route = Route::McpServers;
    for name in [
        "X-Google-Metadata-Request",
        "x-aliyun-ecs-metadata-token",
        "X-ALIYUN-ECS-METADATA-TOKEN-TTL-SECONDS",
        "Metadata_Flavor",
        "X_aws_ec2_metadata_token",
        "Content_Length",
        "Transfer_Encoding",
        "Proxy_Authorization",
        "proxy_anything",
    ] {
        let found = rejected(
            route,
            put(route).json(&json!({"headers": {name: "v"}})),
            400,
            "validation_failed",
        )
        .await;
        assert_eq!(
            field_codes(&found),
            [(format!("headers.{name}"), "forbidden_name".to_string())],
            "{name}"
        );
    }
    let found = rejected(
        route,
        put(route).json(&json!({"headers": {"X-Api-Key": "a", "X_Api_Key": "b"}})),
        400,
        "validation_failed",
    )
    .await;
    assert_eq!(
        field_codes(&found),
        [("headers.X_Api_Key".to_string(), "duplicate_name".to_string())]
    );
    for invisible in [
        "\u{fff9}\u{fffa}\u{fffb}",
        "\u{13430}\u{1343f}",
        "\u{378}",
        "\u{2800}\u{3000}\u{200b}",
    ] {
        for (route, field) in [(Route::McpServers, "name"), (Route::Models, "model_id")] {
            let found = rejected(
                route,
                put(route).json(&json!({ field: invisible })),
                400,
                "validation_failed",
            )
            .await;
            assert_eq!(
                field_codes(&found),
                [(field.to_string(), "blank".to_string())],
                "{invisible:?}"
            );
        }
    }
    // Plain underscores and a visible format character are fine.
    let app = seeded(route);
    let body = json!({"headers": {"X_Custom": "v"}, "name": "\u{600}1"});
    assert_eq!(send(route, &app, put(route).json(&body)).await.status, 200);
}

#[tokio::test]
async fn private_endpoints_follow_the_policy() {
    let app = memory_app(Policy {
        allow_private_endpoints: true,
    });
    assert!(
        app.store
            .put(Route::McpServers.table(), Route::McpServers.item(PROJECT, ID))
    );
    let event = put(Route::McpServers).json(&json!({"endpoint": "http://localhost:8931/mcp"}));
    assert_eq!(send(Route::McpServers, &app, event).await.status, 200);
    let event = put(Route::McpServers).json(&json!({"endpoint": "http://169.254.169.254/"}));
    assert_eq!(send(Route::McpServers, &app, event).await.status, 400);
}

#[tokio::test]
async fn an_empty_object_is_empty_update() {
    for route in Route::ALL {
        rejected(route, put(route).body("{}"), 400, "empty_update").await;
        rejected(route, put(route).body(" { } "), 400, "empty_update").await;
    }
}

#[tokio::test]
async fn a_missing_record_or_another_project_is_not_found() {
    for route in Route::ALL {
        let app = seeded(route);
        let other_id = uuid::Uuid::new_v4().to_string();
        let event =
            Event::put(route, &other_id, route.scoped().then_some(PROJECT)).json(&json!({"name": "x"}));
        let outcome = send(route, &app, event).await;
        assert_eq!(
            (outcome.status, outcome.body["errorDetails"]["code"].clone()),
            (404, json!("not_found"))
        );
        if route.scoped() {
            let event = Event::put(route, ID, Some(OTHER_PROJECT)).json(&json!({"name": "x"}));
            let outcome = send(route, &app, event).await;
            assert_eq!(outcome.status, 404);
        }
        assert_eq!(
            app.store
                .get(route.table(), &key(route))
                .map(|i| i["name"].clone()),
            Some(Attr::S("Original".into()))
        );
    }
}

fn key(route: Route) -> agent_server_shared::store::Key {
    agent_server_shared::store::Key {
        project_id: route.scoped().then(|| PROJECT.into()),
        id: ID.into(),
    }
}

#[tokio::test]
async fn if_match_guards_the_update() {
    for route in Route::ALL {
        let app = seeded(route);
        let named = |name: &str| json!({ "name": name });
        let first = send(
            route,
            &app,
            put(route).header("If-Match", "\"0\"").json(&named("a")),
        )
        .await;
        assert_eq!(first.status, 200);
        assert_eq!(first.response.headers()["etag"], "\"1\"");
        let stale = send(
            route,
            &app,
            put(route).header("If-Match", "\"0\"").json(&named("b")),
        )
        .await;
        assert_eq!(stale.status, 412);
        assert_eq!(stale.body["errorDetails"]["code"], "precondition_failed");
        assert_eq!(stale.response.headers()["etag"], "\"1\"");
        let any = send(route, &app, put(route).header("If-Match", "*").json(&named("c"))).await;
        assert_eq!(any.status, 200);
        let listed = send(
            route,
            &app,
            put(route).header("If-Match", "\"9\", \"2\"").json(&named("d")),
        )
        .await;
        assert_eq!(
            (listed.status, listed.body["data"]["name"].clone()),
            (200, json!("d"))
        );
        rejected(
            route,
            put(route).header("If-Match", "3").json(&named("e")),
            400,
            "invalid_if_match",
        )
        .await;
        let missing_id = uuid::Uuid::new_v4().to_string();
        let event =
            Event::put(route, &missing_id, route.scoped().then_some(PROJECT)).header("If-Match", "\"1\"");
        assert_eq!(send(route, &app, event.json(&named("f"))).await.status, 404);
    }
}

#[tokio::test]
async fn a_body_over_64_kib_is_payload_too_large() {
    for route in Route::ALL {
        let over = json!({ "name": "x".repeat(64 * 1024) });
        rejected(route, put(route).json(&over), 413, "payload_too_large").await;
    }
}

/// The limit is the body's bytes, exactly: 64 KiB is read (and judged by the
/// field rules: a name that long is a 400), one byte more is a 413.
#[tokio::test]
async fn the_size_limit_is_exactly_64_kib() {
    let limit = agent_server_shared::request::MAX_BODY_BYTES;
    assert_eq!(limit, 64 * 1024);
    let body = |bytes: usize| format!("{{\"name\":\"{}\"}}", "x".repeat(bytes - r#"{"name":""}"#.len()));
    for route in Route::ALL {
        assert_eq!(body(limit).len(), limit);
        let at_limit = rejected(route, put(route).body(body(limit)), 400, "validation_failed").await;
        assert_eq!(
            at_limit["errorDetails"]["fields"][0]["field"], "name",
            "{at_limit}"
        );
        rejected(route, put(route).body(body(limit + 1)), 413, "payload_too_large").await;
    }
}

#[tokio::test]
async fn a_non_json_content_type_is_unsupported_media_type() {
    for route in Route::ALL {
        for content_type in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "application/xml",
            "multipart/form-data; boundary=x",
        ] {
            let event = put(route)
                .header("content-type", content_type)
                .json(&json!({"name": "x"}));
            rejected(route, event, 415, "unsupported_media_type").await;
        }
        // JSON that asks for patch semantics this API does not apply, and
        // any coding but identity: 415 with the reason, nothing written.
        for (name, value, says) in [
            ("content-type", "application/merge-patch+json", "application/json"),
            (
                "content-type",
                "Application/JSON-Patch+JSON; charset=utf-8",
                "application/json",
            ),
            ("content-encoding", "gzip", "Content-Encoding"),
            ("content-encoding", "identity, br", "Content-Encoding"),
        ] {
            let app = seeded(route);
            let event = put(route).header(name, value).json(&json!({"name": "x"}));
            let reply = send(route, &app, event).await;
            assert_eq!(reply.status, 415, "{value}");
            assert_eq!(reply.body["errorDetails"]["code"], "unsupported_media_type");
            assert!(
                reply.body["message"].as_str().is_some_and(|m| m.contains(says)),
                "{}",
                reply.body
            );
            assert_eq!(app.store.calls(), 0);
        }
        for content_type in ["application/json; charset=utf-8", "application/problem+json", ""] {
            let app = seeded(route);
            let event = put(route)
                .header("content-type", content_type)
                .json(&json!({"name": "x"}));
            assert_eq!(send(route, &app, event).await.status, 200, "{content_type:?}");
        }
    }
}

fn failing(error: StoreError) -> App<Failing> {
    App {
        store: Failing(error),
        settings: Settings::from_lookup(|_| None).unwrap(),
        sealer: Some(integration_tests::memory_sealer()),
    }
}

#[tokio::test]
async fn database_trouble_is_503_with_retry_after() {
    for route in Route::ALL {
        let app = failing(StoreError::Unavailable("throttled".into()));
        let outcome = send(route, &app, put(route).json(&json!({"name": "x"}))).await;
        assert_eq!(outcome.status, 503);
        assert_eq!(outcome.body["errorDetails"]["code"], "unavailable");
        assert_eq!(outcome.response.headers()["retry-after"], "1");
    }
}

#[tokio::test]
async fn anything_else_is_500_with_the_request_id_and_no_detail() {
    for route in Route::ALL {
        let app = failing(StoreError::Internal("ResourceNotFoundException".into()));
        let mut context = lambda_runtime::Context::default();
        context.request_id = "req-42".into();
        let request = put(route).json(&json!({"name": "x"})).request_in(context);
        let response = route.call(&app, request).await;
        let body = body_json(&response);
        assert_eq!(response.status().as_u16(), 500);
        assert_eq!(
            body["errorDetails"],
            json!({"code": "internal", "requestId": "req-42"})
        );
        assert_eq!(body["message"], "Internal server error");
        assert!(!body.to_string().contains("ResourceNotFound"));
    }
    // A stored item of the wrong shape is an internal error too, not a panic.
    let app = memory_app(Policy::default());
    let mut item = Route::ApiKeys.item(PROJECT, ID);
    item.insert("enabled".into(), Attr::S("true".into()));
    assert!(app.store.put(Route::ApiKeys.table(), item));
    let outcome = send(
        Route::ApiKeys,
        &app,
        put(Route::ApiKeys).json(&json!({"name": "x"})),
    )
    .await;
    assert_eq!(outcome.status, 500);
}

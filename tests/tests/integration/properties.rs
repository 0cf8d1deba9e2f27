//! Property tests over the whole request path (lambda_http event parsing,
//! extraction, validation, store, envelope) on the in-memory store:
//! arbitrary bytes and arbitrary JSON never panic and always produce one of
//! the documented statuses in a well-formed envelope, and whatever
//! validation accepts is stored and returned JSON-equal.

use agent_server_shared::rules::Policy;
use agent_server_shared::store::Key;
use integration_tests::events::Event;
use integration_tests::{Route, body_json, memory_app, same_json};
use proptest::prelude::*;
use serde_json::{Map, Number, Value};

const PROJECT: &str = "8a4b2c1d-3e5f-4a6b-8c7d-9e0f1a2b3c4d";
const ID: &str = "7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f";
const DOCUMENTED: [u16; 6] = [200, 400, 404, 412, 413, 415];

fn route() -> impl Strategy<Value = Route> {
    prop::sample::select(Route::ALL.to_vec())
}

/// Numbers as JSON text, from ordinary to DynamoDB's limits and beyond.
fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
        ("-?[1-9][0-9]{0,45}", -140i32..140).prop_map(|(mantissa, exponent)| {
            serde_json::from_str::<Value>(&format!("{mantissa}e{exponent}")).unwrap_or(Value::Null)
        }),
    ]
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9 _.-]{0,20}",
        any::<String>(),
        "\\PC{0,300}",
        Just(String::new()),
        Just("https://mcp.example.com/sse".to_string()),
        Just("http://169.254.169.254/".to_string()),
        prop::sample::select(vec!["OpenAI", "Anthropic", "Gemini", "xAI", "openai"]).prop_map(String::from),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number(),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(text(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A value for `field` that usually keeps its rule, sometimes not.
fn field_value(field: &'static str) -> BoxedStrategy<Value> {
    let valid: BoxedStrategy<Value> = match field {
        "name" | "model_id" => "[A-Za-z0-9][A-Za-z0-9 ._-]{0,40}".prop_map(Value::from).boxed(),
        "api_key" => "[A-Za-z0-9_-]{1,80}".prop_map(Value::from).boxed(),
        "enabled" => any::<bool>().prop_map(Value::Bool).boxed(),
        "endpoint" => "https://[a-z]{1,10}\\.example\\.com(:[1-9][0-9]{0,3})?/[a-z/]{0,20}"
            .prop_map(Value::from)
            .boxed(),
        "headers" => prop::collection::btree_map("[A-Za-z][A-Za-z0-9-]{0,15}", "[ -~]{0,30}", 0..5)
            .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k, Value::from(v))).collect()))
            .boxed(),
        "provider_type" => prop::sample::select(vec!["OpenAI", "Anthropic", "Gemini", "xAI"])
            .prop_map(Value::from)
            .boxed(),
        "parameters" => prop::collection::btree_map("[a-z_]{1,10}", json_value(), 0..5)
            .prop_map(|m| Value::Object(m.into_iter().collect()))
            .boxed(),
        _ => json_value().boxed(),
    };
    prop_oneof![6 => valid, 1 => json_value()].boxed()
}

/// Bodies of the route's own fields (and now and then another name), so
/// that a good share passes validation.
fn body(route: Route) -> BoxedStrategy<Map<String, Value>> {
    let fields: &'static [&'static str] = match route {
        Route::ApiKeys => &["name", "api_key", "enabled"],
        Route::McpServers => &["name", "endpoint", "headers"],
        Route::Models => &["name", "model_id", "provider_type", "parameters"],
    };
    let entry = prop_oneof![
        12 => prop::sample::select(fields.to_vec()),
        1 => prop::sample::select(vec!["id", "version", "other", "provider_type", "api_key"]),
    ]
    .prop_flat_map(|field| (Just(field), field_value(field)));
    prop::collection::vec(entry, 0..5)
        .prop_map(|entries| entries.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
        .boxed()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().build().unwrap()
}

fn event(route: Route) -> Event {
    Event::put(route, ID, route.scoped().then_some(PROJECT))
}

/// Sends the event to a seeded app; checks the envelope; returns status and body.
fn exchange(route: Route, event: Event) -> (u16, Value, agent_server_shared::store::MemoryStore) {
    let app = memory_app(Policy::default());
    assert!(app.store.put(route.table(), route.item(PROJECT, ID)));
    let response = runtime().block_on(route.call(&app, event.request()));
    let status = response.status().as_u16();
    let body = body_json(&response);
    assert!(
        DOCUMENTED.contains(&status),
        "undocumented status {status}: {body}"
    );
    assert_eq!(body["status"], status);
    assert_eq!(body["error"], status != 200);
    assert_eq!(body.as_object().map(Map::len), Some(5));
    if status == 200 {
        assert!(body["errorDetails"].as_object().is_some_and(Map::is_empty));
    } else {
        assert!(body["errorDetails"]["code"].is_string());
        assert!(body["data"].is_null());
    }
    (status, body, app.store)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(route in route(), bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let (status, _, store) = exchange(route, event(route).binary(&bytes));
        if status != 200 {
            prop_assert_eq!(store.calls(), 0);
        }
    }

    #[test]
    fn arbitrary_json_never_panics(route in route(), value in json_value()) {
        let (status, _, store) = exchange(route, event(route).json(&value));
        prop_assert!(status == 200 || store.calls() <= 1);
        if !value.is_object() {
            prop_assert_eq!(status, 400);
            prop_assert_eq!(store.calls(), 0);
        }
    }

    #[test]
    fn accepted_bodies_are_stored_and_returned_json_equal((route, body) in route().prop_flat_map(|r| (Just(r), body(r)))) {
        let (status, response, store) = exchange(route, event(route).json(&Value::Object(body.clone())));
        if status == 200 {
            let key = Key { project_id: route.scoped().then(|| PROJECT.to_string()), id: ID.to_string() };
            let stored = store.get(route.table(), &key).unwrap_or_default();
            for (name, value) in &body {
                let kept = stored.contains_key(name).then(|| integration_tests::stored_json(&stored, name));
                prop_assert!(kept.as_ref().is_some_and(|kept| same_json(kept, value)), "{} stored as {:?}", name, kept);
                if name != "api_key" {
                    prop_assert!(same_json(&response["data"][name], value), "{} returned as {}", name, response["data"][name]);
                }
            }
            prop_assert!(!response.to_string().contains("\"api_key\""));
        } else {
            prop_assert_eq!(store.calls(), if [404, 412].contains(&status) { 1 } else { 0 });
        }
    }
}

/// The round-trip property is only as good as the share of bodies that
/// pass validation: make sure it is not vacuous.
#[test]
fn the_body_strategy_reaches_acceptance() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let (mut accepted, total) = (0, 300);
    for _ in 0..total {
        let route = route()
            .new_tree(&mut runner)
            .map(|t| t.current())
            .unwrap_or(Route::Models);
        let body = body(route)
            .new_tree(&mut runner)
            .map(|t| t.current())
            .unwrap_or_default();
        if exchange(route, event(route).json(&Value::Object(body))).0 == 200 {
            accepted += 1;
        }
    }
    assert!(
        accepted * 10 >= total,
        "only {accepted} of {total} generated bodies were accepted"
    );
    println!("properties: {accepted} of {total} generated bodies accepted");
}

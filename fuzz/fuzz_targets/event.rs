//! Fuzzes the whole path a Lambda invocation takes: the raw bytes of an
//! API Gateway HTTP API (payload 2.0) event, read as `lambda_runtime` reads
//! them, then each function's own entry (`lambda::respond`: the event read
//! as `aws_lambda_events`' own type by `Request::from_event`, the guarded
//! handler) on an in-memory store that holds a record for the event's id
//! and project.
//!
//! Beyond "never panics": every answer is the envelope, its `status` is the
//! HTTP status, it is never a 500 (the store cannot fail here, so a 500
//! could only come from the input), and no answer carries the stored
//! `api_key`. A `PATCH` event (a merge patch) is applied to a stored record
//! the input shapes too: its body, sent first as a `PUT`, sets the record's
//! fields where the rules accept it; after a 200 every field of the stored
//! record still passes the rules a `PUT` is held to (every limit holds on
//! the merged result). The memory bound is libFuzzer's (`-rss_limit_mb`,
//! `-malloc_limit_mb` in `make fuzz`).

#![no_main]

use std::sync::OnceLock;

use agent_server_shared::rules::Policy;
use agent_server_shared::{patch, with_resource};
use integration_tests::{Route, memory_app, stored_json};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// The stored secret of the seeded API key (see `Route::item`).
const STORED_SECRET: &str = "sk-original-secret";

/// The five keys of the envelope, and nothing else.
const ENVELOPE: [&str; 5] = ["data", "error", "errorDetails", "message", "status"];

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
    })
}

/// `event` (a `PATCH`) as a JSON `PUT` of the same body, where its shape
/// allows one: `headers` absent, `null` or an object. Any other shape is
/// the function's 400 to give, and is sent as it is; nothing here indexes
/// into a value of the wrong type (serde_json's `IndexMut` would panic).
fn as_put(event: &Value) -> Option<Value> {
    let mut put = event.clone();
    let fields = put.as_object_mut()?;
    let headers = fields
        .entry("headers")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    if headers.is_null() {
        *headers = Value::Object(serde_json::Map::new());
    }
    headers
        .as_object_mut()?
        .insert("content-type".into(), Value::from("application/json"));
    *fields
        .get_mut("requestContext")?
        .get_mut("http")?
        .get_mut("method")? = Value::from("PUT");
    Some(put)
}

fuzz_target!(|data: &[u8]| {
    // lambda_runtime hands the function only events that are JSON; any
    // other invocation fails in the runtime, before the function's code.
    let Ok(event) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let id = event["pathParameters"]["id"].as_str().unwrap_or("").to_ascii_lowercase();
    let project = event["queryStringParameters"]["project_id"]
        .as_str()
        .unwrap_or("")
        .to_ascii_lowercase();
    for route in Route::ALL {
        let app = memory_app(Policy::default());
        app.store.put(route.table(), route.item(&project, &id));
        let is_patch = event["requestContext"]["http"]["method"] == "PATCH";
        if is_patch && let Some(put) = as_put(&event) {
            // The stored record, shaped by the input: its body as a PUT.
            runtime().block_on(route.respond(&app, put));
        }
        let response = runtime().block_on(route.respond(&app, event.clone()));
        let status = response.status_code;
        assert!(status != 500, "{route:?}: 500 for input");
        let body = response.body.as_ref().map(|b| b.as_ref().to_vec()).unwrap_or_default();
        let text = String::from_utf8(body).expect("the envelope is UTF-8");
        let envelope: Value = serde_json::from_str(&text).expect("the answer is JSON");
        let keys: Vec<&str> = envelope
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, ENVELOPE, "{route:?}: not the envelope: {text}");
        assert_eq!(envelope["status"].as_i64(), Some(status), "{route:?}: {text}");
        assert_eq!(envelope["error"].as_bool(), Some(status != 200), "{route:?}: {text}");
        if status != 200 {
            assert!(
                envelope["errorDetails"]["code"].as_str().is_some_and(|c| !c.is_empty()),
                "{route:?}: an error without a code: {text}"
            );
        }
        assert!(!text.contains(STORED_SECRET), "{route:?}: the stored api_key in {text}");
        if is_patch && status == 200 {
            // Every limit holds on what was stored: each settable field of
            // the record passes the PUT rules.
            let key = agent_server_shared::store::Key {
                project_id: route.scoped().then(|| project.clone()),
                id: id.clone(),
            };
            let stored = app.store.get(route.table(), &key).expect("the record");
            let fields: serde_json::Map<String, Value> = route
                .fields()
                .iter()
                // Settable and shown: every field but the write-only api_key.
                .filter(|field| field.rule().is_some() && field.is_kept_and_shown())
                .filter(|field| stored.get(field.name).is_some())
                .map(|field| (field.name.to_string(), stored_json(&stored, field.name)))
                .collect();
            if !fields.is_empty() {
                let checked = with_resource!(route.table(), R => patch::parse::<R>(&fields, Policy::default()).map(drop));
                assert!(checked.is_ok(), "{route:?}: a PATCH stored what the rules refuse: {checked:?}");
            }
        }
    }
});

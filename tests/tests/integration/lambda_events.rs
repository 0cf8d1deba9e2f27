//! Events with odd routing values (a `Host` or `X-Forwarded-Proto` that
//! forms no URL, a stage or domain of any text, a raw query a request line
//! cannot carry) and events that are no HTTP request (a body flagged base64
//! that is not, a method no request has): through the functions' Lambda
//! entry each gets an envelope. The functions never build a URL of the
//! routing values, so a request whose meaning is intact is served, and one
//! that cannot be read is refused with 400 `invalid_request`. (lambda_http,
//! which built a URI of them, panicked on most of these.)

use agent_server_shared::rules::Policy;
use aws_lambda_events::apigw::ApiGatewayV2httpResponse;
use integration_tests::events::Event;
use integration_tests::{Route, memory_app};
use serde_json::{Value, json};

const PROJECT: &str = "5f0c8a7e-3b1d-4e2f-9a6b-7c8d9e0f1a2b";

fn body(response: &ApiGatewayV2httpResponse) -> Value {
    let text = response
        .body
        .as_ref()
        .map(|body| body.as_ref().to_vec())
        .unwrap_or_default();
    serde_json::from_slice(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {response:?}"))
}

/// Hostile variations of a valid update; each names what it changes.
fn hostile(event: &Value) -> Vec<(&'static str, Value, u16)> {
    let with = |edit: &dyn Fn(&mut Value)| {
        let mut event = event.clone();
        edit(&mut event);
        event
    };
    vec![
        (
            "scheme 1nvalid",
            with(&|e| e["headers"]["x-forwarded-proto"] = json!("1nvalid")),
            200,
        ),
        (
            "scheme list",
            with(&|e| e["headers"]["x-forwarded-proto"] = json!("http,https")),
            200,
        ),
        (
            "host with a space",
            with(&|e| e["headers"]["host"] = json!("a b")),
            200,
        ),
        (
            "host unbalanced bracket",
            with(&|e| e["headers"]["host"] = json!("[::1")),
            200,
        ),
        (
            "host bad port",
            with(&|e| e["headers"]["host"] = json!("h:99999999")),
            200,
        ),
        (
            "host with braces",
            with(&|e| e["headers"]["host"] = json!("abc}def.example")),
            200,
        ),
        (
            "host with a quote or backtick",
            with(&|e| e["headers"]["host"] = json!("a\"b`c")),
            200,
        ),
        (
            "no host, domain with braces",
            with(&|e| {
                e["headers"].as_object_mut().map(|h| h.remove("host"));
                e["requestContext"]["domainName"] = json!("x{y}.example");
            }),
            200,
        ),
        (
            "stage with odd characters",
            with(&|e| e["requestContext"]["stage"] = json!("a b}{:99999")),
            200,
        ),
        (
            "bad host and domain",
            with(&|e| {
                e["headers"]["host"] = json!("a b");
                e["requestContext"]["domainName"] = json!("c d");
            }),
            200,
        ),
        (
            "raw query with space, quote and braces",
            with(&|e| {
                let raw = e["rawQueryString"].as_str().unwrap_or_default().to_string();
                e["rawQueryString"] = json!(format!("{raw}&q=a b\"{{}}|\u{7f}\u{1}é"));
            }),
            200,
        ),
        (
            "base64 flag on a body that is not base64",
            with(&|e| {
                e["isBase64Encoded"] = json!(true);
                e["body"] = json!("{\"name\": \"x\"}");
            }),
            400,
        ),
        (
            "method no HTTP request has",
            with(&|e| e["requestContext"]["http"]["method"] = json!("P T")),
            400,
        ),
        (
            "headers of the wrong shape",
            with(&|e| e["headers"] = json!(["host"])),
            400,
        ),
        ("not an event", json!("PUT /"), 400),
        ("null", Value::Null, 400),
    ]
}

#[tokio::test]
async fn every_event_gets_an_envelope_and_odd_routing_values_do_not_panic() {
    for route in Route::ALL {
        let app = memory_app(Policy::default());
        let id = uuid::Uuid::new_v4().to_string();
        assert!(app.store.put(route.table(), route.item(PROJECT, &id)));
        let project = route.scoped().then_some(PROJECT);
        let event = Event::put(route, &id, project)
            .header("host", "id.execute-api.us-east-1.amazonaws.com")
            .json(&json!({"name": "renamed"}))
            .to_json();
        for (case, event, status) in hostile(&event) {
            let response = route.respond(&app, event).await;
            let body = body(&response);
            assert_eq!(
                response.status_code,
                i64::from(status),
                "{route:?} {case}: {body}"
            );
            assert_eq!(body["status"], json!(status), "{route:?} {case}");
            assert_eq!(
                response.headers.get("content-type").and_then(|v| v.to_str().ok()),
                Some("application/json"),
                "{route:?} {case}"
            );
            if status == 200 {
                assert_eq!(body["data"]["name"], "renamed", "{route:?} {case}");
            } else {
                assert_eq!(
                    body["errorDetails"]["code"], "invalid_request",
                    "{route:?} {case}"
                );
            }
        }
    }
}

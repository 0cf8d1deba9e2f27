//! The access log's caller: its principal, never its token. Alone in its
//! test binary, since a test capturing logs shares tracing's per-callsite
//! interest cache with every other test running in the same process.

use agent_server_shared::item::Attr;
use agent_server_shared::rules::Policy;
use agent_server_shared::store::Key;
use integration_tests::events::{Event, IAM_USER_ARN};
use integration_tests::{Route, body_json, capture_logs, memory_app};
use serde_json::Value;

const PROJECT: &str = "8a4b2c1d-3e5f-4a6b-8c7d-9e0f1a2b3c4d";
const OTHER: &str = "0b7c6d5e-4f3a-4b2c-9d1e-0f9a8b7c6d5e";
const ID: &str = "7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f";

/// The JSON lines of captured log `text`.
fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .collect()
}

async fn status(route: Route, event: Event) -> u16 {
    let app = memory_app(Policy::default());
    app.store.put(route.table(), route.item(PROJECT, ID));
    let response = route.call(&app, event.request()).await;
    let _ = body_json(&response);
    response.status().as_u16()
}

#[tokio::test]
async fn the_access_log_names_the_principal_and_never_the_token() {
    const TOKEN: &str = "eyJhbGciOiJIUzI1NiJ9.SENTINEL-TOKEN-PAYLOAD.c2lnbmF0dXJl";
    let (logs, _guard) = capture_logs();
    let route = Route::Models;
    let put = |project| Event::put(route, ID, Some(project)).json(&route.full_body());
    let event = put(OTHER)
        .jwt(&[("sub", "agent-of-project-a"), ("projects", PROJECT)])
        .header("authorization", &format!("Bearer {TOKEN}"));
    assert_eq!(status(route, event).await, 403);
    let iam = put(PROJECT).header("authorization", &format!("AWS4-HMAC-SHA256 {TOKEN}"));
    assert_eq!(status(route, iam).await, 200);

    let text = logs.text();
    let access: Vec<Value> = text
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["target"] == "access")
        .collect();
    assert_eq!(access.len(), 2, "one access line per request: {text}");
    assert_eq!(access[0]["principal"], "agent-of-project-a");
    assert_eq!(access[0]["status"], 403);
    assert_eq!(access[1]["principal"], IAM_USER_ARN);
    assert!(
        !text.contains("SENTINEL-TOKEN"),
        "a token reached the log: {text}"
    );
    // The record, once validated, joins the line to the change event.
    assert_eq!(access[0]["id"], ID);
    assert_eq!(access[0]["project_id"], OTHER);
    assert_eq!(access[1]["project_id"], PROJECT);
}

#[tokio::test]
async fn ids_are_logged_only_once_validated_and_each_request_has_one_metrics_line() {
    let (logs, _guard) = capture_logs();
    let route = Route::Models;
    let raw = "not-a-uuid\nforged";
    let bad_id = Event::put(route, raw, Some(PROJECT)).json(&route.full_body());
    assert_eq!(status(route, bad_id).await, 400);
    let upper = PROJECT.to_uppercase();
    let bad_project = Event::put(route, ID, Some("x&y")).json(&route.full_body());
    assert_eq!(status(route, bad_project).await, 400);
    let normalised = Event::put(route, &ID.to_uppercase(), Some(&upper)).json(&route.full_body());
    assert_eq!(status(route, normalised).await, 200);

    let text = logs.text();
    let lines = json_lines(&text);
    let access: Vec<&Value> = lines.iter().filter(|line| line["target"] == "access").collect();
    assert_eq!(access.len(), 3, "{text}");
    assert!(access[0].get("id").is_none() && access[0].get("project_id").is_none());
    assert!(access[1].get("id").is_none() && access[1].get("project_id").is_none());
    assert_eq!(access[2]["id"], ID);
    assert_eq!(access[2]["project_id"], PROJECT);
    assert!(
        !text.contains("forged") && !text.contains("x&y"),
        "raw input logged: {text}"
    );

    // One EMF line per request, tied to it by the request id.
    let metrics: Vec<&Value> = lines.iter().filter(|line| line.get("_aws").is_some()).collect();
    assert_eq!(metrics.len(), 3, "{text}");
    let outcomes: Vec<&str> = metrics.iter().filter_map(|m| m["Outcome"].as_str()).collect();
    assert_eq!(outcomes, ["invalid", "invalid", "updated"]);
    for (metric, line) in metrics.iter().zip(&access) {
        assert_eq!(metric["Route"], "update-model");
        assert_eq!(metric["request_id"], line["request_id"]);
        assert_eq!(metric["Requests"], 1);
        assert!(metric["Latency"].is_number());
    }
    assert!(metrics[2]["DynamoDbLatency"].is_number());
    assert!(metrics[0].get("DynamoDbLatency").is_none());
    // No secret set, no KMS call, no KMS time.
    assert!(metrics.iter().all(|metric| metric.get("KmsLatency").is_none()));
}

#[tokio::test]
async fn a_request_that_seals_reports_its_kms_time() {
    let (logs, _guard) = capture_logs();
    let route = Route::ApiKeys;
    let event = Event::put(route, ID, None).json(&serde_json::json!({"api_key": "sk-metrics-1"}));
    assert_eq!(status(route, event).await, 200);
    let text = logs.text();
    let metric = text
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|line| line.get("_aws").is_some())
        .unwrap_or_else(|| panic!("no metrics line: {text}"));
    assert_eq!(metric["Route"], "update-api-key");
    assert!(metric["KmsLatency"].is_number(), "{metric}");
    let declared = metric["_aws"]["CloudWatchMetrics"][0]["Metrics"].to_string();
    assert!(declared.contains("KmsLatency"), "{declared}");
}

/// The principal in the one form it is logged and stored: whatever the
/// token's `sub` holds, visible ASCII but `"`, `\` and `%` stay, the rest
/// is percent-encoded; an empty `sub` (or IAM ARN) is no principal at all.
#[tokio::test]
async fn principals_are_logged_and_stored_in_one_form_and_an_empty_one_is_none() {
    let (logs, _guard) = capture_logs();
    let route = Route::Models;
    let key = Key {
        project_id: Some(PROJECT.to_string()),
        id: ID.to_string(),
    };
    let cases: [(&str, Option<&str>); 8] = [
        ("agent-1", Some("agent-1")),
        ("a\"b\\c", Some("a%22b%5Cc")),
        (
            "\",\"admin\":true,\"x\":\"",
            Some("%22,%22admin%22:true,%22x%22:%22"),
        ),
        ("line\nbreak\u{0}\u{1b}\u{7f}", Some("line%0Abreak%00%1B%7F")),
        (
            "模型 é😀\u{202e}",
            Some("%E6%A8%A1%E5%9E%8B%20%C3%A9%F0%9F%98%80%E2%80%AE"),
        ),
        ("100%25", Some("100%2525")),
        (" ", Some("%20")),
        ("", None),
    ];
    for (sub, expected) in cases {
        let app = memory_app(Policy::default());
        let mut item = route.item(PROJECT, ID);
        // A principal from an earlier write, which a write by nobody
        // named must not leave behind.
        item.insert("updated_by".into(), Attr::S("earlier-writer".into()));
        app.store.put(route.table(), item);
        let event = Event::put(route, ID, Some(PROJECT))
            .json(&route.full_body())
            .jwt(&[("sub", sub), ("projects", PROJECT)]);
        let response = route.call(&app, event.request()).await;
        assert_eq!(
            response.status().as_u16(),
            200,
            "{sub:?}: {}",
            body_json(&response)
        );
        let stored = app.store.get(route.table(), &key).unwrap_or_default();
        let stored = stored.get("updated_by").and_then(|value| value.as_s());
        assert_eq!(stored, expected, "{sub:?}");
    }
    let text = logs.text();
    let access: Vec<Value> = text
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["target"] == "access")
        .collect();
    assert_eq!(access.len(), cases.len(), "{text}");
    for (line, (sub, expected)) in access.iter().zip(cases) {
        assert_eq!(
            line.get("principal").and_then(Value::as_str),
            expected,
            "{sub:?}: {line}"
        );
    }
    // Nothing raw reached any line: a JSON reader sees no member the sub made.
    assert!(!text.contains("\\\"admin\\\""), "{text}");
}

/// An IAM caller whose ARN is empty is no principal either.
#[tokio::test]
async fn an_empty_iam_arn_is_no_principal() {
    let (logs, _guard) = capture_logs();
    let route = Route::ApiKeys;
    let app = memory_app(Policy::default());
    app.store.put(route.table(), route.item(PROJECT, ID));
    let event = Event::put(route, ID, None).json(&route.full_body()).iam_arn("");
    let response = route.call(&app, event.request()).await;
    assert_eq!(response.status().as_u16(), 200, "{}", body_json(&response));
    let key = Key {
        project_id: None,
        id: ID.to_string(),
    };
    let stored = app.store.get(route.table(), &key).unwrap_or_default();
    assert!(!stored.contains_key("updated_by"), "{stored:?}");
    let text = logs.text();
    let line = text
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|line| line["target"] == "access")
        .unwrap_or_else(|| panic!("no access line: {text}"));
    assert!(line.get("principal").is_none(), "{line}");
}

#[tokio::test]
async fn a_replay_is_marked_on_its_access_and_metrics_lines() {
    let (logs, _guard) = capture_logs();
    let app = memory_app(Policy::default());
    let route = Route::Models;
    app.store.put(route.table(), route.item(PROJECT, ID));
    let event = Event::put(route, ID, Some(PROJECT))
        .json(&route.full_body())
        .header("idempotency-key", "\"replayed-once\"");
    for _ in 0..2 {
        let response = route.call(&app, event.request()).await;
        assert_eq!(response.status(), 200, "{}", body_json(&response));
    }
    let text = logs.text();
    let lines = json_lines(&text);
    let access: Vec<&Value> = lines.iter().filter(|line| line["target"] == "access").collect();
    assert_eq!(access.len(), 2, "{text}");
    assert!(access[0].get("replayed").is_none(), "{}", access[0]);
    assert_eq!(access[1]["replayed"], true, "{}", access[1]);
    let metrics: Vec<&Value> = lines.iter().filter(|line| line.get("_aws").is_some()).collect();
    let outcomes: Vec<&str> = metrics.iter().filter_map(|m| m["Outcome"].as_str()).collect();
    assert_eq!(outcomes, ["updated", "replayed"], "{text}");
    assert_eq!(metrics[1]["replayed"], true);
    assert_eq!(metrics[1]["status"], 200);
}

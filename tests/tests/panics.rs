//! A panic anywhere in a request must still answer the 500 envelope, on
//! Lambda and on the local API, and be logged as a JSON ERROR line through
//! the services' own subscriber (Lambda drops a plain-text line at an
//! application log level above INFO). So must a failed start-up.

use agent_server_shared::config::ConfigError;
use agent_server_shared::item::Item;
use agent_server_shared::store::{StoreError, Update};
use agent_server_shared::{App, Request, Response, Settings, Store, handler, lambda, with_resource};
use aws_lambda_events::encodings::Body;
use integration_tests::events::Event;
use integration_tests::{CapturedLogs, Route, body_json, capture_logs};
use lambda_runtime::Context;
use serde_json::Value;

const LITERAL: &str = "store exploded";
const SECRET: &str = "sk-PANIC-SENTINEL-93be";

/// A store that panics in `update`, with a literal message or with one
/// formatted around a secret.
struct Panicking {
    formatted: bool,
}

impl Store for Panicking {
    async fn update(&self, _: Update) -> Result<Item, StoreError> {
        if self.formatted {
            panic!("could not store {SECRET}");
        }
        panic!("store exploded");
    }

    async fn read(
        &self,
        _: agent_server_shared::Table,
        _: &agent_server_shared::store::Key,
        _: std::time::Duration,
    ) -> Result<Option<Item>, StoreError> {
        panic!("store exploded");
    }
}

fn app(formatted: bool) -> App<Panicking> {
    App {
        store: Panicking { formatted },
        settings: Settings::default(),
        sealer: Some(integration_tests::memory_sealer()),
    }
}

fn request(route: Route, request_id: &str) -> Request {
    let id = uuid::Uuid::new_v4().to_string();
    let project = uuid::Uuid::new_v4().to_string();
    let project = route.scoped().then_some(project.as_str());
    let mut context = Context::default();
    context.request_id = request_id.to_string();
    Event::put(route, &id, project)
        .body(route.full_body().to_string())
        .request_in(context)
}

async fn handle(route: Route, app: &App<Panicking>, request: Request) -> Response {
    with_resource!(route.table(), R => handler::update_record::<R, _>(app, request).await)
}

fn assert_internal(response: &Response, request_id: Option<&str>) {
    assert_eq!(response.status().as_u16(), 500);
    assert_eq!(response.headers()["content-type"], "application/json");
    let body = body_json(response);
    assert_eq!(body["error"], true, "{body}");
    assert_eq!(body["status"], 500, "{body}");
    assert_eq!(body["data"], Value::Null, "{body}");
    assert_eq!(body["errorDetails"]["code"], "internal", "{body}");
    assert_eq!(body.as_object().map(|o| o.len()), Some(5), "{body}");
    if let Some(request_id) = request_id {
        assert_eq!(body["errorDetails"]["requestId"], request_id, "{body}");
    }
}

/// Every captured line, each of which must be a JSON object with a `level`
/// and an RFC 3339 `timestamp` (Lambda counts a line lacking either as INFO),
/// the metrics line included.
fn json_lines(logs: &CapturedLogs) -> Vec<Value> {
    let rfc3339 =
        regex::Regex::new(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$").unwrap();
    let text = logs.text();
    text.lines()
        .map(|line| {
            let value: Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("log line is not JSON ({e}): {line}"));
            assert!(value["level"].is_string(), "log line without a level: {line}");
            assert!(
                value["timestamp"].as_str().is_some_and(|t| rfc3339.is_match(t)),
                "log line without an RFC 3339 timestamp: {line}"
            );
            value
        })
        .collect()
}

fn errors(lines: &[Value]) -> Vec<&Value> {
    lines.iter().filter(|line| line["level"] == "ERROR").collect()
}

/// The `ColdStart` of the metrics line of this process's first request,
/// one that panics. Every test that handles a request awaits this one
/// first, so it is the process's first whichever test runs first.
async fn cold_start_of_a_first_request_that_panics() -> Value {
    static FIRST: tokio::sync::OnceCell<Value> = tokio::sync::OnceCell::const_new();
    FIRST
        .get_or_init(|| async {
            lambda::install_panic_hook();
            let (logs, _guard) = capture_logs();
            let response = handle(Route::Models, &app(false), request(Route::Models, "req-first")).await;
            assert_internal(&response, Some("req-first"));
            let lines = json_lines(&logs);
            // The metrics line is the embedded-metric-format document itself.
            let metrics: Vec<&Value> = lines.iter().filter(|line| line.get("_aws").is_some()).collect();
            assert_eq!(metrics.len(), 1, "{lines:?}");
            assert_eq!(metrics[0]["status"], 500, "{:?}", metrics[0]);
            metrics[0]["ColdStart"].clone()
        })
        .await
        .clone()
}

#[tokio::test]
async fn a_first_request_that_panics_is_still_a_cold_start() {
    assert_eq!(cold_start_of_a_first_request_that_panics().await, 1);
}

// Current-thread runtime: the handler, and so the panic hook, runs on this
// thread, where the capturing subscriber is installed.
#[tokio::test]
async fn a_panic_in_a_handler_answers_500_and_logs_a_json_error() {
    cold_start_of_a_first_request_that_panics().await;
    lambda::install_panic_hook();
    for route in Route::ALL {
        let (logs, _guard) = capture_logs();
        let request_id = format!("req-{}", route.collection());
        let response = handle(route, &app(false), request(route, &request_id)).await;
        assert_internal(&response, Some(&request_id));

        let lines = json_lines(&logs);
        let errors = errors(&lines);
        let panic = errors
            .iter()
            .find(|line| line["message"] == "panicked")
            .unwrap_or_else(|| panic!("no ERROR line for the panic in {lines:?}"));
        assert_eq!(panic["panic"], LITERAL);
        let location = panic["location"].as_str().unwrap_or_default();
        assert!(location.contains("panics.rs"), "{location}");
        assert!(
            errors
                .iter()
                .any(|line| line["request_id"] == request_id.as_str()),
            "no ERROR line names the request id: {lines:?}"
        );
        let access = lines
            .iter()
            .find(|line| line["target"] == "access")
            .unwrap_or_else(|| panic!("no access-log line in {lines:?}"));
        assert_eq!(access["status"], 500);
    }
}

#[tokio::test]
async fn a_formatted_panic_message_is_withheld() {
    cold_start_of_a_first_request_that_panics().await;
    lambda::install_panic_hook();
    let (logs, _guard) = capture_logs();
    let response = handle(Route::ApiKeys, &app(true), request(Route::ApiKeys, "req-secret")).await;
    assert_internal(&response, Some("req-secret"));
    let text = logs.text();
    assert!(!text.contains(SECRET), "the secret reached a log line: {text}");
    let lines = json_lines(&logs);
    assert!(
        errors(&lines).iter().any(|line| line["message"] == "panicked"),
        "no ERROR line for the panic in {lines:?}"
    );
}

#[tokio::test]
async fn a_panic_behind_the_local_api_answers_500() {
    cold_start_of_a_first_request_that_panics().await;
    lambda::install_panic_hook();
    let (logs, _guard) = capture_logs();
    let id = uuid::Uuid::new_v4();
    let project = uuid::Uuid::new_v4();
    let request = aws_lambda_events::http::Request::builder()
        .method("PUT")
        .uri(format!("/api/agent-server/models/{id}?project_id={project}"))
        .header("content-type", "application/json")
        .body(Body::Text(Route::Models.full_body().to_string()))
        .unwrap();
    let local = local_api::LocalApi {
        app: app(false),
        authorizer: local_api::gateway::Authorizer::Open,
        functions: local_api::functions::Functions::InProcess,
        docs: local_api::docs::Docs::default(),
    };
    let response = local_api::route(&local, request).await;
    assert_internal(&response, None);
    let lines = json_lines(&logs);
    assert!(
        errors(&lines).iter().any(|line| line["message"] == "panicked"),
        "no ERROR line for the panic in {lines:?}"
    );
}

#[test]
fn a_failed_start_up_is_logged_as_a_json_error() {
    let (logs, _guard) = capture_logs();
    let error = ConfigError::Invalid {
        name: "ALLOW_PRIVATE_ENDPOINTS",
        expected: "true or false",
    };
    assert!(lambda::started::<Panicking>(Err(error)).is_none());
    let lines = json_lines(&logs);
    let errors = errors(&lines);
    assert_eq!(errors.len(), 1, "{lines:?}");
    assert_eq!(errors[0]["message"], "start-up failed");
    let reason = errors[0]["error"].as_str().unwrap_or_default();
    assert!(reason.contains("ALLOW_PRIVATE_ENDPOINTS"), "{reason}");
}

/// The guard catches a panic only if it unwinds: `panic = "abort"` in any
/// build profile would turn every panic back into a dead process and API
/// Gateway's bare 500. The release profile must name `"unwind"`: the tool
/// that builds the shipped binaries aborts by default.
#[test]
fn no_build_profile_aborts_on_panic() {
    let path = integration_tests::repo_root().join("Cargo.toml");
    let manifest = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut section = String::new();
    let mut release_unwinds = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.to_string();
        } else if section.starts_with("[profile") {
            let setting: String = line.chars().filter(|c| !c.is_whitespace()).collect();
            assert!(
                !setting.starts_with("panic=\"abort\""),
                "{section} sets panic = \"abort\""
            );
            release_unwinds |= section == "[profile.release]" && setting == "panic=\"unwind\"";
        }
    }
    // cargo-lambda, which builds the shipped binaries, switches on
    // panic = "abort" unless the release profile names a strategy itself.
    assert!(release_unwinds, "[profile.release] must say panic = \"unwind\"");
}

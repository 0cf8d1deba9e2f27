//! A request's memory is bounded by a small multiple of its body, and an
//! error response stays small, on the worst bodies we can build.
//!
//! This binary counts every allocation (a global allocator that tracks live
//! bytes and their peak since a reset) and holds a single test, so nothing else allocates while
//! a request is measured. Each request goes the way Lambda delivers it: the
//! event's bytes are parsed as `lambda_runtime` does, then the functions'
//! own entry ([`agent_server_shared::lambda::respond`]) converts, validates,
//! writes to the in-memory store and builds the response.

use agent_server_shared::error::{MAX_FIELD_ERRORS_BYTES, MAX_FIELD_PATH_BYTES};
use agent_server_shared::mcp::{MAX_RESPONSE_BYTES, SystemResolver};
use agent_server_shared::request::MAX_BODY_BYTES;
use agent_server_shared::rules::Policy;
use integration_tests::events::Event;
use integration_tests::{Route, memory_app};
use peakmem_alloc::{INSTRUMENTED_SYSTEM, PeakMemAlloc, PeakMemAllocTrait};
use serde_json::Value;
use std::alloc::System;

// Counts live bytes; its peak is measured from the last reset.
#[global_allocator]
static ALLOCATOR: &PeakMemAlloc<System> = &INSTRUMENTED_SYSTEM;

/// The most a request may allocate beyond what is live before it, as a
/// multiple of its body and a constant for the runtime's own work.
const BODY_MULTIPLE: usize = 40;
const BASE_BYTES: usize = 2 * 1024 * 1024;

/// A body of at most [`MAX_BODY_BYTES`]: `open`, then `item(0)`, `item(1)`,
/// … (comma-separated) as long as they fit, then `close`.
fn filled(open: &str, item: impl Fn(usize) -> String, close: &str) -> String {
    let mut body = open.to_string();
    for i in 0.. {
        let next = item(i);
        let comma = usize::from(i > 0);
        if body.len() + comma + next.len() + close.len() > MAX_BODY_BYTES {
            break;
        }
        if comma == 1 {
            body.push(',');
        }
        body.push_str(&next);
    }
    body + close
}

/// `item` itself, whatever its place.
fn same(item: &str) -> impl Fn(usize) -> String + '_ {
    move |_| item.to_string()
}

/// The worst bodies we know of for each route, by name.
fn bodies(route: Route) -> Vec<(&'static str, String)> {
    let long_key = "k".repeat(30_000);
    let control_key = "\\u0001".repeat(5_000);
    let mut bodies = vec![
        ("unknown fields", filled("{", |i| format!(r#""{i}":1"#), "}")),
        (
            "unknown fields with long names",
            filled("{", |i| format!(r#""{i}{}":1"#, "u".repeat(500)), "}"),
        ),
        (
            "one long string",
            format!(r#"{{"name": "{}"}}"#, "n".repeat(MAX_BODY_BYTES - 20)),
        ),
        (
            "control characters in a name",
            format!(r#"{{"name": "{}"}}"#, "\\u0001".repeat((MAX_BODY_BYTES - 20) / 6)),
        ),
        (
            "deep arrays, many times",
            filled(
                r#"{"name": ["#,
                same(&format!("{}{}", "[".repeat(120), "]".repeat(120))),
                "]}",
            ),
        ),
    ];
    match route {
        Route::ApiKeys => {
            bodies.push((
                "long api_key",
                format!(r#"{{"api_key": "{}"}}"#, "k".repeat(MAX_BODY_BYTES - 20)),
            ));
        }
        Route::McpServers => {
            bodies.push((
                "many headers",
                filled(r#"{"headers": {"#, |i| format!(r#""{i}":"b""#), "}}"),
            ));
            bodies.push((
                "many headers of control characters",
                filled(r#"{"headers": {"#, |i| format!(r#""\u0001{i}":"\u0001""#), "}}"),
            ));
            // The largest body that is stored: 64 KiB of headers.
            bodies.push((
                "largest valid headers",
                filled(
                    r#"{"headers": {"#,
                    |i| format!(r#""h{i}":"{}""#, "v".repeat(1000)),
                    "}}",
                ),
            ));
            bodies.push((
                "a long endpoint",
                format!(
                    r#"{{"endpoint": "https://{}.example"}}"#,
                    "a".repeat(MAX_BODY_BYTES - 40)
                ),
            ));
        }
        Route::Models => {
            bodies.push((
                "a long key above bad numbers",
                format!(
                    r#"{{"parameters": {{"{long_key}": [{}]}}}}"#,
                    vec!["1e999"; (MAX_BODY_BYTES - 30_100) / 6].join(",")
                ),
            ));
            bodies.push((
                "a control-character key above bad numbers",
                format!(
                    r#"{{"parameters": {{"{control_key}": [{}]}}}}"#,
                    vec!["1e999"; (MAX_BODY_BYTES - 30_100) / 6].join(",")
                ),
            ));
            bodies.push((
                "many small keys",
                filled(r#"{"parameters": {"#, |i| format!(r#""{i}":0"#), "}}"),
            ));
            bodies.push((
                "many small numbers",
                filled(r#"{"parameters": {"a": ["#, same("0"), "]}}"),
            ));
            bodies.push((
                "many nulls and empty strings",
                filled(
                    r#"{"parameters": {"a": ["#,
                    |i| if i % 2 == 0 { "null".into() } else { r#""""#.into() },
                    "]}}",
                ),
            ));
            bodies.push((
                "many objects of one long key",
                filled(
                    r#"{"parameters": {"a": ["#,
                    |i| format!(r#"{{"{i}{}":[]}}"#, "k".repeat(40)),
                    "]}}",
                ),
            ));
            bodies.push((
                "many empty objects",
                filled(r#"{"parameters": {"a": ["#, same("{}"), "]}}"),
            ));
            bodies.push((
                "deep parameters, many times",
                filled(
                    r#"{"parameters": {"a": ["#,
                    same(&format!("{}{}", "[".repeat(120), "]".repeat(120))),
                    "]}}",
                ),
            ));
            // Objects of one entry, nested as deep as a body may: the
            // costliest value per byte of body.
            let nest = |i: usize| format!("{}{i}{}", r#"{"":"#.repeat(60), "}".repeat(60));
            bodies.push((
                "nested one-entry objects",
                filled(r#"{"parameters": {"a": ["#, nest, "]}}"),
            ));
            bodies.push((
                "many empty keys",
                filled(r#"{"parameters": {"a": ["#, same(r#"{"":0}"#), "]}}"),
            ));
            // The largest body that is stored: the success path's copies.
            bodies.push((
                "largest valid parameters",
                format!(r#"{{"parameters": {{"a": [{}]}}}}"#, vec!["1"; 8_000].join(",")),
            ));
        }
    }
    bodies
}

#[tokio::test(flavor = "current_thread")]
async fn a_request_allocates_a_small_multiple_of_its_body_and_errors_stay_small() {
    const PROJECT: &str = "5f0c8a7e-3b1d-4e2f-9a6b-7c8d9e0f1a2b";
    let mut report = Vec::new();
    for route in Route::ALL {
        let app = memory_app(Policy::default());
        let id = uuid::Uuid::new_v4().to_string();
        assert!(app.store.put(route.table(), route.item(PROJECT, &id)));
        let project = route.scoped().then_some(PROJECT);
        for (case, body) in bodies(route) {
            assert!(body.len() <= MAX_BODY_BYTES, "{case}: {} bytes", body.len());
            assert!(serde_json::from_str::<Value>(&body).is_ok(), "{case}: not JSON");
            let event = Event::put(route, &id, project)
                .body(body.clone())
                .to_json()
                .to_string();

            ALLOCATOR.reset_peak_memory();
            let response = match serde_json::from_str::<Value>(&event) {
                Ok(event) => route.respond(&app, event).await,
                Err(error) => panic!("{case}: event not JSON: {error}"),
            };
            let peak = ALLOCATOR.get_peak_memory();

            let text = response
                .body
                .as_ref()
                .map(|b| b.as_ref().to_vec())
                .unwrap_or_default();
            let answer: Value = serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{case}: {e}"));
            let status = response.status_code;
            report.push(format!(
                "{route:?} {case}: body {} B, peak {} KiB ({:.1}x body), {status}, response {} B",
                body.len(),
                peak / 1024,
                peak as f64 / body.len() as f64,
                text.len()
            ));
            assert!(
                peak <= BODY_MULTIPLE * body.len() + BASE_BYTES,
                "{route:?} {case}: {peak} bytes for a body of {}",
                body.len()
            );
            assert!(status != 500, "{route:?} {case}: {answer}");
            if status != 200 {
                // An error: small, and every path short.
                assert!(
                    text.len() <= MAX_FIELD_ERRORS_BYTES + 1024,
                    "{route:?} {case}: {} B",
                    text.len()
                );
                for field in answer["errorDetails"]["fields"].as_array().into_iter().flatten() {
                    let path = field["field"].as_str().unwrap_or_default();
                    let written = serde_json::to_string(path).map_or(usize::MAX, |json| json.len() - 2);
                    assert!(written <= MAX_FIELD_PATH_BYTES, "{route:?} {case}: {path:?}");
                }
            }
        }
    }
    // A verify=true handshake reads at most MAX_RESPONSE_BYTES of answers,
    // and holds about that much, whatever they hold, pins included: a
    // megabyte of tiny JSON values as the tools (refused at the first,
    // the rest skipped unread), as one tool's array or as one tool's object
    // (pinned: the array written as it is read, the object's members
    // sorted), each as one body and as one event.
    let zeros = vec!["0"; (MAX_RESPONSE_BYTES - 4096) / 2].join(",");
    let members: Vec<String> = (0..(MAX_RESPONSE_BYTES - 4096) / 12)
        .map(|n| format!(r#""{n:06}":0"#))
        .collect();
    use agent_server_shared::mcp::Failure::Protocol;
    let lists = [
        (
            "a megabyte of tools",
            format!("[{zeros}]"),
            Err(Protocol("a tool is not an I-JSON object (RFC 8785)")),
        ),
        (
            "one tool, a megabyte array",
            format!(r#"[{{"name":"wide","inputSchema":[{zeros}]}}]"#),
            Ok(1),
        ),
        (
            "one tool, a megabyte object",
            format!(r#"[{{"name":"wide","inputSchema":{{{}}}}}]"#, members.join(",")),
            Err(Protocol("a tool is larger than a pin reads")),
        ),
    ];
    for (case, tools, expected) in &lists {
        for streamed in [false, true] {
            let peer = hostile_mcp_peer(tools, streamed).await;
            let url = url::Url::parse(&format!("http://{peer}/mcp")).unwrap();
            let policy = agent_server_shared::mcp::DialPolicy {
                allow_private: true,
                refused: Vec::new(),
            };
            let headers = std::collections::BTreeMap::new();
            let budget = std::time::Duration::from_secs(10);
            ALLOCATOR.reset_peak_memory();
            let outcome =
                agent_server_shared::mcp::handshake(&url, &headers, &policy, &SystemResolver, budget).await;
            let peak = ALLOCATOR.get_peak_memory();
            report.push(format!(
                "{case} (streamed: {streamed}): peak {} KiB, {:?}",
                peak / 1024,
                outcome.as_ref().map(|verified| verified.tools())
            ));
            assert_eq!(
                &outcome.map(|verified| verified.tools()),
                expected,
                "{case}, streamed: {streamed}"
            );
            assert!(
                peak <= 4 * MAX_RESPONSE_BYTES,
                "{case}, streamed: {streamed}: {peak} bytes"
            );
        }
    }
    // The measured figures, for BENCHMARKS.md and reviews (--nocapture).
    println!("{}", report.join("\n"));
}

/// An MCP server on loopback whose `tools/list` answer is almost all of a
/// handshake's bytes, every tool a `0`: as JSON, or as one event. Its
/// answers are built before it listens, so it allocates nothing measured.
async fn hostile_mcp_peer(tools: &str, streamed: bool) -> std::net::SocketAddr {
    use tokio::io::AsyncWriteExt;
    let initialize = r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"wide","version":"1"}}}"#;
    let list = format!(r#"{{"jsonrpc":"2.0","id":2,"result":{{"tools":{tools}}}}}"#);
    let reply = |body: &str, events: bool| {
        let (kind, body) = match events {
            true => ("text/event-stream", format!("data: {body}\n\n")),
            false => ("application/json", body.to_string()),
        };
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    };
    let answers = [
        reply(initialize, false),
        b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".to_vec(),
        reply(&list, streamed),
    ];
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        for answer in answers {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            // One request per connection: its head, then its body.
            if integration_tests::read_request(&mut stream).await.is_none() {
                return;
            }
            let _ = stream.write_all(&answer).await;
            let _ = stream.shutdown().await;
        }
    });
    address
}

//! `verify=true` against real MCP servers on loopback (the reference
//! server from npm, a Python SDK server behind a bearer token, the reference
//! server in its older SSE mode) and against hostile peers written here
//! (silent, endless, huge, redirecting, not MCP, not TLS), through the local
//! API on DynamoDB Local: a record is written only after a handshake that
//! passed, holds what the server announced, and a failure names its stage,
//! writes nothing and shows no header value anywhere.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agent_server_shared::App;
use agent_server_shared::item::Item;
use agent_server_shared::rules::Policy;
use agent_server_shared::store::Key;
use integration_tests::{
    MCP_BEARER_TOKEN, Reply, Route, capture_logs, dynamo_app, http, mcp_bearer, mcp_everything,
    mcp_everything_sse, serve_local_api, stored_json,
};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

const SENTINEL: &str = "Bearer VERIFY-HEADER-SENTINEL-51d3";
pub(super) const JSON: [(&str, &str); 1] = [("content-type", "application/json")];
pub(super) const MERGE: [(&str, &str); 1] = [("content-type", "application/merge-patch+json")];

/// The local API on DynamoDB Local, private endpoints allowed (the peers
/// are on loopback), as `make run` serves it.
pub(super) async fn api() -> String {
    let app: App<_> = dynamo_app(Policy {
        allow_private_endpoints: true,
    })
    .await;
    serve_local_api(Arc::new(app), std::future::pending::<()>())
        .await
        .0
}

/// A fresh MCP server record holding `endpoint` and one plain header.
async fn record(endpoint: &str) -> Key {
    integration_tests::mcp_record(Some(endpoint)).await
}

pub(super) async fn stored(key: &Key) -> Item {
    integration_tests::stored_mcp(key).await
}

pub(super) fn url(base: &str, key: &Key, query: &str) -> String {
    format!(
        "{base}/api/agent-server/mcp-servers/{}?project_id={}{query}",
        key.id,
        key.project_id.as_deref().unwrap_or_default()
    )
}

async fn put(base: &str, key: &Key, query: &str, body: Value) -> Reply {
    http("PUT", &url(base, key, query), &JSON, body.to_string()).await
}

async fn patch(base: &str, key: &Key, query: &str, body: Value) -> Reply {
    http("PATCH", &url(base, key, query), &MERGE, body.to_string()).await
}

/// Asserts a 422 at `stage` that left the record as it was and shows no
/// header value.
async fn refused(reply: &Reply, key: &Key, before: &Item, stage: &str) {
    assert_eq!(reply.status, 422, "{}", reply.body);
    assert_eq!(
        reply.body["errorDetails"]["code"], "mcp_unverified",
        "{}",
        reply.body
    );
    assert_eq!(reply.body["errorDetails"]["stage"], stage, "{}", reply.body);
    assert!(!reply.body.to_string().contains("SENTINEL"), "{}", reply.body);
    assert_eq!(&stored(key).await, before, "a refused verify wrote");
}

#[tokio::test]
async fn a_passed_handshake_writes_the_record_with_what_the_server_announced() {
    let base = api().await;
    let bearer = mcp_bearer().await;
    let key = record("https://mcp.example.com/v1").await;
    let endpoint = format!("{}/mcp", bearer.base);
    let token = format!("Bearer {MCP_BEARER_TOKEN}");
    let started = agent_server_shared::writes::timestamp();
    let reply = put(
        &base,
        &key,
        "&verify=true",
        json!({"endpoint": endpoint, "headers": {"Authorization": token}}),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let data = &reply.body["data"];
    let verification = &data["verification"];
    assert_eq!(verification["name"], "bearer-peer");
    assert_eq!(verification["version"], "1.4.2");
    assert_eq!(verification["tools"], 2, "the server lists echo and add");
    assert_eq!(verification["protocol_version"], "2025-11-25");
    // Stored timestamps sort as text.
    let at = verification["verified_at"].as_str().unwrap();
    assert!(
        at >= started.as_str() && at <= data["updated_at"].as_str().unwrap(),
        "{at}"
    );
    // In the record's order, between headers and created_at.
    let text = reply.body.to_string();
    let order: Vec<usize> = ["\"headers\"", "\"verification\"", "\"created_at\""]
        .iter()
        .map(|name| text.find(name).unwrap())
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");
    // Stored with the record, the header sealed as ever.
    let item = stored(&key).await;
    assert_eq!(stored_json(&item, "verification"), *verification);
    assert_eq!(stored_json(&item, "headers"), json!({"Authorization": token}));
    assert_eq!(data["endpoint"], endpoint);
}

#[tokio::test]
async fn the_reference_server_passes_over_event_streams() {
    let base = api().await;
    let everything = mcp_everything().await;
    let key = record(&format!("{}/mcp", everything.base)).await;
    // PATCH {}: the stored configuration verified and recorded (a write).
    let before = stored(&key).await;
    let reply = patch(&base, &key, "&verify=true", json!({})).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let verification = &reply.body["data"]["verification"];
    assert_eq!(verification["name"], "mcp-servers/everything", "{verification}");
    assert!(verification["tools"].as_u64().unwrap() >= 5, "{verification}");
    assert_eq!(reply.headers["etag"], "\"1\"");
    assert_ne!(stored(&key).await, before);
    // The same without verify writes nothing.
    let again = patch(&base, &key, "", json!({})).await;
    assert_eq!(again.headers["etag"], "\"1\"");
    assert_eq!(again.body["data"]["verification"], *verification);
}

#[tokio::test]
async fn a_wrong_token_a_wrong_path_and_the_old_transport_name_their_stage() {
    let base = api().await;
    let bearer = mcp_bearer().await;
    let sse = mcp_everything_sse().await;
    let key = record("https://mcp.example.com/v1").await;
    let before = stored(&key).await;
    let (logs, _guard) = capture_logs();
    let cases = [
        (format!("{}/mcp", bearer.base), "unauthorized", Some(401u64)),
        (format!("{}/nowhere", bearer.base), "unauthorized", Some(401)),
        (format!("{}/sse", sse.base), "unsupported_transport", None),
        (format!("{}/mcp", sse.base), "http_status", Some(404)),
    ];
    for (endpoint, stage, status) in cases {
        let body = json!({"endpoint": endpoint, "headers": {"Authorization": SENTINEL}});
        let reply = put(&base, &key, "&verify=true", body).await;
        refused(&reply, &key, &before, stage).await;
        assert_eq!(
            reply.body["errorDetails"]
                .get("httpStatus")
                .and_then(Value::as_u64),
            status,
            "{endpoint}"
        );
    }
    // The right token on a path the server does not serve.
    let token = format!("Bearer {MCP_BEARER_TOKEN}");
    let body = json!({"endpoint": format!("{}/nowhere", bearer.base), "headers": {"Authorization": token}});
    let reply = put(&base, &key, "&verify=true", body).await;
    refused(&reply, &key, &before, "http_status").await;
    assert_eq!(reply.body["errorDetails"]["httpStatus"], 404);
    assert!(
        !logs.text().contains("SENTINEL"),
        "a header value reached the log"
    );
    assert!(
        !logs.text().contains(MCP_BEARER_TOKEN),
        "a header value reached the log"
    );
    assert!(
        logs.text().contains("\"stage\":\"unauthorized\""),
        "{}",
        logs.text()
    );
}

#[tokio::test]
async fn a_patch_that_rotates_one_header_then_verifies() {
    let base = api().await;
    let bearer = mcp_bearer().await;
    let key = record(&format!("{}/mcp", bearer.base)).await;
    // An expired token and a second header, written without verify.
    let reply = put(
        &base,
        &key,
        "",
        json!({"headers": {"Authorization": "Bearer expired", "X-Trace": "kept"}}),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let reply = patch(&base, &key, "&verify=true", json!({})).await;
    assert_eq!(reply.body["errorDetails"]["stage"], "unauthorized");
    let token = format!("Bearer {MCP_BEARER_TOKEN}");
    let reply = patch(
        &base,
        &key,
        "&verify=true",
        json!({"headers": {"Authorization": token}}),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["data"]["verification"]["tools"], 2);
    let expected = json!({"Authorization": token, "X-Trace": "kept"});
    assert_eq!(reply.body["data"]["headers"], expected);
    assert_eq!(stored_json(&stored(&key).await, "headers"), expected);
}

#[tokio::test]
async fn an_unverified_change_of_endpoint_or_headers_removes_the_verification() {
    let base = api().await;
    let bearer = mcp_bearer().await;
    let endpoint = format!("{}/mcp", bearer.base);
    let key = record(&endpoint).await;
    let token = format!("Bearer {MCP_BEARER_TOKEN}");
    let verify = |body: Value| {
        let (base, key) = (base.clone(), key.clone());
        async move { put(&base, &key, "&verify=true", body).await }
    };
    let verified = verify(json!({"headers": {"Authorization": token}})).await;
    assert!(
        verified.body["data"]["verification"].is_object(),
        "{}",
        verified.body
    );
    // A PATCH that leaves the endpoint and the headers as they were keeps it:
    // the name alone, the same values, a removal of a header that is not there.
    for body in [
        json!({"name": "Renamed"}),
        json!({"headers": {"Authorization": token}}),
        json!({"endpoint": endpoint}),
        json!({"endpoint": endpoint, "headers": {"Absent": null}}),
        json!({"headers": {}}),
    ] {
        let reply = patch(&base, &key, "", body.clone()).await;
        assert_eq!(reply.status, 200, "{body}: {}", reply.body);
        assert_eq!(
            reply.body["data"]["verification"], verified.body["data"]["verification"],
            "{body} removed the verification"
        );
        assert!(stored(&key).await.contains_key("verification"), "{body}");
    }
    // One that changes either removes it; so does a PUT that sets either,
    // which reads nothing first.
    let changes = [
        ("PATCH", json!({"headers": {"Authorization": "Bearer other"}})),
        ("PATCH", json!({"headers": {"X-New": "v"}})),
        ("PATCH", json!({"headers": null})),
        ("PATCH", json!({"endpoint": format!("{}/other", bearer.base)})),
        ("PUT", json!({"endpoint": endpoint})),
        ("PUT", json!({"headers": {"Authorization": token}})),
    ];
    for (method, body) in changes {
        assert_eq!(
            verify(json!({"endpoint": endpoint, "headers": {"Authorization": token}}))
                .await
                .status,
            200
        );
        let reply = if method == "PUT" {
            put(&base, &key, "", body.clone()).await
        } else {
            patch(&base, &key, "", body.clone()).await
        };
        assert_eq!(reply.status, 200, "{method} {body}: {}", reply.body);
        assert!(
            reply.body["data"].get("verification").is_none(),
            "{method} {body} kept the verification: {}",
            reply.body
        );
        assert!(
            !stored(&key).await.contains_key("verification"),
            "{method} {body}"
        );
    }
}

#[tokio::test]
async fn verify_takes_only_true_and_without_it_nothing_is_dialed() {
    let base = api().await;
    let peer = Peer::start(Behaviour::Html).await;
    let key = record(&peer.url("/mcp")).await;
    let before = stored(&key).await;
    for query in [
        "&verify=false",
        "&verify=TRUE",
        "&verify=",
        "&verify=true&verify=true",
        "&verify",
    ] {
        let reply = put(&base, &key, query, json!({"name": "x"})).await;
        assert_eq!(reply.status, 400, "{query}: {}", reply.body);
        assert_eq!(reply.body["errorDetails"]["code"], "invalid_verify", "{query}");
    }
    assert_eq!(stored(&key).await, before);
    for (method, body) in [("PUT", json!({"name": "x"})), ("PATCH", json!({}))] {
        let headers = if method == "PUT" { JSON } else { MERGE };
        let reply = http(method, &url(&base, &key, ""), &headers, body.to_string()).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    assert_eq!(
        peer.connections(),
        0,
        "a request without verify dialed the endpoint"
    );
}

#[tokio::test]
async fn hostile_peers_are_refused_at_their_stage_within_the_budget() {
    let base = api().await;
    let key = record("https://mcp.example.com/v1").await;
    let before = stored(&key).await;
    let (logs, _guard) = capture_logs();
    let cases = [
        (Behaviour::Html, "http", "not_mcp"),
        (Behaviour::NotJsonRpc, "http", "not_mcp"),
        (Behaviour::Redirect, "http", "http_status"),
        (Behaviour::Huge, "http", "protocol"),
        (Behaviour::Endless, "http", "protocol"),
        (Behaviour::Silent, "http", "timeout"),
        (Behaviour::NotTls, "https", "tls"),
        (Behaviour::BadName, "http", "protocol"),
        (Behaviour::EchoCredential, "http", "protocol"),
        (Behaviour::EchoUpperCase, "http", "protocol"),
        (Behaviour::EchoSplit, "http", "protocol"),
    ];
    for (behaviour, scheme, stage) in cases {
        let peer = Peer::start(behaviour).await;
        let endpoint = peer.url("/mcp").replace("http:", &format!("{scheme}:"));
        let started = Instant::now();
        let body = json!({"endpoint": endpoint, "headers": {"Authorization": SENTINEL}});
        let reply = put(&base, &key, "&verify=true", body).await;
        // The handshake's 4 s, and the answer well inside the 10 s timeout.
        assert!(
            started.elapsed() < Duration::from_secs(6),
            "{behaviour:?}: {:?}",
            started.elapsed()
        );
        refused(&reply, &key, &before, stage).await;
        if behaviour == Behaviour::Redirect {
            assert_eq!(reply.body["errorDetails"]["httpStatus"], 307);
            assert_eq!(peer.requests(), 1, "the redirect was followed");
        }
    }
    // A dead port.
    let closed = integration_tests::free_port();
    let body = json!({"endpoint": format!("http://127.0.0.1:{closed}/mcp")});
    refused(
        &put(&base, &key, "&verify=true", body).await,
        &key,
        &before,
        "connect",
    )
    .await;
    assert!(!logs.text().contains("SENTINEL"));
}

#[tokio::test]
async fn the_mcp_client_s_own_headers_are_refused_at_write_and_never_sent_from_a_stored_record() {
    use agent_server_shared::item::Attr as A;
    let base = api().await;
    let peer = Peer::start(Behaviour::Paged).await;
    let key = record(&peer.url("/mcp")).await;
    let before = stored(&key).await;
    for name in [
        "Mcp-Session-Id",
        "mcp_session_id",
        "MCP_PROTOCOL_VERSION",
        "mcp-Protocol_version",
        "Last-Event-ID",
        "LAST_EVENT_ID",
    ] {
        let reply = put(&base, &key, "", json!({"headers": {name: "s-2"}})).await;
        assert_eq!(reply.status, 400, "{name}: {}", reply.body);
        assert_eq!(
            reply.body["errorDetails"]["fields"][0]["code"], "forbidden_name",
            "{name}: {}",
            reply.body
        );
    }
    assert_eq!(stored(&key).await, before, "a refused name was written");
    // A record stored before the rule refused them: plain headers.
    let mut item = before.clone();
    let legacy = [
        ("Mcp_Session_Id", "s-evil"),
        ("MCP_Protocol_Version", "1999-01-01"),
        ("Last_Event_ID", "e-evil"),
        ("X-Kept", "kept"),
    ];
    item.insert(
        "headers".into(),
        A::M(
            legacy
                .iter()
                .map(|(name, value)| (name.to_string(), A::S(value.to_string())))
                .collect(),
        ),
    );
    let dynamo = integration_tests::client(&integration_tests::dynamo_local().await.endpoint);
    integration_tests::put_item(&dynamo, agent_server_shared::Table::McpServers, item).await;
    let reply = patch(&base, &key, "&verify=true", json!({})).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let heads = peer.heads();
    assert!(heads.len() >= 3, "{heads:?}");
    for head in &heads {
        assert!(head.contains("x-kept: kept\r\n"), "{head}");
        for refused in [
            "mcp_session_id",
            "mcp_protocol_version",
            "last_event_id",
            "evil",
            "1999-01-01",
        ] {
            assert!(!head.contains(refused), "{refused} was sent: {head}");
        }
    }
}

#[tokio::test]
async fn the_write_time_rule_still_refuses_private_endpoints_where_the_policy_does() {
    // The default policy: loopback is refused at the body check (400),
    // before any handshake.
    let app = dynamo_app(Policy::default()).await;
    let base = serve_local_api(Arc::new(app), std::future::pending::<()>())
        .await
        .0;
    let peer = Peer::start(Behaviour::Html).await;
    let key = record("https://mcp.example.com/v1").await;
    let reply = put(&base, &key, "&verify=true", json!({"endpoint": peer.url("/mcp")})).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    // A stored loopback endpoint (written when the policy allowed it) is
    // refused by the dial.
    let key = record(&peer.url("/mcp")).await;
    let before = stored(&key).await;
    let reply = patch(&base, &key, "&verify=true", json!({})).await;
    refused(&reply, &key, &before, "address_refused").await;
    assert_eq!(peer.connections(), 0);
}

#[tokio::test]
async fn tools_are_counted_over_every_page_in_the_session_the_server_opened() {
    let base = api().await;
    let peer = Peer::start(Behaviour::Paged).await;
    let key = record(&peer.url("/mcp")).await;
    let reply = patch(&base, &key, "&verify=true", json!({})).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let verification = &reply.body["data"]["verification"];
    assert_eq!(verification["tools"], 6, "{verification}");
    assert_eq!(verification["protocol_version"], "2025-06-18");
    // initialize, initialized, three pages, and the session's DELETE.
    assert_eq!(peer.requests(), 6);
    // A server that closes a kept-alive connection as a request arrives on
    // it, unanswered (cleanly, or with a reset): each such request is sent
    // once more, on a new one.
    for behaviour in [Behaviour::ClosesUnanswered, Behaviour::ResetsUnanswered] {
        let peer = Peer::start(behaviour).await;
        let key = record(&peer.url("/mcp")).await;
        let reply = patch(&base, &key, "&verify=true", json!({})).await;
        assert_eq!(reply.status, 200, "{behaviour:?}: {}", reply.body);
        assert_eq!(reply.body["data"]["verification"]["tools"], 6);
        assert_eq!(peer.requests(), 6, "{behaviour:?}: each request answered once");
        assert_eq!(
            peer.unanswered(),
            5,
            "{behaviour:?}: every request after initialize first sent on a kept-alive connection"
        );
    }
    // A stream that ends before its answer is resumed after its last id.
    let peer = Peer::start(Behaviour::Resumed).await;
    let key = record(&peer.url("/mcp")).await;
    let reply = patch(&base, &key, "&verify=true", json!({})).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["data"]["verification"]["tools"], 6);
    assert_eq!(peer.requests(), 7, "the resume is one GET more");
    // A server without tools is verified with none, and not asked for them.
    let peer = Peer::start(Behaviour::NoTools).await;
    let key = record(&peer.url("/mcp")).await;
    let reply = patch(&base, &key, "&verify=true", json!({})).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["data"]["verification"]["tools"], 0);
    assert_eq!(peer.requests(), 3, "initialize, initialized and the DELETE");
}

/// Under an Idempotency-Key, a verified write is kept like any other: its
/// retry answers the kept outcome and dials nothing.
#[tokio::test]
async fn a_retried_verified_write_is_replayed_without_a_handshake() {
    let app = dynamo_app(Policy {
        allow_private_endpoints: true,
    })
    .await;
    let peer = Peer::start(Behaviour::Paged).await;
    let key = record("https://mcp.example.com/v1").await;
    let project = key.project_id.as_deref().unwrap_or_default();
    let event = || {
        integration_tests::events::Event::put(Route::McpServers, &key.id, Some(project))
            .query(&format!("project_id={project}&verify=true"))
            .header("Idempotency-Key", "verify-retry-1")
            .json(&json!({"endpoint": peer.url("/mcp")}))
    };
    let first = Route::McpServers.call(&app, event().request()).await;
    assert_eq!(first.status(), 200, "{:?}", first.body());
    let dialed = peer.requests();
    let again = Route::McpServers.call(&app, event().request()).await;
    assert_eq!(again.status(), 200);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(
        integration_tests::body_json(&again),
        integration_tests::body_json(&first)
    );
    assert_eq!(peer.requests(), dialed, "a replay dialed the server");
    // The same key without verify is another request.
    let unverified = integration_tests::events::Event::put(Route::McpServers, &key.id, Some(project))
        .header("Idempotency-Key", "verify-retry-1")
        .json(&json!({"endpoint": peer.url("/mcp")}));
    let reused = Route::McpServers.call(&app, unverified.request()).await;
    assert_eq!(reused.status(), 422);
    assert_eq!(
        integration_tests::body_json(&reused)["errorDetails"]["code"],
        "idempotency_key_reused"
    );
}

#[tokio::test]
async fn the_consumer_example_dials_through_the_same_guard() {
    let bearer = mcp_bearer().await;
    let example = integration_tests::workspace_binary("dial_mcp_endpoint");
    let run = |allow: &str| {
        std::process::Command::new(&example)
            .arg(format!("{}/mcp", bearer.base))
            .env(
                "MCP_HEADERS",
                json!({"Authorization": format!("Bearer {MCP_BEARER_TOKEN}")}).to_string(),
            )
            .env("ALLOW_PRIVATE_ENDPOINTS", allow)
            .output()
            .expect("cannot run the example")
    };
    let passed = run("true");
    assert!(
        passed.status.success(),
        "{}",
        String::from_utf8_lossy(&passed.stderr)
    );
    let announced: Value = serde_json::from_slice(&passed.stdout).unwrap();
    assert_eq!(announced["tools"], 2, "{announced}");
    assert_eq!(announced["name"], "bearer-peer");
    // Loopback, refused by the default policy before any connection.
    let refused = run("false");
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("refused at address_refused"), "{said}");
    assert!(!said.contains(MCP_BEARER_TOKEN));
}

/// What a hostile peer does with each request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Behaviour {
    /// 200 with an HTML page.
    Html,
    /// 200 with JSON that is not JSON-RPC.
    NotJsonRpc,
    /// 307 to the cloud metadata address.
    Redirect,
    /// 200 with 2 MiB of JSON.
    Huge,
    /// 200 with an event stream that never ends or answers.
    Endless,
    /// Reads the request and never answers.
    Silent,
    /// Answers plain HTTP at once, whatever it is sent (a TLS hello).
    NotTls,
    /// An MCP server written here: a session it requires back, tools
    /// listed over three pages (6 in all), JSON answers.
    Paged,
    /// As `Paged`, but keeping each connection open after its answer (no
    /// `connection: close`), then reading the next request on it and
    /// closing without an answer: the race of a keep-alive close, made
    /// certain.
    ClosesUnanswered,
    /// As `ClosesUnanswered`, but closing with the next request unread,
    /// which the kernel answers with a reset.
    ResetsUnanswered,
    /// As `Paged`, but announcing a name no display field may hold.
    BadName,
    /// As `Paged`, but announcing the credential of the `Authorization`
    /// it was sent (without its scheme) as its name.
    EchoCredential,
    /// As `Paged`, but announcing the whole `Authorization` value,
    /// upper-cased, as its version.
    EchoUpperCase,
    /// As `Paged`, but announcing the credential split in two: the first
    /// half as its name, the rest as its version.
    EchoSplit,
    /// As `Paged`, but it ends `initialize`'s event stream after an event
    /// id and answers when the stream is resumed from it.
    Resumed,
    /// As `Paged`, but declaring no tools capability (and refusing
    /// `tools/list`, as such a server may).
    NoTools,
}

/// The scripted server's answer to one request (its head in lower case).
fn scripted(
    behaviour: Behaviour,
    head: &str,
    body: &[u8],
    respond: impl Fn(&str, &str, &[u8]) -> Vec<u8>,
) -> Vec<u8> {
    let message: Value = serde_json::from_slice(body).unwrap_or_default();
    let method = message["method"].as_str().unwrap_or_default();
    let session = head.contains("mcp-session-id: s-1\r\n");
    let version = head.contains("mcp-protocol-version: 2025-06-18\r\n");
    if head.starts_with("delete") {
        return respond("200 OK", "application/json", b"{}");
    }
    let answer = |result: Value| json!({"jsonrpc": "2.0", "id": message["id"], "result": result}).to_string();
    let initialized = json!({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-06-18",
        "capabilities": {"tools": {}}, "serverInfo": {"name": "paged-peer", "version": "0.9"}}});
    if head.starts_with("get") && head.contains("last-event-id: e1\r\n") && session {
        return respond(
            "200 OK",
            "text/event-stream",
            format!("id: e2\ndata: {initialized}\n\n").as_bytes(),
        );
    }
    match method {
        "initialize" if behaviour == Behaviour::Resumed => {
            let mut out = respond("200 OK", "text/event-stream", b"id: e1\nretry: 5\ndata:\n\n");
            let at = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(0);
            out.splice(at..at, b"\r\nmcp-session-id: s-1".iter().copied());
            out
        }
        "initialize" => {
            // The head is in lower case: an echo of it differs in case too.
            let sent = head
                .split("\r\n")
                .find_map(|line| line.strip_prefix("authorization: "))
                .unwrap_or_default();
            let credential = sent.split_once(' ').map_or(sent, |(_, credential)| credential);
            let (first, rest) = credential.split_at(credential.len() / 2);
            let (name, version) = match behaviour {
                Behaviour::BadName => ("peer\u{202e}evil".to_string(), "0.9".to_string()),
                Behaviour::EchoCredential => (credential.to_string(), "0.9".to_string()),
                Behaviour::EchoUpperCase => ("paged-peer".to_string(), sent.to_uppercase()),
                Behaviour::EchoSplit => (first.to_string(), rest.to_string()),
                _ => ("paged-peer".to_string(), "0.9".to_string()),
            };
            let capabilities = match behaviour {
                Behaviour::NoTools => json!({"prompts": {}}),
                _ => json!({"tools": {}}),
            };
            let result = json!({"protocolVersion": "2025-06-18", "capabilities": capabilities,
                                "serverInfo": {"name": name, "version": version}});
            let mut out = respond("200 OK", "application/json", answer(result).as_bytes());
            let at = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(0);
            out.splice(at..at, b"\r\nmcp-session-id: s-1".iter().copied());
            out
        }
        // Every later request must name the session and the version agreed.
        _ if !(session && version) => respond("400 Bad Request", "application/json", b"{}"),
        "notifications/initialized" => b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".to_vec(),
        "tools/list" if behaviour == Behaviour::NoTools => {
            let refusal = json!({"jsonrpc": "2.0", "id": message["id"],
                                 "error": {"code": -32601, "message": "Method not found"}});
            respond("200 OK", "application/json", refusal.to_string().as_bytes())
        }
        "tools/list" => {
            let tool = |n: usize| json!({"name": format!("t{n}"), "inputSchema": {"type": "object"}});
            let result = match message["params"]["cursor"].as_str() {
                None => json!({"tools": [tool(1), tool(2)], "nextCursor": "p2"}),
                Some("p2") => json!({"tools": [tool(3)], "nextCursor": "p3"}),
                _ => json!({"tools": [tool(4), tool(5), tool(6)]}),
            };
            respond("200 OK", "application/json", answer(result).as_bytes())
        }
        _ => respond("404 Not Found", "application/json", b"{}"),
    }
}

/// A peer on loopback that answers every request as its behaviour says.
struct Peer {
    port: u16,
    connections: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
    /// Requests read and left unanswered (`ClosesUnanswered`).
    unanswered: Arc<AtomicUsize>,
    /// Every request's head, lower-cased, as it came.
    heads: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Peer {
    async fn start(behaviour: Behaviour) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(AtomicUsize::new(0));
        let unanswered = Arc::new(AtomicUsize::new(0));
        let heads = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (seen, asked, kept) = (connections.clone(), requests.clone(), heads.clone());
        let left = unanswered.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                seen.fetch_add(1, Ordering::SeqCst);
                let (asked, kept, unanswered) = (asked.clone(), kept.clone(), left.clone());
                tokio::spawn(async move {
                    if behaviour == Behaviour::NotTls {
                        let _ = stream
                            .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
                            .await;
                        return;
                    }
                    let Some((head_text, body)) = integration_tests::read_request(&mut stream).await else {
                        return;
                    };
                    asked.fetch_add(1, Ordering::SeqCst);
                    kept.lock().unwrap().push(head_text.clone());
                    let respond = |status: &str, kind: &str, body: &[u8]| {
                        let mut out = format!(
                            "HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\n\r\n",
                            body.len()
                        )
                        .into_bytes();
                        out.extend_from_slice(body);
                        out
                    };
                    let reply = match behaviour {
                        Behaviour::Html => respond("200 OK", "text/html", b"<html>hello</html>"),
                        Behaviour::NotJsonRpc => respond("200 OK", "application/json", b"{\"status\":\"ok\"}"),
                        Behaviour::Redirect => b"HTTP/1.1 307 Temporary Redirect\r\nlocation: http://169.254.169.254/latest/meta-data/\r\ncontent-length: 0\r\n\r\n".to_vec(),
                        Behaviour::Huge => {
                            let padding = "x".repeat(2 * 1024 * 1024);
                            let body = format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"pad\":\"{padding}\"}}}}");
                            respond("200 OK", "application/json", body.as_bytes())
                        }
                        Behaviour::Endless => {
                            let head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
                            if stream.write_all(head).await.is_err() {
                                return;
                            }
                            let event = b": keep-alive padding that never ends\n\n".repeat(256);
                            let chunk = [format!("{:x}\r\n", event.len()).into_bytes(), event, b"\r\n".to_vec()].concat();
                            while stream.write_all(&chunk).await.is_ok() {}
                            return;
                        }
                        Behaviour::NotTls => return,
                        Behaviour::Paged
                        | Behaviour::ClosesUnanswered
                        | Behaviour::ResetsUnanswered
                        | Behaviour::BadName
                        | Behaviour::EchoCredential
                        | Behaviour::EchoUpperCase
                        | Behaviour::EchoSplit
                        | Behaviour::Resumed
                        | Behaviour::NoTools => {
                            scripted(behaviour, &head_text, &body, respond)
                        }
                        Behaviour::Silent => {
                            tokio::time::sleep(Duration::from_secs(60)).await;
                            return;
                        }
                    };
                    if behaviour == Behaviour::ClosesUnanswered {
                        let _ = stream.write_all(&reply).await;
                        if integration_tests::read_request(&mut stream).await.is_some() {
                            unanswered.fetch_add(1, Ordering::SeqCst);
                        }
                        return;
                    }
                    if behaviour == Behaviour::ResetsUnanswered {
                        // Closed with the next request unread: the kernel answers with a reset.
                        let _ = stream.write_all(&reply).await;
                        let mut first = [0u8; 1];
                        if stream.peek(&mut first).await.is_ok_and(|read| read > 0) {
                            unanswered.fetch_add(1, Ordering::SeqCst);
                        }
                        return;
                    }
                    // One answer per connection, and said so (RFC 9112, 9.6): else the
                    // client may send its next request on a connection being closed.
                    let at = reply.windows(2).position(|w| w == b"\r\n").unwrap_or(0);
                    let mut reply = reply;
                    reply.splice(at..at, b"\r\nconnection: close".iter().copied());
                    let _ = stream.write_all(&reply).await;
                });
            }
        });
        Self {
            port,
            connections,
            requests,
            unanswered,
            heads,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    fn unanswered(&self) -> usize {
        self.unanswered.load(Ordering::SeqCst)
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

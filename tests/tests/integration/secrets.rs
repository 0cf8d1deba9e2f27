//! A sentinel secret is pushed through every success and failure path; no
//! response body or header (other than an MCP server's own record) and no
//! log line, the AWS SDK's included at TRACE level, may contain it.

use agent_server_shared::item::Attr;
use agent_server_shared::rules::Policy;
use agent_server_shared::store::StoreError;
use agent_server_shared::{App, Response, Settings};
use integration_tests::events::Event;
use integration_tests::{Failing, Route, capture_logs, client, dynamo_app, dynamo_local, put_item};
use serde_json::json;

const SENTINEL: &str = "sk-SENTINEL-7f3a9c2e";
const HEADER_SENTINEL: &str = "Bearer HEADER-SENTINEL-51d0";

fn leaks(response: &Response, secret: &str) -> bool {
    let body = String::from_utf8_lossy(response.body().as_ref()).into_owned();
    let headers = format!("{:?}", response.headers());
    body.contains(secret) || headers.contains(secret)
}

// Current-thread runtime: every task, the SDK's connection tasks included,
// logs on this thread, where the capturing subscriber is installed.
#[tokio::test]
async fn secrets_never_reach_a_response_or_a_log_line() {
    let (logs, _guard) = capture_logs();
    let app = dynamo_app(Policy::default()).await;
    let local = dynamo_local().await;
    let id = uuid::Uuid::new_v4().to_string();
    let project = uuid::Uuid::new_v4().to_string();
    let mut key_item = Route::ApiKeys.item(&project, &id);
    key_item.insert("api_key".into(), Attr::S(SENTINEL.into()));
    let mcp_item = Route::McpServers.item(&project, &id);
    let dynamo = client(&local.endpoint);
    put_item(&dynamo, Route::ApiKeys.table(), key_item).await;
    put_item(&dynamo, Route::McpServers.table(), mcp_item).await;

    let key = |body: String| Event::put(Route::ApiKeys, &id, None).body(body);
    let api_key_cases = [
        (200, key(json!({"api_key": SENTINEL}).to_string())),
        (
            200,
            key(json!({"name": "stored secret stays hidden"}).to_string()),
        ),
        (
            200,
            key(json!({"api_key": SENTINEL}).to_string()).header("If-Match", "*"),
        ),
        (
            400,
            key(json!({"api_key": format!("{SENTINEL} with space")}).to_string()),
        ),
        (400, key(json!({"api_key": SENTINEL.repeat(300)}).to_string())),
        (400, key(json!({"api_key": SENTINEL, "color": "red"}).to_string())),
        (
            400,
            key(json!({"api_key": SENTINEL, "provider_type": SENTINEL}).to_string()),
        ),
        (400, key(json!({"api_key": [SENTINEL]}).to_string())),
        (
            400,
            key(format!(r#"{{"api_key": "{SENTINEL}", "api_key": "{SENTINEL}"}}"#)),
        ),
        (400, key(format!(r#"{{"api_key": "{SENTINEL}""#))),
        (400, key(format!(r#"{{"api_key": {SENTINEL}}}"#))),
        (
            412,
            key(json!({"api_key": SENTINEL}).to_string()).header("If-Match", "\"999\""),
        ),
        (
            413,
            key(json!({"api_key": SENTINEL, "name": "x".repeat(70_000)}).to_string()),
        ),
        (
            415,
            key(json!({"api_key": SENTINEL}).to_string()).header("content-type", "text/plain"),
        ),
        (
            404,
            Event::put(Route::ApiKeys, &uuid::Uuid::new_v4().to_string(), None)
                .json(&json!({"api_key": SENTINEL})),
        ),
    ];
    for (status, event) in api_key_cases {
        let response = Route::ApiKeys.call(&app, event.request()).await;
        assert_eq!(response.status().as_u16(), status, "{:?}", response.body());
        assert!(
            !leaks(&response, SENTINEL),
            "api_key leaked into a {status} response"
        );
    }

    let mcp = |body: serde_json::Value| Event::put(Route::McpServers, &id, Some(&project)).json(&body);
    let header_failures = [
        mcp(json!({"headers": {"Authorization": format!("{HEADER_SENTINEL}\r\n")}})),
        mcp(json!({"headers": {"Bad Name": HEADER_SENTINEL}})),
        mcp(json!({"headers": {"A": HEADER_SENTINEL, "a": HEADER_SENTINEL}})),
        mcp(json!({"headers": {"A": HEADER_SENTINEL.repeat(400)}})),
        mcp(json!({"headers": {"A": HEADER_SENTINEL}, "endpoint": "http://127.0.0.1/"})),
        mcp(json!({"headers": {"A": HEADER_SENTINEL}, "name": ""})),
    ];
    for event in header_failures {
        let response = Route::McpServers.call(&app, event.request()).await;
        assert_eq!(response.status().as_u16(), 400);
        assert!(
            !leaks(&response, "HEADER-SENTINEL"),
            "a header value leaked into an error"
        );
    }
    // The success response is the record, and the record has its headers.
    let ok = mcp(json!({"headers": {"Authorization": HEADER_SENTINEL}}));
    let response = Route::McpServers.call(&app, ok.request()).await;
    assert_eq!(response.status().as_u16(), 200);
    assert!(leaks(&response, HEADER_SENTINEL));

    for error in [
        StoreError::Unavailable("throttled".into()),
        StoreError::Internal("boom".into()),
    ] {
        let failing = App {
            store: Failing(error),
            settings: Settings::from_lookup(|_| None).unwrap(),
            sealer: Some(integration_tests::memory_sealer()),
        };
        let response = Route::ApiKeys
            .call(&failing, key(json!({"api_key": SENTINEL}).to_string()).request())
            .await;
        assert!(!leaks(&response, SENTINEL));
    }

    let text = logs.text();
    assert!(
        text.contains("\"status\":200") && text.contains("\"status\":412"),
        "the capture saw no access lines"
    );
    assert!(
        text.contains("\"level\":\"DEBUG\""),
        "TRACE was asked for but no DEBUG line was captured"
    );
    let leaked: Vec<&str> = text.lines().filter(|line| line.contains("SENTINEL")).collect();
    assert!(
        leaked.is_empty(),
        "a secret reached a log line:\n{}",
        leaked.join("\n")
    );
}

/// Every structure a request's secrets pass through before they are sealed
/// formats (`{:?}`, and `Display` where it has one) without them: the body
/// as read, the attributes a PUT writes, a merge patch and what it merges
/// into, the update the store gets, the errors on the way, the sealing
/// outcome and its data key.
#[tokio::test]
async fn no_structure_that_holds_a_secret_shows_it() {
    use agent_server_shared::merge;
    use agent_server_shared::patch;
    use agent_server_shared::records::{ApiKey, McpServer, Resource};
    use agent_server_shared::request::{self, BodyKind};
    use agent_server_shared::seal::{self, SealError};
    use agent_server_shared::store::{Key, Update};

    let mut shown = Vec::new();
    let body = json!({"api_key": SENTINEL, "name": "n"});
    let api_key = request::json_body(
        &Event::put(Route::ApiKeys, "k", None).json(&body).request(),
        BodyKind::Update,
    )
    .unwrap();
    shown.push(format!("{api_key:?}"));
    let headers = json!({"headers": {"Authorization": HEADER_SENTINEL}, "name": "n"});
    let mcp_put = request::json_body(
        &Event::put(Route::McpServers, "m", Some("p"))
            .json(&headers)
            .request(),
        BodyKind::Update,
    )
    .unwrap();
    shown.push(format!("{mcp_put:?}"));
    let mcp_patch = request::json_body(
        &Event::patch(Route::McpServers, "m", Some("p"))
            .json(&headers)
            .request(),
        BodyKind::MergePatch,
    )
    .unwrap();
    shown.push(format!("{mcp_patch:?}"));

    let set = patch::parse::<ApiKey>(&api_key, Policy::default()).unwrap();
    shown.push(format!("{set:?}"));
    let mcp_set = patch::parse::<McpServer>(&mcp_put, Policy::default()).unwrap();
    shown.push(format!("{mcp_set:?}"));
    let merge_patch = merge::parse::<McpServer>(&mcp_patch, Policy::default()).unwrap();
    shown.push(format!("{merge_patch:?}"));
    if let Some((set, remove)) = merge_patch.as_update() {
        shown.push(format!("{set:?} {remove:?}"));
    }
    let merged = merge::apply::<McpServer>(&merge_patch, &Default::default(), Policy::default()).unwrap();
    shown.push(format!("{:?}", merged.set));

    let key = Key {
        project_id: Some("p".into()),
        id: "m".into(),
    };
    // Secrets reach the store's attributes only sealed.
    let unsealed = patch::into_attributes(mcp_set.clone());
    assert!(unsealed.is_err());
    shown.push(format!("{unsealed:?}"));
    let update = Update {
        table: McpServer::TABLE,
        key: key.clone(),
        // A value as read, in the clear: shown by no Debug all the same.
        set: vec![(
            "headers",
            Attr::M([("Authorization".to_string(), Attr::S(format!("Bearer {SENTINEL}")))].into()),
        )]
        .into(),
        remove: Vec::new(),
        expected_versions: None,
        none_match: None,
        unmodified_before: None,
        now: "2026-11-26T00:00:00.000Z".into(),
        write_id: Update::new_write_id(),
        fields: McpServer::FIELDS,
        updated_by: None,
        budget: agent_server_shared::budget::TIME_BUDGET,
        // Headers stored before sealing, expected as read: text values.
        unchanged: vec![(
            "headers",
            agent_server_shared::store::Expected::Is(Attr::M(
                [("Authorization".to_string(), Attr::S(format!("Bearer {SENTINEL}")))].into(),
            )),
        )],
    };
    shown.push(format!("{update:?} {:?}", update.clauses()));

    // Errors: a secret that breaks its rule, a header value that does.
    let bad_key = json!({"api_key": format!("{SENTINEL} with space")});
    let bad_key = request::json_body(
        &Event::put(Route::ApiKeys, "k", None).json(&bad_key).request(),
        BodyKind::Update,
    )
    .unwrap();
    let error = patch::parse::<ApiKey>(&bad_key, Policy::default()).err();
    shown.push(format!(
        "{error:?} {}",
        error.as_ref().map(ToString::to_string).unwrap_or_default()
    ));
    let bad_header = json!({"headers": {"A": format!("{HEADER_SENTINEL}\n")}});
    let bad_header = request::json_body(
        &Event::put(Route::McpServers, "m", Some("p"))
            .json(&bad_header)
            .request(),
        BodyKind::Update,
    )
    .unwrap();
    let error = patch::parse::<McpServer>(&bad_header, Policy::default()).err();
    shown.push(format!("{error:?}"));
    let error = merge::parse::<McpServer>(&bad_header, Policy::default()).err();
    shown.push(format!("{error:?}"));

    // Sealing: the outcome, its data key, and the errors.
    let sealer = integration_tests::memory_sealer();
    let mut to_seal = mcp_set.clone();
    let mut session = seal::Session::new(
        Some(&sealer),
        McpServer::FIELDS,
        key.clone(),
        agent_server_shared::budget::Budget::start(None),
    );
    session.seal(&mut to_seal, &mut Vec::new()).await.unwrap();
    shown.push(format!("{to_seal:?}"));
    shown.push(format!("{:?}", SealError::NotConfigured));

    for text in &shown {
        assert!(!text.contains("SENTINEL"), "a structure shows a secret: {text}");
    }
    // The names are still there to debug by.
    assert!(
        shown[0].contains("api_key") && shown[3].contains("api_key"),
        "{shown:?}"
    );
    assert!(
        shown.iter().filter(|text| text.contains("headers")).count() >= 5,
        "{shown:?}"
    );
}

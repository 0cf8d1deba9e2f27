//! DynamoDB failing under a serving local-api: stopped (connection refused)
//! and silent (accepts, never answers). Requests must get a 503 envelope with
//! Retry-After within the store's time budget, never hang or panic, and
//! succeed again once the database is back. And late: a write applied but
//! answered after the attempt's budget is retried by the SDK, and must
//! still be one write with a truthful answer.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use agent_server_shared::Table;
use agent_server_shared::item;
use agent_server_shared::store::Key;
use agent_server_shared::store::TableNames;
use agent_server_shared::store::{DynamoStore, TIME_BUDGET};
use agent_server_shared::{App, Settings};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use integration_tests::{
    DynamoLocal, Reply, Route, client, free_port, get_item, http, put_item, serve_local_api,
};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const PROJECT: &str = "8a4b2c1d-3e5f-4a6b-8c7d-9e0f1a2b3c4d";
const ID: &str = "7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f";
/// Slack on top of the budget for scheduling on a loaded 2-core machine.
const SLACK: Duration = Duration::from_millis(1500);

/// A store with the production retry and time budget, on `endpoint`.
fn budgeted_app(endpoint: &str) -> Arc<App<DynamoStore>> {
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("local", "local", None, None, "tests"));
    let client = Client::from_conf(DynamoStore::budgeted(config));
    Arc::new(App {
        store: DynamoStore::new(client, TableNames::default()),
        settings: Settings::default(),
        sealer: Some(integration_tests::memory_sealer()),
    })
}

async fn serve(app: Arc<App<DynamoStore>>) -> String {
    serve_local_api(app, std::future::pending::<()>()).await.0
}

/// DynamoDB Local on `port`, with the tables and the model this file
/// updates; and its endpoint.
async fn seeded(port: u16) -> (DynamoLocal, String) {
    let endpoint = format!("http://127.0.0.1:{port}");
    let dynamodb = DynamoLocal::start(port);
    let dynamo = client(&endpoint);
    let prepared =
        local_api::setup::prepare(&dynamo, &TableNames::default(), None, Duration::from_secs(30)).await;
    assert!(prepared.is_ok(), "{prepared:?}");
    put_item(&dynamo, Table::Models, Route::Models.item(PROJECT, ID)).await;
    (dynamodb, endpoint)
}

/// A reply's header as text.
fn header(reply: &Reply, name: &str) -> Option<String> {
    reply
        .headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(String::from)
}

/// PUTs a rename; returns status, Retry-After, errorDetails.code and the time taken.
async fn rename(base: &str) -> (u16, Option<String>, Value, Duration) {
    let url = format!("{base}/api/agent-server/models/{ID}?project_id={PROJECT}");
    let started = Instant::now();
    let reply = http(
        "PUT",
        &url,
        &[("content-type", "application/json")],
        r#"{"name": "renamed"}"#,
    )
    .await;
    (
        reply.status,
        header(&reply, "retry-after"),
        reply.body["errorDetails"]["code"].clone(),
        started.elapsed(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_database_is_503_within_budget_and_recovery_is_automatic() {
    let port = free_port();
    let (dynamodb, endpoint) = seeded(port).await;
    let base = serve(budgeted_app(&endpoint)).await;
    assert_eq!(rename(&base).await.0, 200);

    dynamodb.stop();
    for _ in 0..3 {
        let (status, retry_after, code, elapsed) = rename(&base).await;
        assert_eq!(
            (status, retry_after.as_deref(), code.as_str()),
            (503, Some("1"), Some("unavailable"))
        );
        assert!(
            elapsed < TIME_BUDGET + SLACK,
            "took {elapsed:?}, budget {TIME_BUDGET:?}"
        );
    }

    let (dynamodb, _) = seeded(port).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut status = rename(&base).await.0;
    while status != 200 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        status = rename(&base).await.0;
    }
    assert_eq!(
        status, 200,
        "requests did not succeed again after DynamoDB came back"
    );
    for _ in 0..3 {
        assert_eq!(rename(&base).await.0, 200);
    }
    dynamodb.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_that_never_answers_is_503_within_budget() {
    // Accepts connections and reads, but never writes a byte back.
    let silent = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", silent.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            held.push(stream);
        }
    });
    let base = serve(budgeted_app(&endpoint)).await;
    let (status, retry_after, code, elapsed) = rename(&base).await;
    assert_eq!(
        (status, retry_after.as_deref(), code.as_str()),
        (503, Some("1"), Some("unavailable"))
    );
    assert!(
        elapsed >= Duration::from_millis(900),
        "gave up before one attempt's budget: {elapsed:?}"
    );
    assert!(
        elapsed < TIME_BUDGET + SLACK,
        "took {elapsed:?}, budget {TIME_BUDGET:?}"
    );
}

/// A TCP proxy to `upstream` that, while `hold` is set, holds back the
/// first answer it relays by `delay` (clearing `hold`): the database has
/// applied the write, the client does not hear of it in time.
async fn late_proxy(upstream: String, hold: Arc<AtomicBool>, delay: Duration) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = TcpStream::connect(&upstream).await else {
                continue;
            };
            let hold = hold.clone();
            let (mut client_read, mut client_write) = client.into_split();
            let (mut server_read, mut server_write) = server.into_split();
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
            });
            tokio::spawn(async move {
                let mut buffer = vec![0; 64 * 1024];
                while let Ok(read) = server_read.read(&mut buffer).await {
                    if read == 0 {
                        break;
                    }
                    if hold.swap(false, Ordering::SeqCst) {
                        tokio::time::sleep(delay).await;
                    }
                    if client_write.write_all(&buffer[..read]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    format!("http://{address}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_answered_late_is_applied_once_and_answered_truthfully() {
    let port = free_port();
    let (dynamodb, endpoint) = seeded(port).await;
    let hold = Arc::new(AtomicBool::new(false));
    // Past one attempt's budget (1 s), well within the whole (3 s).
    let proxy = late_proxy(
        format!("127.0.0.1:{port}"),
        hold.clone(),
        Duration::from_millis(1500),
    )
    .await;
    let base = serve(budgeted_app(&proxy)).await;
    let dynamo = client(&endpoint);
    let key = Key {
        project_id: Some(PROJECT.into()),
        id: ID.into(),
    };
    let stored_version = || async {
        let stored = get_item(&dynamo, Table::Models, &key).await.unwrap_or_default();
        item::version(&stored).unwrap()
    };
    let url = format!("{base}/api/agent-server/models/{ID}?project_id={PROJECT}");
    let put = |if_match: Option<&'static str>, name: &'static str| {
        let url = url.clone();
        async move {
            let mut headers = vec![("content-type", "application/json")];
            headers.extend(if_match.map(|tag| ("if-match", tag)));
            http("PUT", &url, &headers, format!(r#"{{"name": "{name}"}}"#)).await
        }
    };
    assert_eq!(stored_version().await, 0);

    // Without If-Match: the SDK's second attempt must not write again.
    hold.store(true, Ordering::SeqCst);
    let reply = put(None, "late once").await;
    assert!(!hold.load(Ordering::SeqCst), "the proxy held nothing back");
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(reply.body["data"]["name"], "late once");
    assert_eq!(header(&reply, "etag").as_deref(), Some("\"1\""));
    assert_eq!(stored_version().await, 1, "one update, one write");

    // With If-Match: the retry finds the version it wrote itself, which is
    // no precondition failure.
    hold.store(true, Ordering::SeqCst);
    let reply = put(Some("\"1\""), "late twice").await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(reply.body["data"]["name"], "late twice");
    assert_eq!(header(&reply, "etag").as_deref(), Some("\"2\""));
    assert_eq!(stored_version().await, 2);

    // Another request with the now stale tag is still refused.
    let reply = put(Some("\"1\""), "stale").await;
    assert_eq!(reply.status, 412, "{:?}", reply.body);
    assert_eq!(stored_version().await, 2);
    dynamodb.stop();
}

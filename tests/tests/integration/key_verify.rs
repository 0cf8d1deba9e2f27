//! `verify=true` on an API key, through the local API on DynamoDB Local:
//! against llmock (PyPI), a mock of the four providers' HTTP APIs, and
//! against peers written here for what no mock does (a key that must be in
//! its header and nowhere else, silence, a 500, a redirect, a 2xx that is
//! not a model list, plain HTTP under TLS). A key is written only once its
//! provider accepted it; a failure names its stage, writes nothing and
//! shows the key nowhere.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_server_shared::App;
use agent_server_shared::item::Attr;
use agent_server_shared::item::Item;
use agent_server_shared::keycheck::ProviderBases;
use agent_server_shared::rules::Policy;
use agent_server_shared::seal::Sealer;
use agent_server_shared::store::{DynamoStore, Key};
use integration_tests::{
    Reply, Route, capture_logs, client, dynamo_app, dynamo_local, get_item, http, llmock, llmock_bases,
    llmock_refusing, put_item,
};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

const SENTINEL: &str = "sk-KEY-CHECK-SENTINEL-7f3e";
const JSON: [(&str, &str); 1] = [("content-type", "application/json")];
const MERGE: [(&str, &str); 1] = [("content-type", "application/merge-patch+json")];

/// The local API on DynamoDB Local, private endpoints allowed (the peers are
/// on loopback), every provider's base at `bases`; and the app's sealer,
/// to count its calls.
async fn api(bases: ProviderBases) -> (String, Sealer) {
    let mut app: App<DynamoStore> = dynamo_app(Policy {
        allow_private_endpoints: true,
    })
    .await;
    app.settings.providers = bases;
    let sealer = app.sealer.clone().expect("the test app seals");
    let base = integration_tests::serve_local_api(Arc::new(app), std::future::pending::<()>())
        .await
        .0;
    (base, sealer)
}

/// Every provider's base at one peer.
fn all_at(base: &str) -> ProviderBases {
    ProviderBases::from_lookup(|_| Some(base.to_string())).unwrap_or_else(|name| panic!("{name}"))
}

/// A fresh API-key record of `provider` holding a stored key (as text, as
/// one written before sealing).
async fn record(provider: &str) -> Key {
    let dynamo = client(&dynamo_local().await.endpoint);
    let id = uuid::Uuid::new_v4().to_string();
    let mut item = Route::ApiKeys.item("", &id);
    item.insert("provider_type".into(), Attr::S(provider.into()));
    put_item(&dynamo, agent_server_shared::Table::ApiKeys, item).await;
    Key { project_id: None, id }
}

async fn stored(key: &Key) -> Item {
    let dynamo = client(&dynamo_local().await.endpoint);
    get_item(&dynamo, agent_server_shared::Table::ApiKeys, key)
        .await
        .expect("the record")
}

fn url(base: &str, key: &Key, query: &str) -> String {
    format!("{base}/api/agent-server/api-keys/{}{query}", key.id)
}

async fn put(base: &str, key: &Key, query: &str, body: Value) -> Reply {
    http("PUT", &url(base, key, query), &JSON, body.to_string()).await
}

/// Asserts a 422 `key_unverified` at `stage` that left the record as it
/// was and shows no key.
async fn refused(reply: &Reply, key: &Key, before: &Item, stage: &str) {
    assert_eq!(reply.status, 422, "{}", reply.body);
    assert_eq!(
        reply.body["errorDetails"]["code"], "key_unverified",
        "{}",
        reply.body
    );
    assert_eq!(reply.body["errorDetails"]["stage"], stage, "{}", reply.body);
    assert!(!reply.body.to_string().contains("SENTINEL"), "{}", reply.body);
    assert_eq!(&stored(key).await, before, "a refused check wrote");
}

#[tokio::test]
async fn each_provider_s_key_is_verified_against_the_mock_and_sealed() {
    let mock = llmock().await;
    let bases = llmock_bases(&mock.base);
    let (base, _) = api(bases.clone()).await;
    let (logs, _guard) = capture_logs();
    let lists = [
        ("OpenAI", "/v1/models", "data"),
        ("Anthropic", "/anthropic/v1/models", "data"),
        ("Gemini", "/gemini/v1beta/models", "models"),
        ("xAI", "/xai/v1/models", "data"),
    ];
    for (provider, path, member) in lists {
        let listed = http("GET", &format!("{}{path}", mock.base), &[], "").await;
        let models = listed.body[member].as_array().map_or(0, Vec::len);
        assert!(models > 0, "{provider}: {}", listed.body);
        let key = record(provider).await;
        let started = agent_server_shared::writes::timestamp();
        let reply = put(&base, &key, "?verify=true", json!({"api_key": SENTINEL})).await;
        assert_eq!(reply.status, 200, "{provider}: {}", reply.body);
        let verification = &reply.body["data"]["verification"];
        assert_eq!(verification["models"], models, "{provider}");
        let at = verification["verified_at"].as_str().unwrap_or_default();
        assert!(at >= started.as_str(), "{provider}: {at}");
        // In the record's order, between enabled and created_at.
        let text = reply.body.to_string();
        let order: Vec<usize> = ["\"enabled\"", "\"verification\"", "\"created_at\""]
            .iter()
            .filter_map(|name| text.find(name))
            .collect();
        assert!(
            order.len() == 3 && order.windows(2).all(|w| w[0] < w[1]),
            "{text}"
        );
        assert!(!text.contains("SENTINEL"), "{text}");
        // Stored with the record; the key sealed as ever.
        let item = stored(&key).await;
        assert!(matches!(item.get("api_key"), Some(Attr::B(_))), "{provider}");
        assert_eq!(
            integration_tests::stored_json(&item, "verification"),
            *verification
        );
        assert_eq!(integration_tests::stored_json(&item, "api_key"), SENTINEL);
    }
    assert!(!logs.text().contains("SENTINEL"));
}

#[tokio::test]
async fn a_key_the_provider_refuses_writes_nothing() {
    let mock = llmock_refusing().await;
    let (base, _) = api(llmock_bases(&mock.base)).await;
    let (logs, _guard) = capture_logs();
    for provider in ["OpenAI", "Anthropic", "Gemini", "xAI"] {
        let key = record(provider).await;
        let before = stored(&key).await;
        let reply = put(
            &base,
            &key,
            "?verify=true",
            json!({"api_key": SENTINEL, "name": "New"}),
        )
        .await;
        refused(&reply, &key, &before, "refused").await;
    }
    assert!(!logs.text().contains("SENTINEL"));
}

#[tokio::test]
async fn each_failure_names_its_stage_within_the_budget_and_writes_nothing() {
    let (logs, _guard) = capture_logs();
    let cases = [
        (Behaviour::Status(500), "http", "http_status", Some(500_u64)),
        (Behaviour::Status(429), "http", "http_status", Some(429)),
        (Behaviour::Redirect, "http", "http_status", Some(307)),
        (Behaviour::NotAList, "http", "protocol", None),
        (Behaviour::Huge, "http", "protocol", None),
        (Behaviour::Silent, "http", "timeout", None),
        (Behaviour::Plain, "https", "tls", None),
    ];
    for (behaviour, scheme, stage, status) in cases {
        let peer = Peer::start(behaviour).await;
        let (base, _) = api(all_at(&peer.url(scheme))).await;
        let key = record("OpenAI").await;
        let before = stored(&key).await;
        let started = Instant::now();
        let reply = put(&base, &key, "?verify=true", json!({"api_key": SENTINEL})).await;
        assert!(
            started.elapsed() < Duration::from_secs(6),
            "{behaviour:?}: {:?}",
            started.elapsed()
        );
        refused(&reply, &key, &before, stage).await;
        assert_eq!(
            reply.body["errorDetails"]["httpStatus"].as_u64(),
            status,
            "{behaviour:?}"
        );
        if behaviour == Behaviour::Redirect {
            assert_eq!(peer.requests(), 1, "the redirect was followed");
        }
    }
    // A dead port.
    let closed = integration_tests::free_port();
    let (base, _) = api(all_at(&format!("http://127.0.0.1:{closed}"))).await;
    let key = record("OpenAI").await;
    let before = stored(&key).await;
    let reply = put(&base, &key, "?verify=true", json!({"api_key": SENTINEL})).await;
    refused(&reply, &key, &before, "connect").await;
    // A provider with no known check: nothing is dialed.
    let peer = Peer::start(Behaviour::Checks).await;
    let (base, _) = api(all_at(&peer.url("http"))).await;
    let key = record("Mistral").await;
    let before = stored(&key).await;
    let reply = put(&base, &key, "?verify=true", json!({"api_key": SENTINEL})).await;
    refused(&reply, &key, &before, "unsupported_provider").await;
    assert_eq!(peer.connections(), 0);
    assert!(!logs.text().contains("SENTINEL"));
}

#[tokio::test]
async fn the_key_travels_in_its_provider_s_header_and_nowhere_else() {
    let peer = Peer::start(Behaviour::Checks).await;
    let (base, _) = api(all_at(&peer.url("http"))).await;
    let headers = [
        (
            "OpenAI",
            format!("authorization: bearer {}", SENTINEL.to_lowercase()),
        ),
        ("Anthropic", format!("x-api-key: {}", SENTINEL.to_lowercase())),
        ("Gemini", format!("x-goog-api-key: {}", SENTINEL.to_lowercase())),
        (
            "xAI",
            format!("authorization: bearer {}", SENTINEL.to_lowercase()),
        ),
    ];
    for (provider, header) in headers {
        peer.expect(&header);
        let key = record(provider).await;
        let reply = put(&base, &key, "?verify=true", json!({"api_key": SENTINEL})).await;
        assert_eq!(reply.status, 200, "{provider}: {}", reply.body);
        let head = peer.heads().pop().unwrap_or_default();
        let request_line = head.lines().next().unwrap_or_default();
        assert!(request_line.starts_with("get "), "{provider}: {request_line}");
        assert!(
            !request_line.contains("sentinel"),
            "{provider}: the key is in the URL"
        );
        assert_eq!(head.matches("sentinel").count(), 1, "{provider}: {head}");
        assert_eq!(
            head.contains("anthropic-version: 2023-06-01\r\n"),
            provider == "Anthropic",
            "{provider}"
        );
    }
    // The peer answers 401 to a key anywhere else: a wrong header is refused.
    peer.expect("x-nothing: here");
    let key = record("OpenAI").await;
    let before = stored(&key).await;
    let reply = put(&base, &key, "?verify=true", json!({"api_key": SENTINEL})).await;
    refused(&reply, &key, &before, "refused").await;
}

#[tokio::test]
async fn a_saved_key_is_checked_again_and_its_verification_kept_or_dropped() {
    let peer = Peer::start(Behaviour::Checks).await;
    let (base, sealer) = api(all_at(&peer.url("http"))).await;
    let kms_calls = || match &sealer {
        Sealer::Memory(memory) => memory.calls(),
        _ => 0,
    };
    peer.expect(&format!("authorization: bearer {}", SENTINEL.to_lowercase()));
    let key = record("OpenAI").await;
    // Without verify: sealed, no call to the provider, no verification.
    let reply = put(&base, &key, "", json!({"api_key": SENTINEL})).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply.body["data"].get("verification").is_none(), "{}", reply.body);
    assert_eq!(peer.connections(), 0, "a write without verify dialed");
    // PATCH {} with verify: the stored key, opened with one KMS call, checked.
    let calls = kms_calls();
    let reply = http("PATCH", &url(&base, &key, "?verify=true"), &MERGE, "{}").await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["data"]["verification"]["models"], 2, "{}", reply.body);
    assert_eq!(kms_calls() - calls, 1, "one Decrypt, no Encrypt");
    assert_eq!(peer.requests(), 1);
    // A rename keeps it; a new key without verify drops it.
    let reply = put(&base, &key, "", json!({"name": "Renamed", "enabled": false})).await;
    assert_eq!(reply.body["data"]["verification"]["models"], 2, "{}", reply.body);
    let reply = put(&base, &key, "", json!({"api_key": "sk-another-key"})).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply.body["data"].get("verification").is_none(), "{}", reply.body);
    assert!(!stored(&key).await.contains_key("verification"));
    assert_eq!(peer.requests(), 1, "only the verifying write called the provider");
    // A stored key the provider refuses: PATCH {} with verify writes nothing.
    let before = stored(&key).await;
    let reply = http("PATCH", &url(&base, &key, "?verify=true"), &MERGE, "{}").await;
    refused(&reply, &key, &before, "refused").await;
}

#[tokio::test]
async fn a_retried_verified_write_is_replayed_without_a_call() {
    let peer = Peer::start(Behaviour::Checks).await;
    let mut app: App<DynamoStore> = dynamo_app(Policy {
        allow_private_endpoints: true,
    })
    .await;
    app.settings.providers = all_at(&peer.url("http"));
    peer.expect(&format!("x-api-key: {}", SENTINEL.to_lowercase()));
    let key = record("Anthropic").await;
    // The IAM caller events carry: a caller with a name, who may own a key.
    let event = || {
        integration_tests::events::Event::put(Route::ApiKeys, &key.id, None)
            .query("verify=true")
            .header("Idempotency-Key", "verify-key-once")
            .json(&json!({"api_key": SENTINEL}))
    };
    let first = Route::ApiKeys.call(&app, event().request()).await;
    assert_eq!(first.status(), 200, "{:?}", first.body());
    let again = Route::ApiKeys.call(&app, event().request()).await;
    assert_eq!(again.status(), 200);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    let again = integration_tests::body_json(&again);
    assert_eq!(again, integration_tests::body_json(&first));
    assert_eq!(again["data"]["verification"]["models"], 2);
    assert_eq!(peer.requests(), 1, "the replay called the provider");
    assert!(!again.to_string().contains("SENTINEL"));
}

#[tokio::test]
async fn verify_is_refused_where_it_has_nothing_to_check_or_another_value() {
    let (base, _) = api(ProviderBases::default()).await;
    let model = Key {
        project_id: Some(uuid::Uuid::new_v4().to_string()),
        id: uuid::Uuid::new_v4().to_string(),
    };
    let dynamo = client(&dynamo_local().await.endpoint);
    put_item(
        &dynamo,
        agent_server_shared::Table::Models,
        Route::Models.item(model.project_id.as_deref().unwrap_or_default(), &model.id),
    )
    .await;
    let models = format!(
        "{base}/api/agent-server/models/{}?project_id={}&verify=true",
        model.id,
        model.project_id.as_deref().unwrap_or_default()
    );
    let reply = http("PUT", &models, &JSON, json!({"name": "M"}).to_string()).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert_eq!(reply.body["errorDetails"]["code"], "invalid_verify");
    let key = record("OpenAI").await;
    let before = stored(&key).await;
    for query in [
        "?verify=pinned",
        "?verify=false",
        "?verify=true&verify=true",
        "?verify=",
    ] {
        let reply = put(&base, &key, query, json!({"api_key": SENTINEL})).await;
        assert_eq!(reply.status, 400, "{query}: {}", reply.body);
        assert_eq!(reply.body["errorDetails"]["code"], "invalid_verify", "{query}");
    }
    assert_eq!(stored(&key).await, before);
}

/// What a peer does with each request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Behaviour {
    /// 200 with a two-model list if the head holds the expected header
    /// line, and the key nowhere else; 401 otherwise.
    Checks,
    /// This status, with a JSON body.
    Status(u16),
    /// 307 to the cloud metadata address.
    Redirect,
    /// 200 with JSON that is no model list.
    NotAList,
    /// 200 with 2 MiB.
    Huge,
    /// Reads the request and never answers.
    Silent,
    /// Answers plain HTTP at once, whatever it is sent (a TLS hello).
    Plain,
}

/// A provider written here, on loopback.
struct Peer {
    port: u16,
    connections: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
    heads: Arc<Mutex<Vec<String>>>,
    expected: Arc<Mutex<String>>,
}

impl Peer {
    async fn start(behaviour: Behaviour) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let peer = Self {
            port,
            connections: Arc::default(),
            requests: Arc::default(),
            heads: Arc::default(),
            expected: Arc::default(),
        };
        let (connections, requests, heads, expected) = (
            peer.connections.clone(),
            peer.requests.clone(),
            peer.heads.clone(),
            peer.expected.clone(),
        );
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                connections.fetch_add(1, Ordering::SeqCst);
                let (requests, heads, expected) = (requests.clone(), heads.clone(), expected.clone());
                tokio::spawn(async move {
                    if behaviour == Behaviour::Plain {
                        let _ = stream
                            .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
                            .await;
                        return;
                    }
                    let Some((head, _)) = integration_tests::read_request(&mut stream).await else {
                        return;
                    };
                    requests.fetch_add(1, Ordering::SeqCst);
                    heads.lock().unwrap().push(head.clone());
                    let respond = |status: &str, body: &str| {
                        format!(
                            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                            body.len()
                        )
                    };
                    let reply = match behaviour {
                        Behaviour::Checks => {
                            let expected = expected.lock().unwrap().clone();
                            let line = format!("\r\n{expected}\r\n");
                            let elsewhere = head.replacen(&line, "\r\n", 1).contains("sentinel");
                            if head.contains(&line) && !elsewhere {
                                respond("200 OK", r#"{"object":"list","data":[{"id":"a"},{"id":"b"}],"models":[{"name":"models/a"},{"name":"models/b"}]}"#)
                            } else {
                                respond("401 Unauthorized", r#"{"error":{"message":"invalid key"}}"#)
                            }
                        }
                        Behaviour::Status(status) => respond(&format!("{status} Status"), r#"{"error":{}}"#),
                        Behaviour::Redirect => "HTTP/1.1 307 Temporary Redirect\r\nlocation: http://169.254.169.254/latest/meta-data/\r\ncontent-length: 0\r\n\r\n".to_string(),
                        Behaviour::NotAList => respond("200 OK", r#"{"status":"ok"}"#),
                        Behaviour::Huge => respond("200 OK", &format!(r#"{{"data":["{}"]}}"#, "x".repeat(2 * 1024 * 1024))),
                        Behaviour::Silent => {
                            tokio::time::sleep(Duration::from_secs(60)).await;
                            return;
                        }
                        Behaviour::Plain => return,
                    };
                    // One answer per connection, and said so (RFC 9112, 9.6).
                    let reply = reply.replacen("\r\n", "\r\nconnection: close\r\n", 1);
                    let _ = stream.write_all(reply.as_bytes()).await;
                });
            }
        });
        peer
    }

    fn url(&self, scheme: &str) -> String {
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// The header line (lower-cased) a request must carry to be answered 200.
    fn expect(&self, line: &str) {
        *self.expected.lock().unwrap() = line.to_string();
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

/// A store on which another writer renames the record once, just before
/// the first write lands: that write finds another version and the
/// request reads and tries again.
struct RacedOnce {
    inner: agent_server_shared::store::MemoryStore,
    raced: std::sync::atomic::AtomicBool,
}

impl agent_server_shared::Store for RacedOnce {
    async fn read(
        &self,
        table: agent_server_shared::Table,
        key: &Key,
        budget: Duration,
    ) -> Result<Option<Item>, agent_server_shared::store::StoreError> {
        self.inner.read(table, key, budget).await
    }

    async fn update(
        &self,
        update: agent_server_shared::store::Update,
    ) -> Result<Item, agent_server_shared::store::StoreError> {
        if !self.raced.swap(true, Ordering::SeqCst) {
            let racer = agent_server_shared::store::Update {
                set: vec![("name", Attr::S("Racer".into()))].into(),
                remove: Vec::new(),
                unchanged: Vec::new(),
                write_id: agent_server_shared::store::Update::new_write_id(),
                ..update.clone()
            };
            assert!(self.inner.update(racer).await.is_ok());
        }
        self.inner.update(update).await
    }
}

/// A verifying write that loses a race tries again without a second KMS
/// call or a second call to the provider: the key it sealed, or the stored
/// key it opened, and the verification it earned, stand.
#[tokio::test]
async fn a_verifying_write_that_loses_a_race_calls_kms_and_the_provider_once() {
    let peer = Peer::start(Behaviour::Checks).await;
    peer.expect(&format!("authorization: bearer {}", SENTINEL.to_lowercase()));
    for saved in [false, true] {
        let memory = Arc::new(agent_server_shared::seal::MemorySealer::new());
        let app = App {
            store: RacedOnce {
                inner: agent_server_shared::store::MemoryStore::new(),
                raced: std::sync::atomic::AtomicBool::new(saved),
            },
            settings: agent_server_shared::Settings {
                policy: Policy {
                    allow_private_endpoints: true,
                },
                providers: all_at(&peer.url("http")),
                ..agent_server_shared::Settings::default()
            },
            sealer: Some(Sealer::Memory(memory.clone())),
        };
        let id = uuid::Uuid::new_v4().to_string();
        let mut item = Route::ApiKeys.item("", &id);
        item.insert("provider_type".into(), Attr::S("OpenAI".into()));
        app.store.inner.put(agent_server_shared::Table::ApiKeys, item);
        if saved {
            // Sealed by a write without verify; then the race is armed.
            let event = integration_tests::events::Event::put(Route::ApiKeys, &id, None)
                .json(&json!({"api_key": SENTINEL}));
            assert_eq!(Route::ApiKeys.call(&app, event.request()).await.status(), 200);
            app.store.raced.store(false, Ordering::SeqCst);
        }
        let (calls, asked) = (memory.calls(), peer.requests());
        let event = if saved {
            integration_tests::events::Event::patch(Route::ApiKeys, &id, None).body("{}")
        } else {
            integration_tests::events::Event::put(Route::ApiKeys, &id, None)
                .json(&json!({"api_key": SENTINEL}))
        }
        .query("verify=true");
        let response = Route::ApiKeys.call(&app, event.request()).await;
        let body = integration_tests::body_json(&response);
        assert_eq!(response.status(), 200, "saved {saved}: {body}");
        assert_eq!(
            body["data"]["name"], "Racer",
            "the race was lost and the write tried again"
        );
        assert_eq!(body["data"]["verification"]["models"], 2);
        assert_eq!(
            memory.calls() - calls,
            1,
            "saved {saved}: one Encrypt or one Decrypt"
        );
        assert_eq!(
            peer.requests() - asked,
            1,
            "saved {saved}: one call to the provider"
        );
    }
}

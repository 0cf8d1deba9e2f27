//! Test support shared by the integration tests: DynamoDB Local and a local
//! KMS (moto's server) started on free ports (once per test binary), API
//! Gateway events, the three routes behind one enum, and log capture.
//!
//! The emulators are never optional here: if one cannot start, the test
//! that asked for it panics with the reason, so a missing emulator is a
//! failure and never a silent skip.

pub mod events;

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_server_shared::rules::Policy;
use agent_server_shared::seal::{KmsSealer, MemorySealer, Sealer};
use agent_server_shared::store::DynamoStore;
use agent_server_shared::store::TableNames;
use agent_server_shared::{App, Request, Response, Settings, Store};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use local_api::LocalApi;
use local_api::gateway::Authorizer;
use serde_json::Value;
use tokio::sync::OnceCell;

/// The field codes `rule` finds in `value`, with private endpoints allowed
/// (the local run's policy), in the order found.
pub fn rule_codes(rule: agent_server_shared::rules::Rule, value: &str) -> Vec<&'static str> {
    let mut errors = agent_server_shared::error::FieldErrors::new();
    let policy = Policy {
        allow_private_endpoints: true,
    };
    rule.check("field", &Value::from(value), policy, &mut errors);
    errors.into_vec().into_iter().map(|error| error.code).collect()
}

/// The fields of `R` whose rule carries its own length limit, with that
/// limit: what the documents must state per field.
pub fn length_limits<R: agent_server_shared::Resource>() -> Vec<(&'static str, usize)> {
    R::FIELDS
        .iter()
        .filter_map(|field| Some((field.name, field.rule()?.max_chars()?)))
        .collect()
}

/// A workspace binary's debug build, built (or found fresh) by the
/// Makefile's build command (`cargo build --workspace --bins --examples`,
/// so features unify as everywhere else and no other build overwrites it);
/// its path as cargo reports it.
///
/// # Panics
/// If the build fails or makes no binary of that name.
pub fn workspace_binary(name: &str) -> PathBuf {
    let output = Command::new(env!("CARGO"))
        .current_dir(repo_root())
        .args([
            "build",
            "--locked",
            "--workspace",
            "--bins",
            "--examples",
            "--message-format=json",
        ])
        .stderr(Stdio::piped())
        .output()
        .expect("cannot run cargo");
    assert!(
        output.status.success(),
        "cargo build --workspace --bins failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|message| message["reason"] == "compiler-artifact" && message["target"]["name"] == name)
        .find_map(|message| message["executable"].as_str().map(PathBuf::from))
        .unwrap_or_else(|| panic!("cargo built no {name} binary"))
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Where a process a test starts writes its output: `target/test-logs/name`, kept after the run
/// for reading and removed with `target/` (not left in the system's temporary directory).
///
/// # Panics
/// If the directory cannot be created.
pub fn test_log(name: &str) -> PathBuf {
    let dir = repo_root().join("target").join("test-logs");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    dir.join(name)
}

/// A running DynamoDB Local with the three tables created.
pub struct DynamoLocal {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    // Held open for the life of the test binary: when the process exits the
    // pipe closes and the wrapper shell stops the emulator.
    _lifeline: Lifeline,
}

static DYNAMO: OnceCell<DynamoLocal> = OnceCell::const_new();

/// DynamoDB Local for this test binary, started on first use.
///
/// # Panics
/// If DynamoDB Local cannot be installed or started, with its log.
pub async fn dynamo_local() -> &'static DynamoLocal {
    DYNAMO
        .get_or_init(|| async {
            let local = DynamoLocal::start(free_port());
            let client = client(&local.endpoint);
            let deadline = Duration::from_secs(60);
            if let Err(error) =
                local_api::setup::prepare(&client, &TableNames::default(), None, deadline).await
            {
                panic!("DynamoDB Local started but the tables could not be created: {error}");
            }
            local
        })
        .await
}

impl DynamoLocal {
    /// Starts a DynamoDB Local of its own on `port` (no tables), waiting
    /// until it accepts connections.
    ///
    /// # Panics
    /// If it cannot be installed or started, with its output.
    pub fn start(port: u16) -> Self {
        start_dynamo_local(port)
    }

    /// Stops the emulator and waits for it to exit; its data is gone.
    pub fn stop(self) {
        stop_emulator(self._lifeline, &self.endpoint);
    }
}

fn start_dynamo_local(port: u16) -> DynamoLocal {
    let (endpoint, lifeline) = start_emulator("tools/dynamodb-local/run", "DynamoDB Local", port);
    DynamoLocal {
        endpoint,
        _lifeline: lifeline,
    }
}

/// A child process kept alive for as long as its holder: when the pipe to
/// it closes (the holder dropped, or this process exited however it exits),
/// the wrapper shell stops the emulator.
type Lifeline = Mutex<(Child, ChildStdin)>;

/// Starts the emulator `script` (a path from the repository root) on
/// `port` and waits until it accepts connections.
///
/// # Panics
/// If it cannot be started, with its output: never a silent skip.
fn start_emulator(script: &str, name: &str, port: u16) -> (String, Lifeline) {
    let script = repo_root().join(script);
    let log_path = test_log(&format!("{}-{port}.log", name.to_lowercase().replace(' ', "-")));
    let log = std::fs::File::create(&log_path)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", log_path.display()));
    let log_err = log.try_clone().expect("cannot clone log handle");
    // The shell lives as long as the emulator, so a failed start is seen at
    // once; `cat` returns when this process's end of the pipe closes (at
    // exit, however it exits), and then the emulator is stopped.
    let mut child = Command::new("sh")
        .arg("-c")
        // A background job's stdin is /dev/null, so the pipe goes to `cat` on fd 3.
        .arg(r#"exec 3<&0; "$0" "$1" & emulator=$!; (cat <&3 >/dev/null; kill $emulator 2>/dev/null) & wait $emulator"#)
        .arg(&script)
        .arg(port.to_string())
        .stdin(Stdio::piped())
        .stdout(log)
        .stderr(log_err)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    let Some(stdin) = child.stdin.take() else {
        panic!("no stdin pipe to the {name} wrapper");
    };
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        let exited = child.try_wait().ok().flatten();
        if exited.is_some() || started.elapsed() > Duration::from_secs(90) {
            let output = std::fs::read_to_string(&log_path).unwrap_or_default();
            panic!(
                "{name} did not start on port {port} ({}); see {}. Its output:\n{output}",
                exited.map_or("timed out after 90 s".to_string(), |status| format!(
                    "exited: {status}"
                )),
                script.display()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    (format!("http://127.0.0.1:{port}"), Mutex::new((child, stdin)))
}

/// Ends an emulator started by [`start_emulator`] and waits until its port
/// is closed.
fn stop_emulator(lifeline: Lifeline, endpoint: &str) {
    let Ok((mut child, stdin)) = lifeline.into_inner() else {
        return;
    };
    drop(stdin); // the wrapper's `cat` ends and it kills the emulator
    let _ = child.wait();
    let port = endpoint
        .rsplit(':')
        .next()
        .and_then(|p| p.parse::<u16>().ok())
        .unwrap_or(0);
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A real MCP server on loopback for `verify=true`, started once per test
/// binary: its base URL (`http://127.0.0.1:PORT`).
pub struct McpPeer {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    _lifeline: Lifeline,
}

/// The bearer token [`mcp_bearer`] requires (tools/mcp-peers/run-bearer's default).
pub const MCP_BEARER_TOKEN: &str = "peer-bearer-token";

static MCP_EVERYTHING: OnceCell<McpPeer> = OnceCell::const_new();
static MCP_EVERYTHING_SSE: OnceCell<McpPeer> = OnceCell::const_new();
static MCP_BEARER: OnceCell<McpPeer> = OnceCell::const_new();

async fn mcp_peer(cell: &'static OnceCell<McpPeer>, script: &str, name: &str) -> &'static McpPeer {
    cell.get_or_init(|| async {
        let (base, lifeline) = start_emulator(script, name, free_port());
        McpPeer {
            base,
            _lifeline: lifeline,
        }
    })
    .await
}

/// MCP's reference server (npm `@modelcontextprotocol/server-everything`),
/// Streamable HTTP at `/mcp`, answering with event streams.
///
/// # Panics
/// If it cannot be installed or started.
pub async fn mcp_everything() -> &'static McpPeer {
    mcp_peer(
        &MCP_EVERYTHING,
        "tools/mcp-peers/run-everything",
        "MCP reference server",
    )
    .await
}

/// The reference server with only the older HTTP+SSE transport (`/sse`).
///
/// # Panics
/// If it cannot be installed or started.
pub async fn mcp_everything_sse() -> &'static McpPeer {
    mcp_peer(
        &MCP_EVERYTHING_SSE,
        "tools/mcp-peers/run-everything-sse",
        "MCP SSE server",
    )
    .await
}

/// A server written with MCP's Python SDK (PyPI `mcp`), Streamable HTTP at
/// `/mcp`, answering JSON, two tools, 401 without
/// `Authorization: Bearer` [`MCP_BEARER_TOKEN`].
///
/// # Panics
/// If it cannot be started (the tools virtualenv is missing: `make tools`).
pub async fn mcp_bearer() -> &'static McpPeer {
    mcp_peer(&MCP_BEARER, "tools/mcp-peers/run-bearer", "MCP bearer server").await
}

static LLMOCK: OnceCell<McpPeer> = OnceCell::const_new();
static LLMOCK_REFUSING: OnceCell<McpPeer> = OnceCell::const_new();

/// llmock (PyPI), a mock of the model providers' HTTP APIs serving each
/// one's model list, on loopback: the peer `verify=true` on an API key is
/// checked against (its bases: [`llmock_bases`]).
///
/// # Panics
/// If it cannot be started (the tools virtualenv is missing: `make tools`).
pub async fn llmock() -> &'static McpPeer {
    mcp_peer(&LLMOCK, "tools/provider-peers/run-llmock", "llmock").await
}

/// llmock answering every request 401, as a provider refusing the key.
///
/// # Panics
/// If it cannot be started.
pub async fn llmock_refusing() -> &'static McpPeer {
    mcp_peer(
        &LLMOCK_REFUSING,
        "tools/provider-peers/run-llmock-refusing",
        "llmock refusing",
    )
    .await
}

/// Each provider's base URL on an llmock at `base`.
pub fn llmock_bases(base: &str) -> agent_server_shared::keycheck::ProviderBases {
    agent_server_shared::keycheck::ProviderBases::from_lookup(|name| {
        let path = match name {
            "OPENAI_BASE_URL" => "/v1",
            "ANTHROPIC_BASE_URL" => "/anthropic",
            "GEMINI_BASE_URL" => "/gemini",
            "XAI_BASE_URL" => "/xai/v1",
            _ => return None,
        };
        Some(format!("{base}{path}"))
    })
    .unwrap_or_else(|name| panic!("{name}: not a URL"))
}

/// A running local KMS (moto's server) with the secrets key created.
pub struct KmsLocal {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    /// The secrets key's id.
    pub key_id: String,
    _lifeline: Lifeline,
}

static KMS: OnceCell<KmsLocal> = OnceCell::const_new();

/// The local KMS for this test binary, started on first use.
///
/// # Panics
/// If it cannot be started (the tools virtualenv is missing: `make tools`).
pub async fn kms_local() -> &'static KmsLocal {
    KMS.get_or_init(|| KmsLocal::start(free_port())).await
}

impl KmsLocal {
    /// Starts a local KMS of its own on `port` and creates a secrets key.
    ///
    /// # Panics
    /// If it cannot be started or the key cannot be created.
    pub async fn start(port: u16) -> Self {
        let (endpoint, lifeline) = start_emulator("tools/kms-local/run", "local KMS", port);
        let created = kms_client(&endpoint).create_key().send().await;
        let key_id = created
            .ok()
            .and_then(|output| output.key_metadata.map(|key| key.key_id))
            .unwrap_or_else(|| panic!("the local KMS at {endpoint} created no key"));
        Self {
            endpoint,
            key_id,
            _lifeline: lifeline,
        }
    }

    /// A sealer using this KMS and its key, with the service's budget.
    pub fn sealer(&self) -> Sealer {
        Sealer::Kms(KmsSealer::new(
            kms_client_budgeted(&self.endpoint),
            self.key_id.clone(),
        ))
    }

    /// Stops the emulator; its keys are gone.
    pub fn stop(self) {
        stop_emulator(self._lifeline, &self.endpoint);
    }
}

/// A KMS client for `endpoint` with the SDK's defaults.
pub fn kms_client(endpoint: &str) -> aws_sdk_kms::Client {
    aws_sdk_kms::Client::from_conf(kms_config(endpoint).build())
}

/// A KMS client for `endpoint` with the service's retry and time budget.
pub fn kms_client_budgeted(endpoint: &str) -> aws_sdk_kms::Client {
    let config = kms_config(endpoint)
        .retry_config(agent_server_shared::budget::retry_config())
        .timeout_config(agent_server_shared::budget::timeout_config(
            agent_server_shared::budget::TIME_BUDGET,
        ));
    aws_sdk_kms::Client::from_conf(config.build())
}

fn kms_config(endpoint: &str) -> aws_sdk_kms::config::Builder {
    aws_sdk_kms::Config::builder()
        .behavior_version(aws_sdk_kms::config::BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(aws_sdk_kms::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_kms::config::Credentials::new(
            "local", "local", None, None, "tests",
        ))
}

/// Opens `sealed` with KMS `Decrypt` and the context `context` (pairs of
/// key and value): the plaintext, or the KMS error code.
pub async fn kms_decrypt(endpoint: &str, sealed: &[u8], context: &[(&str, &str)]) -> Result<Vec<u8>, String> {
    let mut request = kms_client(endpoint)
        .decrypt()
        .ciphertext_blob(aws_sdk_kms::primitives::Blob::new(sealed));
    for (key, value) in context {
        request = request.encryption_context(*key, *value);
    }
    match request.send().await {
        Ok(output) => Ok(output.plaintext.map(|p| p.into_inner()).unwrap_or_default()),
        Err(error) => Err(aws_sdk_kms::error::ProvideErrorMetadata::code(&error)
            .unwrap_or("unknown")
            .to_string()),
    }
}

/// A port nobody listens on right now, for a server about to bind it. It
/// lies below the kernel's ephemeral range (32768 and up), so no socket the
/// kernel numbers (a test's listener on port 0, an outgoing connection) can
/// take it in the second a peer takes to start, and each is handed out once
/// per process (from an offset of its own, for the processes beside it).
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const FIRST: u32 = 20_000;
    const SPAN: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let offset = std::process::id().wrapping_mul(7919) % SPAN;
    for _ in 0..SPAN {
        let step = NEXT.fetch_add(1, Ordering::Relaxed);
        let Ok(port) = u16::try_from(FIRST + (offset + step) % SPAN) else {
            continue;
        };
        // Every IPv4 address: a peer that binds them all (or IPv6's any,
        // dual-stack) must find none of them taken.
        if TcpListener::bind(("0.0.0.0", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port below the ephemeral range")
}

/// A client for `endpoint`. Each test makes its own: a client's connection
/// pool belongs to the runtime of the test that made it.
pub fn client(endpoint: &str) -> Client {
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("local", "local", None, None, "tests"))
        .build();
    Client::from_conf(config)
}

/// An app on DynamoDB Local with the default table names, sealing with
/// the memory sealer (the KMS sealer's own tests use [`kms_local`]).
pub async fn dynamo_app(policy: Policy) -> App<DynamoStore> {
    let local = dynamo_local().await;
    App {
        store: DynamoStore::new(client(&local.endpoint), TableNames::default()),
        settings: Settings {
            policy,
            ..Settings::default()
        },
        sealer: Some(memory_sealer()),
    }
}

/// An app on a fresh in-memory store, sealing with the memory sealer.
pub fn memory_app(policy: Policy) -> App<agent_server_shared::store::MemoryStore> {
    App {
        store: agent_server_shared::store::MemoryStore::new(),
        settings: Settings {
            policy,
            ..Settings::default()
        },
        sealer: Some(memory_sealer()),
    }
}

/// The JSON value of a stored attribute as a request set it: a sealed one
/// opened as the memory sealer seals (a whole secret (B) checked to be
/// bound to this field of this item's key; a map's sealed values opened
/// with the item's data key, bound to the item and each name); `Null` if
/// absent.
pub fn stored_json(item: &agent_server_shared::item::Item, field: &str) -> Value {
    use agent_server_shared::item::Attr;
    use agent_server_shared::records::Sealing;
    use agent_server_shared::seal::{self, DataKey};
    let key = agent_server_shared::store::Key {
        project_id: match item.get("project_id") {
            Some(Attr::S(project)) => Some(project.clone()),
            _ => None,
        },
        id: match item.get("id") {
            Some(Attr::S(id)) => id.clone(),
            _ => String::new(),
        },
    };
    let context = seal::context(field, &key);
    match item.get(field) {
        None => Value::Null,
        Some(Attr::B(sealed)) => {
            let opened = MemorySealer::unseal(&context, sealed.as_slice())
                .unwrap_or_else(|| panic!("{field} of {key:?} is not sealed for it"));
            Value::String(String::from_utf8(opened).unwrap())
        }
        Some(attribute) => {
            let sealed_values = agent_server_shared::Table::ALL
                .iter()
                .flat_map(|table| table.fields())
                .find_map(|declared| match declared.sealing() {
                    Some(Sealing::Values { key }) if declared.name == field => Some(key),
                    _ => None,
                });
            let mut attribute = attribute.clone();
            if let (Some(data_key), Attr::M(members)) = (sealed_values, &mut attribute)
                && let Some(Attr::B(sealed_key)) = item.get(data_key)
            {
                let plain = MemorySealer::unseal(&context, sealed_key.as_slice())
                    .unwrap_or_else(|| panic!("{data_key} of {key:?} is not sealed for it"));
                let data_key =
                    DataKey::new(zeroize::Zeroizing::new(plain), sealed_key.as_slice().to_vec()).unwrap();
                for (name, value) in members.iter_mut() {
                    if let Attr::B(sealed) = &*value {
                        let opened = data_key
                            .open(field, &key, name, sealed.as_slice())
                            .unwrap_or_else(|e| panic!("{field}.{name} of {key:?}: {e}"));
                        *value = Attr::S(opened);
                    }
                }
            }
            agent_server_shared::item::to_json(field, &attribute).unwrap_or_default()
        }
    }
}

/// A fresh memory sealer.
pub fn memory_sealer() -> Sealer {
    Sealer::Memory(Arc::new(MemorySealer::new()))
}

/// The three routes, so one table-driven test covers all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `PUT /api/agent-server/api-keys/{id}`
    ApiKeys,
    /// `PUT /api/agent-server/mcp-servers/{id}?project_id=`
    McpServers,
    /// `PUT /api/agent-server/models/{id}?project_id=`
    Models,
}

impl Route {
    /// Every route.
    pub const ALL: [Route; 3] = [Self::ApiKeys, Self::McpServers, Self::Models];

    /// The functions' own declaration of this route.
    pub fn declared(self) -> local_api::routes::Route {
        local_api::routes::Route(self.table())
    }

    /// The collection segment of the path.
    pub fn collection(self) -> &'static str {
        self.declared().collection()
    }

    /// The table behind the route: the record kind it is named for.
    pub fn table(self) -> agent_server_shared::Table {
        use agent_server_shared::Table;
        match self {
            Self::ApiKeys => Table::ApiKeys,
            Self::McpServers => Table::McpServers,
            Self::Models => Table::Models,
        }
    }

    /// Whether the route needs `project_id`.
    pub fn scoped(self) -> bool {
        self != Self::ApiKeys
    }

    /// The exact success message.
    pub fn success_message(self) -> &'static str {
        match self {
            Self::ApiKeys => "API key updated successfully",
            Self::McpServers => "MCP server updated successfully",
            Self::Models => "Model updated successfully",
        }
    }

    /// A valid body touching every updatable field.
    pub fn full_body(self) -> Value {
        match self {
            Self::ApiKeys => serde_json::json!({"name": "Key", "api_key": "sk-test-1", "enabled": false}),
            Self::McpServers => serde_json::json!({
                "name": "Search", "endpoint": "https://mcp.example.com/v2",
                "headers": {"Authorization": "Bearer t"}}),
            Self::Models => serde_json::json!({
                "name": "M", "model_id": "gpt-5", "provider_type": "OpenAI",
                "parameters": {"temperature": 0.5, "stop": ["a"], "nested": {"x": null}}}),
        }
    }

    /// The fields of the route's record kind.
    pub fn fields(self) -> &'static [agent_server_shared::records::Field] {
        self.declared().fields()
    }

    /// A stored item for `id` (and `project_id` where scoped), as the
    /// documented storage layout has it.
    pub fn item(self, project_id: &str, id: &str) -> agent_server_shared::item::Item {
        use agent_server_shared::item::Attr as A;
        let s = |text: &str| A::S(text.to_string());
        let mut item: agent_server_shared::item::Item = [
            ("id".to_string(), s(id)),
            ("name".to_string(), s("Original")),
            ("created_at".to_string(), s("2026-01-01T00:00:00.000Z")),
            ("updated_at".to_string(), s("2026-01-01T00:00:00.000Z")),
        ]
        .into();
        match self {
            Self::ApiKeys => {
                item.insert("provider_type".into(), s("Anthropic"));
                item.insert("enabled".into(), A::Bool(true));
                item.insert("api_key".into(), s("sk-original-secret"));
            }
            Self::McpServers => {
                item.insert("project_id".into(), s(project_id));
                item.insert("endpoint".into(), s("https://mcp.example.com/v1"));
                item.insert("headers".into(), A::M([("X-Old".to_string(), s("old"))].into()));
            }
            Self::Models => {
                item.insert("project_id".into(), s(project_id));
                item.insert("model_id".into(), s("claude-opus-4"));
                item.insert("provider_type".into(), s("Anthropic"));
                item.insert(
                    "parameters".into(),
                    A::M([("old".to_string(), A::N("1".into()))].into()),
                );
            }
        }
        item
    }

    /// Answers a payload 2.0 `event` exactly as the route's Lambda binary
    /// does: the entry's event reading, the guarded handler, API Gateway's
    /// response shape.
    pub async fn respond<S: Store>(
        self,
        app: &App<S>,
        event: Value,
    ) -> aws_lambda_events::apigw::ApiGatewayV2httpResponse {
        self.declared()
            .respond(app, event, lambda_runtime::Context::default())
            .await
    }

    /// Calls the route's function handler on a request already read.
    pub async fn call<S: Store>(self, app: &App<S>, request: Request) -> Response {
        self.declared().update(app, request).await
    }
}

/// A response body as JSON.
pub fn body_json(response: &Response) -> Value {
    serde_json::from_slice(response.body().as_ref())
        .unwrap_or_else(|e| panic!("response body is not JSON ({e}): {:?}", response.body()))
}

/// Log lines written while the current thread's capture is installed.
#[derive(Clone, Default)]
pub struct CapturedLogs(Arc<Mutex<Vec<u8>>>);

impl CapturedLogs {
    /// Everything captured so far.
    pub fn text(&self) -> String {
        let bytes = self.0.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

impl Write for CapturedLogs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut bytes) = self.0.lock() {
            bytes.extend_from_slice(buf);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for CapturedLogs {
    type Writer = CapturedLogs;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// Installs the services' own subscriber with TRACE asked for everywhere,
/// capturing every line it lets through on this thread until the guard is
/// dropped.
pub fn capture_logs() -> (CapturedLogs, tracing::subscriber::DefaultGuard) {
    let logs = CapturedLogs::default();
    let subscriber = agent_server_shared::logging::subscriber(logs.clone(), "trace");
    let guard = tracing::subscriber::set_default(subscriber);
    (logs, guard)
}

/// JSON equality with numbers compared by value (`1.5e3` equals `1500`),
/// as DynamoDB may respell a number it stores.
pub fn same_json(a: &Value, b: &Value) -> bool {
    use agent_server_shared::rules::Decimal;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (Decimal::parse(x.as_str()), Decimal::parse(y.as_str()));
            x.is_some() && x == y
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

/// Serves `app` with `local_api::serve` on a free loopback port until
/// `shutdown` resolves, as `local-api --no-auth` does (every request may
/// change every project); returns the base URL and the server task.
pub async fn serve_local_api<S: Store + Clone + 'static>(
    app: Arc<App<S>>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> (String, tokio::task::JoinHandle<std::io::Result<()>>) {
    let local = LocalApi {
        app: Arc::unwrap_or_clone(app),
        authorizer: Authorizer::Open,
        functions: local_api::functions::Functions::InProcess,
        docs: local_api::docs::Docs::default(),
    };
    serve_local_api_with(local, shutdown).await
}

/// The local API, open to every request, on DynamoDB Local with the
/// default policy, sealing with `sealer`: its base URL. It serves until the
/// test ends.
pub async fn serve_sealing(sealer: Sealer) -> String {
    let local = dynamo_local().await;
    let app = App {
        store: DynamoStore::new(client(&local.endpoint), TableNames::default()),
        settings: Settings::default(),
        sealer: Some(sealer),
    };
    serve_local_api(Arc::new(app), std::future::pending::<()>())
        .await
        .0
}

/// As [`serve_local_api`], with any authorizer.
pub async fn serve_local_api_with<S: Store + 'static>(
    local: LocalApi<S>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> (String, tokio::task::JoinHandle<std::io::Result<()>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("cannot listen");
    let address = listener.local_addr().unwrap();
    let task = tokio::spawn(local_api::serve(listener, Arc::new(local), shutdown));
    (format!("http://{address}"), task)
}

/// One HTTP response from the local API.
pub struct Reply {
    /// Status code.
    pub status: u16,
    /// Response headers.
    pub headers: hyper::HeaderMap,
    /// The body, which must be JSON.
    pub body: Value,
}

/// Sends one request over HTTP/1.1 and reads the JSON reply.
///
/// # Panics
/// If the exchange fails, takes more than 30 s, or the body is not JSON.
pub async fn http(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: impl Into<hyper::body::Bytes>,
) -> Reply {
    use http_body_util::{BodyExt, Full};
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Full<hyper::body::Bytes>>();
    let mut request = hyper::Request::builder().method(method).uri(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request.body(Full::new(body.into())).unwrap();
    let response = tokio::time::timeout(Duration::from_secs(30), client.request(request))
        .await
        .unwrap_or_else(|_| panic!("{method} {url} hung for 30 s"))
        .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = response
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let body = serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("not JSON ({e}): {bytes:?}"));
    Reply {
        status,
        headers,
        body,
    }
}

/// Stores `item` in `table` with PutItem, as another writer of the
/// documented layout would.
///
/// # Panics
/// If PutItem fails.
pub async fn put_item(
    dynamo: &Client,
    table: agent_server_shared::Table,
    item: agent_server_shared::item::Item,
) {
    let name = TableNames::default().name(table).to_string();
    let result = dynamo
        .put_item()
        .table_name(name)
        .set_item(Some(agent_server_shared::item::to_sdk(item)))
        .send()
        .await;
    assert!(result.is_ok(), "PutItem failed: {result:?}");
}

/// An item as the SDK read it, in the project's terms.
///
/// # Panics
/// If it holds a type DynamoDB does not have.
pub fn own(
    item: std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>,
) -> agent_server_shared::item::Item {
    agent_server_shared::item::from_sdk(item).expect("an item of DynamoDB's types")
}

/// Reads an item back with a consistent read.
///
/// # Panics
/// If GetItem fails.
pub async fn get_item(
    dynamo: &Client,
    table: agent_server_shared::Table,
    key: &agent_server_shared::store::Key,
) -> Option<agent_server_shared::item::Item> {
    let name = TableNames::default().name(table).to_string();
    let output = dynamo
        .get_item()
        .table_name(name)
        .set_key(Some(agent_server_shared::item::to_sdk(key.attributes())))
        .consistent_read(true)
        .send()
        .await;
    output.expect("GetItem failed").item.map(own)
}

/// A fresh MCP server record on DynamoDB Local, as the documented layout
/// stores it ([`Route::item`]: plain headers, as written before sealing),
/// with `endpoint` in place of the sample's where given.
pub async fn mcp_record(endpoint: Option<&str>) -> agent_server_shared::store::Key {
    let dynamo = client(&dynamo_local().await.endpoint);
    let (project, id) = (uuid::Uuid::new_v4().to_string(), uuid::Uuid::new_v4().to_string());
    let mut item = Route::McpServers.item(&project, &id);
    if let Some(endpoint) = endpoint {
        item.insert(
            "endpoint".into(),
            agent_server_shared::item::Attr::S(endpoint.into()),
        );
    }
    put_item(&dynamo, agent_server_shared::Table::McpServers, item).await;
    agent_server_shared::store::Key {
        project_id: Some(project),
        id,
    }
}

/// The MCP server record `key` as DynamoDB Local holds it.
///
/// # Panics
/// If it is gone.
pub async fn stored_mcp(key: &agent_server_shared::store::Key) -> agent_server_shared::item::Item {
    let dynamo = client(&dynamo_local().await.endpoint);
    get_item(&dynamo, agent_server_shared::Table::McpServers, key)
        .await
        .unwrap_or_else(|| panic!("{key:?} is gone"))
}

/// Reads one HTTP/1.1 request from `stream`, as a peer written in a test
/// takes it: its head (lower-cased, for matching header lines) and its
/// `Content-Length` body; `None` if the connection ends first.
pub async fn read_request(stream: &mut tokio::net::TcpStream) -> Option<(String, Vec<u8>)> {
    use tokio::io::AsyncReadExt;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte).await {
            Ok(1) => head.push(byte[0]),
            _ => return None,
        }
    }
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|n| n.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await.ok()?;
    Some((head, body))
}

/// A store that always fails the same way.
pub struct Failing(pub agent_server_shared::store::StoreError);

impl Store for Failing {
    async fn update(
        &self,
        _: agent_server_shared::store::Update,
    ) -> Result<agent_server_shared::item::Item, agent_server_shared::store::StoreError> {
        Err(self.0.clone())
    }

    async fn read(
        &self,
        _: agent_server_shared::Table,
        _: &agent_server_shared::store::Key,
        _: Duration,
    ) -> Result<Option<agent_server_shared::item::Item>, agent_server_shared::store::StoreError> {
        Err(self.0.clone())
    }
}

/// What a consumer example (docs/examples/*.py with the tools virtualenv's
/// Python, or ops/examples/*.rs built) prints for `args`, reading DynamoDB
/// Local and the local KMS at `kms` as a reader of a deployed stack would.
///
/// # Panics
/// If the example cannot run or fails: an example that does not run is a
/// failure, never a skip.
pub async fn consumer_example(example: &str, args: &[&str], kms: &str) -> String {
    let dynamo = &dynamo_local().await.endpoint;
    let (program, mut command_args) = if let Some(script) = example.strip_suffix(".py") {
        let python = repo_root().join(".venv/bin/python");
        let script = repo_root().join(format!("docs/examples/{script}.py"));
        (python, vec![script.display().to_string()])
    } else {
        (workspace_binary(example), vec![])
    };
    command_args.extend(args.iter().map(|arg| (*arg).to_string()));
    let output = Command::new(&program)
        .args(&command_args)
        .env("AWS_ENDPOINT_URL_DYNAMODB", dynamo)
        .env("AWS_ENDPOINT_URL_KMS", kms)
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "local")
        .env("AWS_SECRET_ACCESS_KEY", "local")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", program.display()));
    assert!(
        output.status.success(),
        "{example} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

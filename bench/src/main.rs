//! `make bench`: what a user of `update-model` waits for on AWS, against the
//! Rust floor (a do-nothing `lambda_runtime` function), an equivalent
//! Python 3.11 handler on `awslambdaric` with boto3, and a function that
//! only makes the raw conditional `UpdateItem`, all against one DynamoDB
//! Local.
//!
//! The harness is the Lambda service as far as a function can tell: it
//! serves the Runtime API (`/2018-06-01/runtime/...`) on loopback, starts
//! each function as a fresh process with the environment Lambda sets, hands
//! it real API Gateway HTTP API events, and times:
//! - init: process start until its first `GET .../invocation/next`;
//! - first and warm latency: event handed out until its response is posted;
//! - cold request: init + first, what the user of a cold start waits for;
//! - peak RSS: the process's `VmHWM` before it is stopped.
//!
//! As on AWS, DynamoDB is reached over TLS (a terminator in front of
//! DynamoDB Local, with a CA made for the run, see [`tls`]) and the process
//! gets Lambda's CPU share for its memory size (a cgroup CPU quota, see
//! [`cgroup`]), either for its whole life or, as Lambda is widely observed
//! to do, only from its first request on (init unthrottled). The old
//! plain-HTTP, full-CPU measurement is kept as a secondary table.
//!
//! Usage: `bench [--cold N] [--warm M] [--raw K] [--python PYTHON] [--out DIR]
//! [--setup KEY]... [--also NAME=PATH]...`

mod cgroup;
mod runtime_api;
mod stats;
mod tls;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use agent_server_shared::store::TableNames;
use agent_server_shared::store::{DynamoStore, Store};
use cgroup::{Controller, Group};
use integration_tests::{DynamoLocal, KmsLocal, client, free_port, repo_root};
use runtime_api::RuntimeApi;
use stats::Summary;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

/// Lambda arm64 prices, US East (N. Virginia), first pricing tier, as
/// published on aws.amazon.com/lambda/pricing (checked 2025): per GB-second
/// of billed duration, and per request.
const PRICE_GB_SECOND: f64 = 0.000_013_333_4;
const PRICE_REQUEST: f64 = 0.000_000_2;
/// Share of requests that are cold starts, for the cost table (AWS's own
/// analysis of production workloads: cold starts in under 1% of invocations).
const COLD_SHARE: f64 = 0.01;
/// AWS KMS, US East (N. Virginia): per request to a customer managed key
/// (aws.amazon.com/kms/pricing: $0.03 per 10,000 requests).
const PRICE_KMS_REQUEST: f64 = 0.000_003;

/// UpdateItems sent to DynamoDB Local before the first measurement.
const WARM_UP_REQUESTS: usize = 3_000;

/// How the function is reached and how much CPU it gets.
#[derive(Debug, Clone, Copy)]
struct Setup {
    key: &'static str,
    title: &'static str,
    /// DynamoDB over the TLS endpoint (else plain HTTP).
    tls: bool,
    /// Lambda's CPU share for this memory size (else the whole machine).
    memory_mb: Option<u64>,
    /// The share applies from spawn (else from the first `GET /next`).
    throttle_init: bool,
}

const SETUPS: [Setup; 7] = [
    Setup {
        key: "128-init",
        title: "128 MB, TLS, init unthrottled (as Lambda)",
        tls: true,
        memory_mb: Some(128),
        throttle_init: false,
    },
    Setup {
        key: "128-whole",
        title: "128 MB, TLS, whole process throttled",
        tls: true,
        memory_mb: Some(128),
        throttle_init: true,
    },
    Setup {
        key: "256-init",
        title: "256 MB, TLS, init unthrottled",
        tls: true,
        memory_mb: Some(256),
        throttle_init: false,
    },
    Setup {
        key: "512-init",
        title: "512 MB, TLS, init unthrottled",
        tls: true,
        memory_mb: Some(512),
        throttle_init: false,
    },
    Setup {
        key: "1769-init",
        title: "1,769 MB (one vCPU), TLS, init unthrottled",
        tls: true,
        memory_mb: Some(1769),
        throttle_init: false,
    },
    Setup {
        key: "1769-whole",
        title: "1,769 MB (one vCPU), TLS, whole process throttled",
        tls: true,
        memory_mb: Some(1769),
        throttle_init: true,
    },
    Setup {
        key: "plain",
        title: "plain HTTP, full CPU (no quota), the earlier method",
        tls: false,
        memory_mb: None,
        throttle_init: false,
    },
];

/// One implementation under test.
struct Subject {
    name: String,
    program: PathBuf,
    args: Vec<String>,
    /// Working directory (the Python handler's code root).
    dir: Option<PathBuf>,
    /// Whether each response must be an API Gateway response with status 200
    /// (the floor only echoes).
    envelope: bool,
    /// The event it gets, if not `update-model`'s.
    event: Option<String>,
    /// Whether it is the API-key function or the KMS floor: it gets the API
    /// keys' table, the secrets key and the KMS endpoint.
    kms: bool,
    /// Whether it is the MCP-server function: it gets the MCP servers'
    /// table, the secrets key and the KMS endpoint.
    mcp: bool,
    /// Whether it checks keys with a provider: the providers' bases point at
    /// the run's mock, over TLS.
    provider: bool,
    /// Whether its event carries an `Idempotency-Key`, and which.
    keyed: Keying,
}

/// The `Idempotency-Key` a subject's events carry.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Keying {
    /// None: the plain update.
    None,
    /// A new key each invocation: every one a keyed update.
    Fresh,
    /// One key per cold start: its first invocation writes, every warm one
    /// replays that outcome.
    Replayed,
}

/// `event` with the header `Idempotency-Key: key`.
fn with_key(event: &str, key: &str) -> Result<String, String> {
    let mut event: serde_json::Value = serde_json::from_str(event).map_err(|e| e.to_string())?;
    event["headers"]["idempotency-key"] = serde_json::Value::String(key.to_string());
    serde_json::to_string(&event).map_err(|e| e.to_string())
}

/// What one subject measured in one setup.
struct Measured {
    name: String,
    init_ms: Vec<f64>,
    first_ms: Vec<f64>,
    warm_ms: Vec<f64>,
    rss_mib: Vec<f64>,
    /// CPU time the process used (all its threads): during init, during the
    /// first invocation, during each warm one.
    cpu_init_ms: Vec<f64>,
    cpu_first_ms: Vec<f64>,
    cpu_warm_ms: Vec<f64>,
    /// TLS connections opened during init, and during the first invocation.
    connections: Option<(Vec<f64>, Vec<f64>)>,
}

impl Measured {
    fn new(name: &str, tls: bool) -> Self {
        Self {
            name: name.to_string(),
            init_ms: Vec::new(),
            first_ms: Vec::new(),
            warm_ms: Vec::new(),
            rss_mib: Vec::new(),
            cpu_init_ms: Vec::new(),
            cpu_first_ms: Vec::new(),
            cpu_warm_ms: Vec::new(),
            connections: tls.then(|| (Vec::new(), Vec::new())),
        }
    }

    fn cold_ms(&self) -> Vec<f64> {
        self.init_ms
            .iter()
            .zip(&self.first_ms)
            .map(|(i, f)| i + f)
            .collect()
    }
}

/// One setup's results, or why it was not measured.
struct SetupResult {
    setup: Setup,
    outcome: Result<Vec<Measured>, String>,
}

/// Cold starts, latency, memory and cost of the functions against their
/// floors and a Python peer, under Lambda's conditions (a Runtime API on
/// loopback, TLS, the CPU share of the memory size).
#[derive(Debug, clap::Parser)]
#[command(name = "bench")]
struct Options {
    /// Cold starts of each implementation, per setup
    #[arg(long, default_value_t = 20)]
    cold: usize,
    /// Warm invocations after each cold start
    #[arg(long, default_value_t = 100)]
    warm: usize,
    /// Bare UpdateItems for the raw reference
    #[arg(long, default_value_t = 500)]
    raw: usize,
    /// The Python that runs the peer (awslambdaric and boto3 installed)
    #[arg(long, default_value_os_t = repo_root().join(".venv-bench/bin/python"))]
    python: PathBuf,
    /// Where latest.md and chart.svg are written
    #[arg(long, default_value_os_t = repo_root().join("bench/results"))]
    out: PathBuf,
    /// Measure only these setups (repeat; default: all)
    #[arg(long = "setup", value_name = "KEY", value_parser = setup_key)]
    setups: Vec<String>,
    /// Also measure the Lambda binary at PATH, as NAME (repeat)
    #[arg(long, value_name = "NAME=PATH", value_parser = also)]
    also: Vec<(String, PathBuf)>,
    /// Also measure the MCP-server binary at PATH, as NAME, with the
    /// unverified rename the MCP subjects start with (repeat)
    #[arg(long = "also-mcp", value_name = "NAME=PATH", value_parser = also)]
    also_mcp: Vec<(String, PathBuf)>,
    /// Internal: time --raw bare MCP handshakes with URL, print them as JSON
    /// and exit (run as a child, to trust the run's CA from the start)
    #[arg(long, value_name = "URL", hide = true)]
    bare_handshake: Option<String>,
}

/// A setup's key, one of [`SETUPS`].
fn setup_key(key: &str) -> Result<String, String> {
    if SETUPS.iter().any(|s| s.key == key) {
        Ok(key.to_string())
    } else {
        let keys: Vec<_> = SETUPS.iter().map(|s| s.key).collect();
        Err(format!("one of {}", keys.join(", ")))
    }
}

/// `NAME=PATH`.
fn also(spec: &str) -> Result<(String, PathBuf), String> {
    let (name, path) = spec.split_once('=').ok_or("NAME=PATH")?;
    Ok((name.to_string(), PathBuf::from(path)))
}

#[tokio::main]
async fn main() {
    let options = <Options as clap::Parser>::parse();
    if options.cold == 0 || options.warm == 0 || options.raw == 0 {
        <Options as clap::CommandFactory>::command()
            .error(clap::error::ErrorKind::ValueValidation, "--cold, --warm and --raw must be at least 1")
            .exit();
    }
    if let Some(url) = &options.bare_handshake {
        match bare_handshakes(url, options.raw).await {
            Ok(times) => println!("{}", serde_json::Value::from(times)),
            Err(message) => {
                eprintln!("bench: {message}");
                std::process::exit(1);
            }
        }
        return;
    }
    if let Err(message) = run(options).await {
        eprintln!("bench: {message}");
        std::process::exit(1);
    }
}

async fn run(options: Options) -> Result<(), String> {
    let root = repo_root();
    // The functions build in the main workspace, the harness's own
    // subjects (floors) in bench/'s.
    let release = root.join("target/release");
    let floors = root.join("bench/target/release");
    let dynamodb_port = free_port();
    let plain = format!("http://127.0.0.1:{dynamodb_port}");
    eprintln!("bench: DynamoDB Local on {plain}");
    let dynamodb = DynamoLocal::start(dynamodb_port);
    let dynamo = client(&plain);
    local_api::setup::prepare(&dynamo, &TableNames::default(), None, Duration::from_secs(60))
        .await
        .map_err(|e| e.to_string())?;
    let scratch = std::env::temp_dir().join(format!("agent-server-bench-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
    let credentials = tls::Credentials::make(&scratch)?;
    let tls = tls::Endpoint::start(&credentials, dynamodb_port).await?;
    // KMS, as DynamoDB: moto's server behind a TLS endpoint of the same CA.
    let kms = KmsLocal::start(free_port()).await;
    let kms_port = kms.endpoint.rsplit(':').next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let kms_tls = tls::Endpoint::start(&credentials, kms_port).await?;
    eprintln!("bench: local KMS on {} (TLS {})", kms.endpoint, kms_tls.url);
    // MCP's reference server, the peer of verify=true, behind a TLS
    // endpoint of the same CA: MCP servers are reached over https.
    let everything = integration_tests::mcp_everything().await;
    let mcp_port = everything.base.rsplit(':').next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let mcp_tls = tls::Endpoint::start(&credentials, mcp_port).await?;
    let mcp_url = format!("{}/mcp", mcp_tls.url);
    eprintln!("bench: MCP reference server on {} (TLS {mcp_url})", everything.base);
    // llmock, the providers' mock, the peer of verify=true on an API key,
    // behind a TLS endpoint of the same CA: providers are reached over https.
    let providers = integration_tests::llmock().await;
    let providers_port = providers.base.rsplit(':').next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let providers_tls = tls::Endpoint::start(&credentials, providers_port).await?;
    let openai_base = format!("{}/v1", providers_tls.url);
    eprintln!("bench: provider mock on {} (TLS {openai_base})", providers.base);
    // DynamoDB Local is a JVM: its first thousands of requests run
    // interpreted and are compiled as they come. Warm it up before anything
    // is timed, so that no implementation pays for the emulator's warm-up.
    eprintln!("bench: warming DynamoDB Local up ({WARM_UP_REQUESTS} UpdateItems)");
    raw_update_item(&plain, WARM_UP_REQUESTS).await?;
    eprintln!("bench: TLS endpoint {} (CA in {})", tls.url, scratch.display());

    let controller = Controller::detect();
    match &controller {
        Ok(found) => eprintln!("bench: CPU shares through {found:?}"),
        Err(reason) => eprintln!(
            "bench: WARNING: NO CPU QUOTA CAN BE SET ({reason}); the throttled setups are NOT measured \
             and are reported as such. Run as root on a host with a writable cgroup cpu controller."
        ),
    }

    let event_path = root.join("events/update-model/200-switch-provider.json");
    let event = std::fs::read_to_string(&event_path).map_err(|e| format!("{}: {e}", event_path.display()))?;
    let (plain_key, sealing_key) = api_key_events(&root)?;
    let api = RuntimeApi::start().await.map_err(|e| e.to_string())?;

    let mut subjects = vec![
        rust("update-model (Rust)", release.join("update-model"), true),
        rust("hello-world floor (Rust)", floors.join("hello"), false),
        Subject {
            name: "Python 3.11 + boto3".into(),
            program: options.python.clone(),
            args: vec!["-m".into(), "awslambdaric".into(), "handler.handler".into()],
            dir: Some(root.join("bench/python")),
            envelope: true,
            event: None,
            kms: false,
            mcp: false,
            provider: false,
            keyed: Keying::None,
        },
        Subject {
            keyed: Keying::Fresh,
            ..rust("update-model, Idempotency-Key (Rust)", release.join("update-model"), true)
        },
        Subject {
            keyed: Keying::Replayed,
            ..rust("update-model, Idempotency-Key replayed (Rust)", release.join("update-model"), true)
        },
        rust("raw UpdateItem function (Rust)", floors.join("raw-update"), true),
        api_key_subject("update-api-key, no api_key (Rust)", release.join("update-api-key"), plain_key),
        api_key_subject("update-api-key, seals api_key (Rust)", release.join("update-api-key"), sealing_key.clone()),
        Subject {
            provider: true,
            ..api_key_subject(
                "update-api-key, seals api_key, verify=true (Rust)",
                release.join("update-api-key"),
                verified(&sealing_key)?,
            )
        },
        Subject {
            kms: true,
            ..rust("raw Encrypt function (Rust)", floors.join("raw-encrypt"), true)
        },
        mcp_subject(
            "update-mcp-server, rename, headers stored plain (Rust)",
            release.join("update-mcp-server"),
            mcp_event(&root, MCP_PLAIN, &serde_json::json!({"name": "Renamed"}))?,
        ),
        mcp_subject(
            "update-mcp-server, rename, headers sealed (Rust)",
            release.join("update-mcp-server"),
            mcp_event(&root, MCP_SEALED, &serde_json::json!({"name": "Renamed"}))?,
        ),
        mcp_subject(
            "update-mcp-server, rename, verify=true (Rust)",
            release.join("update-mcp-server"),
            verified(&mcp_event(&root, MCP_VERIFY, &serde_json::json!({"name": "Renamed"}))?)?,
        ),
        mcp_subject(
            "update-mcp-server, sets headers (Rust)",
            release.join("update-mcp-server"),
            mcp_event(
                &root,
                MCP_HEADERS,
                &serde_json::json!({"headers": {
                    "Authorization": format!("Bearer {}", agent_server_bench::SEALED_KEY),
                    "X-Api-Key": agent_server_bench::SEALED_KEY,
                }}),
            )?,
        ),
    ];
    mcp_records(&dynamo, &kms, &mcp_url).await?;
    for (name, path) in &options.also {
        subjects.push(rust(name, path.clone(), true));
    }
    for (name, path) in &options.also_mcp {
        let rename = mcp_event(&root, MCP_PLAIN, &serde_json::json!({"name": "Renamed"}))?;
        subjects.push(mcp_subject(name, path.clone(), rename));
    }
    for subject in &subjects {
        if !subject.program.exists() {
            return Err(format!(
                "{} not found (make bench builds it)",
                subject.program.display()
            ));
        }
    }

    let mut results = Vec::new();
    for setup in SETUPS {
        if !options.setups.is_empty() && !options.setups.iter().any(|k| k == setup.key) {
            continue;
        }
        let controller = match (&controller, setup.memory_mb) {
            (Err(reason), Some(_)) => {
                results.push(SetupResult {
                    setup,
                    outcome: Err(format!("NOT MEASURED: no CPU quota could be set: {reason}")),
                });
                continue;
            }
            (Ok(found), Some(_)) => Some(found),
            (_, None) => None,
        };
        let context = Context {
            setup,
            api: &api,
            event: &event,
            endpoint: if setup.tls { &tls.url } else { &plain },
            kms_endpoint: if setup.tls { &kms_tls.url } else { &kms.endpoint },
            key_id: &kms.key_id,
            tls: setup.tls.then_some(&tls),
            mcp_ca: &mcp_tls.bundle,
            openai_base: &openai_base,
            controller,
            options: &options,
        };
        eprintln!(
            "bench: [{}] {} implementations, {} cold starts x {} warm invocations each",
            setup.key,
            subjects.len(),
            options.cold,
            options.warm
        );
        let mut measured: Vec<Measured> = subjects
            .iter()
            .map(|s| Measured::new(&s.name, setup.tls))
            .collect();
        // Round by round, every implementation in turn, each round starting
        // one further along: whatever drifts during a run (the emulator's
        // JIT, the host) falls on all alike, and no implementation always
        // follows the same one (Python's seconds of CPU, say).
        for round in 0..options.cold {
            for turn in 0..subjects.len() {
                let index = (round + turn) % subjects.len();
                measure(&subjects[index], &context, round, index, &mut measured[index]).await?;
            }
        }
        results.push(SetupResult {
            setup,
            outcome: Ok(measured),
        });
    }
    let raw = raw_update_item(&plain, options.raw).await?;
    let bare = bare_handshakes_in_child(&mcp_url, &mcp_tls.bundle, options.raw).await?;
    dynamodb.stop();
    kms.stop();
    let _ = std::fs::remove_dir_all(&scratch);

    let sizes = bootstrap_sizes(&root);
    let mut report = report(&results, &raw, &sizes, &options, controller.as_ref().err());
    report.push_str(&format!(
        "\nA bare MCP handshake with the verify=true subject's server (`initialize`, `notifications/initialized`, \
         `tools/list`, the session's `DELETE`; over TLS, connections as the function opens them; in the harness at \
         full CPU): {:.2} ms ({:.2}), {} runs.\n",
        bare.median, bare.p90, options.raw
    ));
    println!("{report}");
    std::fs::create_dir_all(&options.out).map_err(|e| e.to_string())?;
    std::fs::write(options.out.join("latest.md"), &report).map_err(|e| e.to_string())?;
    if let Some(primary) = measured_in(&results, "128-init") {
        let rows: Vec<_> = primary
            .iter()
            .map(|m| {
                (
                    m.name.as_str(),
                    Summary::of(&m.init_ms).median,
                    Summary::of(&m.first_ms).median,
                    Summary::of(&m.warm_ms).median,
                )
            })
            .collect();
        std::fs::write(options.out.join("chart.svg"), stats::chart(&rows)).map_err(|e| e.to_string())?;
    }
    eprintln!("bench: wrote {}/latest.md and chart.svg", options.out.display());
    Ok(())
}

fn rust(name: &str, program: PathBuf, envelope: bool) -> Subject {
    Subject {
        name: name.to_string(),
        program,
        args: vec![],
        dir: None,
        envelope,
        event: None,
        kms: false,
        mcp: false,
        provider: false,
        keyed: Keying::None,
    }
}

/// `update-mcp-server` with `event`.
fn mcp_subject(name: &str, program: PathBuf, event: String) -> Subject {
    Subject {
        event: Some(event),
        mcp: true,
        ..rust(name, program, true)
    }
}

/// The MCP records the MCP subjects update, each in the sample project: one
/// whose headers were stored before sealing (plain), one whose headers are
/// sealed under `kms`'s key as the API seals them, and one the headers
/// subject writes.
const MCP_PLAIN: &str = "6f000000-0000-4000-8000-000000000001";
const MCP_SEALED: &str = "6f000000-0000-4000-8000-000000000002";
const MCP_HEADERS: &str = "6f000000-0000-4000-8000-000000000003";
/// As [`MCP_PLAIN`], its endpoint the run's MCP server (over TLS).
const MCP_VERIFY: &str = "6f000000-0000-4000-8000-000000000004";

/// `event` with `verify=true` in its query.
fn verified(event: &str) -> Result<String, String> {
    let mut event: serde_json::Value = serde_json::from_str(event).map_err(|e| e.to_string())?;
    let query = event["rawQueryString"].as_str().unwrap_or_default().to_string();
    event["rawQueryString"] = serde_json::Value::from(format!("{query}&verify=true"));
    event["queryStringParameters"]["verify"] = serde_json::Value::from("true");
    Ok(event.to_string())
}

/// `count` bare handshakes with `url` in a child of this harness that
/// trusts `bundle` from its start (the client reads the platform's roots,
/// `SSL_CERT_FILE` included, once per process).
async fn bare_handshakes_in_child(url: &str, bundle: &Path, count: usize) -> Result<Summary, String> {
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let output = tokio::process::Command::new(me)
        .args(["--bare-handshake", url, "--raw", &count.to_string()])
        .env("SSL_CERT_FILE", bundle)
        .stderr(Stdio::inherit())
        .output()
        .await
        .map_err(|e| format!("bare handshakes: {e}"))?;
    let times: Vec<f64> = serde_json::from_slice(&output.stdout).map_err(|e| format!("bare handshakes: {e}"))?;
    Ok(Summary::of(&times))
}

/// `count` handshakes with `url` after one that opens nothing for later
/// ones but loads the roots: each as `verify=true` makes it, its times in ms.
async fn bare_handshakes(url: &str, count: usize) -> Result<Vec<f64>, String> {
    use agent_server_shared::mcp::{DialPolicy, SystemResolver, handshake};
    let url = url::Url::parse(url).map_err(|e| e.to_string())?;
    let policy = DialPolicy {
        allow_private: true,
        refused: Vec::new(),
    };
    let headers = std::collections::BTreeMap::new();
    let mut times = Vec::with_capacity(count);
    for i in 0..=count {
        let started = Instant::now();
        handshake(&url, &headers, &policy, &SystemResolver, Duration::from_secs(10))
            .await
            .map_err(|failure| format!("bare handshake with {url}: {failure}"))?;
        if i > 0 {
            times.push(ms(started.elapsed()));
        }
    }
    Ok(times)
}

async fn mcp_records(dynamo: &aws_sdk_dynamodb::Client, kms: &KmsLocal, mcp_url: &str) -> Result<(), String> {
    use agent_server_shared::Table;
    for id in [MCP_PLAIN, MCP_SEALED, MCP_HEADERS, MCP_VERIFY] {
        let mut item = integration_tests::Route::McpServers.item(local_api::samples::PROJECT_ID, id);
        if id == MCP_VERIFY {
            item.insert(
                "endpoint".into(),
                agent_server_shared::item::Attr::S(mcp_url.to_string()),
            );
        }
        item.insert(
            "headers".into(),
            agent_server_shared::item::to_attribute(&serde_json::json!({
                "Authorization": format!("Bearer {}", agent_server_bench::SEALED_KEY),
                "X-Api-Key": agent_server_bench::SEALED_KEY,
            })),
        );
        if id == MCP_SEALED {
            agent_server_shared::seal::seal_stored(&kms.sealer(), Table::McpServers, Table::McpServers.fields(), &mut item)
                .await
                .map_err(|e| format!("sealing the bench's MCP record: {e}"))?;
        }
        dynamo
            .put_item()
            .table_name(TableNames::default().name(Table::McpServers))
            .set_item(Some(agent_server_shared::item::to_sdk(item)))
            .send()
            .await
            .map_err(|e| format!("storing the bench's MCP record: {e:?}"))?;
    }
    Ok(())
}

/// The MCP sample event for record `id` with `body`.
fn mcp_event(root: &Path, id: &str, body: &serde_json::Value) -> Result<String, String> {
    let path = root.join("events/update-mcp-server/200-new-endpoint-and-headers.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let sample = local_api::samples::MCP_SERVER_ID;
    let text = text.replace(sample, id);
    let mut event: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    event["body"] = serde_json::Value::from(body.to_string());
    Ok(event.to_string())
}

/// `update-api-key` on the sample key, with `event` (one sets `api_key`).
fn api_key_subject(name: &str, program: PathBuf, event: String) -> Subject {
    Subject {
        event: Some(event),
        kms: true,
        ..rust(name, program, true)
    }
}

/// The API-key sample event, and the same with `api_key` set: the two
/// requests the sealing targets compare.
fn api_key_events(root: &Path) -> Result<(String, String), String> {
    let path = root.join("events/update-api-key/200-rename-and-disable.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut event: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let mut body: serde_json::Value =
        serde_json::from_str(event["body"].as_str().unwrap_or("{}")).map_err(|e| e.to_string())?;
    body["api_key"] = serde_json::Value::from(agent_server_bench::SEALED_KEY);
    event["body"] = serde_json::Value::from(body.to_string());
    Ok((text, event.to_string()))
}

/// Everything one setup's measurements share.
struct Context<'a> {
    setup: Setup,
    api: &'a RuntimeApi,
    event: &'a str,
    endpoint: &'a str,
    kms_endpoint: &'a str,
    key_id: &'a str,
    tls: Option<&'a tls::Endpoint>,
    /// The bundle that trusts the MCP server's TLS endpoint, in every setup.
    mcp_ca: &'a Path,
    /// OpenAI's base at the provider mock, behind a TLS endpoint of the
    /// same CA as the MCP server's.
    openai_base: &'a str,
    controller: Option<&'a Controller>,
    options: &'a Options,
}

/// One cold start of `subject` and its warm invocations, added to `into`.
async fn measure(
    subject: &Subject,
    context: &Context<'_>,
    round: usize,
    index: usize,
    into: &mut Measured,
) -> Result<(), String> {
    let Context {
        setup,
        api,
        event,
        endpoint,
        kms_endpoint,
        key_id,
        tls,
        mcp_ca,
        openai_base,
        controller,
        options,
    } = context;
    let event = subject.event.as_deref().unwrap_or(event);
    let Measured {
        init_ms: init,
        first_ms: first,
        warm_ms: warm,
        rss_mib: rss,
        cpu_init_ms: cpu_init,
        cpu_first_ms: cpu_first,
        cpu_warm_ms: cpu_warm,
        connections,
        ..
    } = into;
    let memory = setup.memory_mb.unwrap_or(128);
    let quota = cgroup::quota_us(memory);
    // A fresh group per process, so its counters are its own.
    let group = match controller {
        Some(controller) => {
            let name = format!("{}-{}-{round}-{index}", std::process::id(), setup.key);
            let group = Group::create(controller, &name)?;
            group.limit(setup.throttle_init.then_some(quota))?;
            Some(group)
        }
        None => None,
    };
    // A shell joins the group, says it is ready and waits for the start
    // signal, then becomes the function: the function's first
    // instruction already runs under the quota, and the clock starts at
    // the signal. Joining a fresh cgroup costs about 7 to 25 ms of wall time
    // on a cgroup v1 host (the migration waits for an RCU grace period),
    // a cost of this harness that Lambda's init does not have. Without a
    // group the shell joins nothing, so every setup is timed alike.
    let join = group.as_ref().map_or(PathBuf::from("/dev/null"), Group::procs);
    let mut command = tokio::process::Command::new("/bin/sh");
    command
        .arg("-c")
        .arg("echo $$ > \"$0\" && echo ready && read -r _ && exec \"$@\" > /dev/null")
        .arg(join)
        .arg(&subject.program)
        .args(&subject.args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("AWS_LAMBDA_RUNTIME_API", api.address())
        .env("AWS_LAMBDA_FUNCTION_NAME", "update-model")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", memory.to_string())
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/update-model")
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "bench")
        .env("AWS_LAMBDA_LOG_FORMAT", "JSON")
        .env("AWS_LAMBDA_LOG_LEVEL", "WARN")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_DEFAULT_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "bench")
        .env("AWS_SECRET_ACCESS_KEY", "bench")
        .env("AWS_SESSION_TOKEN", "bench")
        .env("AWS_ENDPOINT_URL_DYNAMODB", endpoint)
        .env("MODELS_TABLE", "agent-server-models")
        .env(
            "LAMBDA_TASK_ROOT",
            subject.dir.as_deref().unwrap_or(Path::new(".")),
        )
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    if let Some(dir) = &subject.dir {
        command.current_dir(dir);
    }
    if subject.kms {
        // As template.yaml configures the API-key function.
        command
            .env_remove("MODELS_TABLE")
            .env("AWS_LAMBDA_FUNCTION_NAME", "update-api-key")
            .env("API_KEYS_TABLE", "agent-server-api-keys")
            .env("SECRETS_KEY_ID", key_id)
            .env("AWS_ENDPOINT_URL_KMS", kms_endpoint);
    }
    if subject.mcp {
        // As template.yaml configures the MCP-server function.
        command
            .env_remove("MODELS_TABLE")
            .env("AWS_LAMBDA_FUNCTION_NAME", "update-mcp-server")
            .env("MCP_SERVERS_TABLE", "agent-server-mcp-servers")
            .env("ALLOW_PRIVATE_ENDPOINTS", "true")
            .env("SECRETS_KEY_ID", key_id)
            .env("AWS_ENDPOINT_URL_KMS", kms_endpoint);
    }
    match tls {
        // Trusting the run's CA the way an operator trusts another one.
        Some(tls) => {
            command
                .env("SSL_CERT_FILE", &tls.bundle)
                .env("AWS_CA_BUNDLE", &tls.bundle);
        }
        None => {
            if let Ok(bundle) = std::env::var("SSL_CERT_FILE") {
                command.env("SSL_CERT_FILE", bundle);
            }
        }
    }
    if subject.mcp {
        // The MCP server is reached over TLS in every setup.
        command.env("SSL_CERT_FILE", mcp_ca);
    }
    if subject.provider {
        // The provider, too (its endpoint's CA is the MCP server's); on
        // loopback, as a private gateway would be in a VPC.
        command
            .env("OPENAI_BASE_URL", openai_base)
            .env("ALLOW_PRIVATE_ENDPOINTS", "true")
            .env("SSL_CERT_FILE", mcp_ca);
    }
    let mut child = command
        .spawn()
        .map_err(|e| format!("{}: {e}", subject.program.display()))?;
    let pid = child.id().unwrap_or(0);
    let (Some(mut start), Some(ready)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(format!("{}: no pipes to the starting shell", subject.name));
    };
    let mut line = String::new();
    let mut ready = tokio::io::BufReader::new(ready);
    let problem = match tokio::time::timeout(Duration::from_secs(60), ready.read_line(&mut line)).await {
        Ok(Ok(_)) if line.trim() == "ready" => None,
        Ok(Ok(_)) => Some("exited before it was ready".to_string()),
        Ok(Err(e)) => Some(e.to_string()),
        Err(_) => Some("not ready within 60s".to_string()),
    };
    if let Some(problem) = problem {
        // Gone before the group is removed, or the group stays behind.
        let _ = child.kill().await;
        return Err(format!("{}: the starting shell: {problem}", subject.name));
    }
    let accepted_before = tls.map(|t| t.accepted());
    // The shell's own CPU so far is not the function's.
    let cpu_at_start = cpu_ms(pid);
    let spawned = Instant::now();
    start
        .write_all(b"go\n")
        .await
        .map_err(|e| format!("{}: start signal: {e}", subject.name))?;
    drop(start);
    let ready = api
        .wait_for_next(Duration::from_secs(60))
        .await
        .map_err(|e| format!("{}: {e}", subject.name))?;
    init.push(ms(ready - spawned));
    let mut cpu_before = cpu_ms(pid);
    cpu_init.push(cpu_before - cpu_at_start);
    // Lambda's init phase is over: from here on, the function's share.
    if let Some(group) = &group
        && !setup.throttle_init
    {
        group.limit(Some(quota))?;
    }
    let accepted_at_init = tls.map(|t| t.accepted());
    for invocation in 0..=options.warm {
        if invocation > 0 {
            // Under a quota, each warm request starts with a fresh period, as
            // a request to an instance that is not saturated does; back to
            // back, every request would pay for the previous one's CPU.
            if group.is_some() {
                tokio::time::sleep(Duration::from_micros(cgroup::PERIOD_US)).await;
            }
            // What the function did after posting the previous response
            // (logging, asking for the next event) is that invocation's CPU.
            let now = cpu_ms(pid);
            if invocation == 1 {
                &mut *cpu_first
            } else {
                &mut *cpu_warm
            }
            .push(now - cpu_before);
            cpu_before = now;
        }
        let keyed = match subject.keyed {
            Keying::None => None,
            Keying::Fresh => Some(with_key(event, &format!("bench-{round}-{invocation}-{}", uuid::Uuid::new_v4()))?),
            Keying::Replayed => Some(with_key(event, &format!("bench-{}-{round}", setup.key))?),
        };
        let outcome = api
            .invoke(keyed.as_deref().unwrap_or(event), Duration::from_secs(60))
            .await
            .map_err(|e| format!("{}: {e}", subject.name))?;
        let status = serde_json::from_str::<serde_json::Value>(&outcome.body)
            .ok()
            .and_then(|response| response["statusCode"].as_u64());
        if subject.envelope && status != Some(200) {
            return Err(format!(
                "{}: round {round}: not a 200 envelope: {}",
                subject.name, outcome.body
            ));
        }
        if invocation == 0 {
            first.push(ms(outcome.latency));
            if let (Some(t), Some(before), Some(at_init), Some((init_conns, first_conns))) =
                (tls, accepted_before, accepted_at_init, connections.as_mut())
            {
                init_conns.push((at_init - before) as f64);
                first_conns.push((t.accepted() - at_init) as f64);
            }
        } else {
            warm.push(ms(outcome.latency));
        }
    }
    tokio::time::sleep(Duration::from_micros(cgroup::PERIOD_US)).await;
    let now = cpu_ms(pid);
    cpu_warm.push(now - cpu_before);
    rss.push(peak_rss_mib(pid));
    let _ = child.kill().await;
    let _ = child.wait().await;
    api.forget_process().await;
    drop(group);
    Ok(())
}

/// The database floor of the earlier method: the same conditional
/// UpdateItem the function makes, from a warm client in this process, over
/// plain HTTP.
async fn raw_update_item(endpoint: &str, count: usize) -> Result<Summary, String> {
    let store = DynamoStore::new(client(endpoint), TableNames::default());
    let mut latencies = Vec::with_capacity(count);
    for i in 0..=count {
        let update = agent_server_bench::sample_update(i);
        let started = Instant::now();
        store
            .update(update)
            .await
            .map_err(|e| format!("raw UpdateItem: {e}"))?;
        // The first call opens the connection; the floor is the warm one.
        if i > 0 {
            latencies.push(ms(started.elapsed()));
        }
    }
    Ok(Summary::of(&latencies))
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// CPU time all of the process's threads have run, in ms (the first field
/// of each thread's `schedstat`, nanoseconds on a CPU). Threads that have
/// exited are not counted; the functions measured keep theirs.
fn cpu_ms(pid: u32) -> f64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return f64::NAN;
    };
    let ns: u64 = tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    ns as f64 / 1e6
}

/// The process's peak resident set (`VmHWM`), in MiB.
fn peak_rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse::<f64>().ok())
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

/// Sizes of the arm64 `bootstrap`s that `make package` built.
fn bootstrap_sizes(root: &Path) -> Vec<(String, Option<u64>)> {
    ["update-api-key", "update-mcp-server", "update-model"]
        .iter()
        .map(|name| {
            let path = root.join("target/lambda").join(name).join("bootstrap");
            (name.to_string(), std::fs::metadata(path).ok().map(|m| m.len()))
        })
        .collect()
}

fn measured_in<'a>(results: &'a [SetupResult], key: &str) -> Option<&'a [Measured]> {
    results
        .iter()
        .find(|r| r.setup.key == key)
        .and_then(|r| r.outcome.as_ref().ok())
        .map(Vec::as_slice)
}

fn find<'a>(measured: &'a [Measured], prefix: &str) -> Option<&'a Measured> {
    measured.iter().find(|m| m.name.starts_with(prefix))
}

fn report(
    results: &[SetupResult],
    raw: &Summary,
    sizes: &[(String, Option<u64>)],
    options: &Options,
    no_quota: Option<&String>,
) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "{} cold starts per implementation and setup, {} warm invocations after each; medians, p90 in brackets.\n\n",
        options.cold, options.warm
    ));
    if let Some(reason) = no_quota {
        out.push_str(&format!(
            "**WARNING: no CPU quota could be set ({reason}). The throttled setups were NOT measured.**\n\n"
        ));
    }
    for result in results {
        out.push_str(&format!("### {}\n\n", result.setup.title));
        let measured = match &result.outcome {
            Ok(measured) => measured,
            Err(reason) => {
                out.push_str(&format!("**{reason}**\n\n"));
                continue;
            }
        };
        out.push_str(
            "| implementation | init | first invocation | **cold request** | warm | CPU: init / first / warm | peak RSS | TLS connections at init / first |\n\
             |---|---|---|---|---|---|---|---|\n",
        );
        for m in measured {
            let connections = match &m.connections {
                Some((init, first)) => format!(
                    "{:.0} / {:.0}",
                    Summary::of(init).median,
                    Summary::of(first).median
                ),
                None => "plain HTTP".into(),
            };
            out.push_str(&format!(
                "| {} | {} | {} | **{}** | {} | {:.1} / {:.2} / {:.2} ms | {:.1} MiB | {connections} |\n",
                m.name,
                cell(&m.init_ms, 1),
                cell(&m.first_ms, 1),
                cell(&m.cold_ms(), 1),
                cell(&m.warm_ms, 2),
                Summary::of(&m.cpu_init_ms).median,
                Summary::of(&m.cpu_first_ms).median,
                Summary::of(&m.cpu_warm_ms).median,
                Summary::of(&m.rss_mib).median,
            ));
        }
        if result.setup.key == "plain" {
            out.push_str(&format!(
                "| raw conditional UpdateItem (warm client in the harness) | | | | {:.2} ms ({:.2}) | | | |\n",
                raw.median, raw.p90
            ));
        }
        out.push('\n');
    }

    out.push_str(&targets(results));
    out.push_str(&costs(results));

    out.push_str("| arm64 bootstrap (stripped) | size |\n|---|---|\n");
    for (name, size) in sizes {
        match size {
            Some(bytes) => out.push_str(&format!(
                "| {name} | {bytes} bytes ({:.2} MiB) |\n",
                *bytes as f64 / 1048576.0
            )),
            None => out.push_str(&format!("| {name} | not built (make package) |\n")),
        }
    }
    out
}

/// `median ms (p90)`.
fn cell(values: &[f64], decimals: usize) -> String {
    let summary = Summary::of(values);
    format!("{:.decimals$} ms ({:.decimals$})", summary.median, summary.p90)
}

fn targets(results: &[SetupResult]) -> String {
    let mut out = String::from(
        "| target (cold request at 128 MB, same run) | value | target | met |\n|---|---|---|---|\n",
    );
    let mut row = |name: &str, value: Option<(f64, String)>, limit: f64, target: &str| match value {
        Some((v, shown)) => out.push_str(&format!(
            "| {name} | {shown} | {target} | {} |\n",
            if v <= limit { "yes" } else { "no" }
        )),
        None => out.push_str(&format!("| {name} | not measured | {target} | — |\n")),
    };
    let primary = measured_in(results, "128-init");
    let ours = primary.and_then(|m| find(m, "update-model"));
    let python = primary.and_then(|m| find(m, "Python"));
    let raw = primary.and_then(|m| find(m, "raw UpdateItem"));
    let cold = |m: &Measured| Summary::of(&m.cold_ms()).median;
    row(
        "ours, init unthrottled",
        ours.map(|o| (cold(o), format!("{:.1} ms", cold(o)))),
        20.0,
        "≤ 20 ms",
    );
    row(
        "ours / Python peer, init unthrottled",
        ours.zip(python).map(|(o, p)| {
            let ratio = cold(o) / cold(p);
            (
                ratio,
                format!(
                    "1/{:.0} ({:.1} ms against {:.0} ms)",
                    1.0 / ratio,
                    cold(o),
                    cold(p)
                ),
            )
        }),
        1.0 / 20.0,
        "≤ 1/20",
    );
    let whole = measured_in(results, "128-whole").and_then(|m| find(m, "update-model"));
    row(
        "ours, whole process throttled",
        whole.map(|o| (cold(o), format!("{:.1} ms", cold(o)))),
        150.0,
        "≤ 150 ms",
    );
    row(
        "ours warm / raw UpdateItem warm, 128 MB, same TLS path",
        ours.zip(raw).map(|(o, r)| {
            let (ow, rw) = (Summary::of(&o.warm_ms).median, Summary::of(&r.warm_ms).median);
            (ow / rw, format!("{:.2} ({ow:.2} ms against {rw:.2} ms)", ow / rw))
        }),
        1.3,
        "≤ 1.3",
    );
    let plain_key = primary.and_then(|m| find(m, "update-api-key, no api_key"));
    let sealing = primary.and_then(|m| find(m, "update-api-key, seals api_key"));
    let encrypt = primary.and_then(|m| find(m, "raw Encrypt"));
    row(
        "sealing cold request / same function's cold request without api_key",
        sealing.zip(plain_key).map(|(s, p)| {
            let ratio = cold(s) / cold(p);
            (ratio, format!("{ratio:.2} ({:.1} ms against {:.1} ms)", cold(s), cold(p)))
        }),
        1.5,
        "≤ 1.5",
    );
    row(
        "sealing warm request − warm request without api_key, over a bare warm Encrypt",
        sealing.zip(plain_key).zip(encrypt).map(|((s, p), e)| {
            let warm = |m: &Measured| Summary::of(&m.warm_ms).median;
            let added = warm(s) - warm(p);
            (
                added / warm(e),
                format!("{:.2} ({added:.2} ms added against {:.2} ms)", added / warm(e), warm(e)),
            )
        }),
        1.0,
        "≤ 1",
    );
    let plain_mcp = primary.and_then(|m| find(m, "update-mcp-server, rename, headers stored plain"));
    let sealed_mcp = primary.and_then(|m| find(m, "update-mcp-server, rename, headers sealed"));
    let headers_mcp = primary.and_then(|m| find(m, "update-mcp-server, sets headers"));
    let warm = |m: &Measured| Summary::of(&m.warm_ms).median;
    for (what, subject) in [("rename of a sealed record", sealed_mcp), ("PUT setting headers", headers_mcp)] {
        row(
            &format!("MCP {what}: cold request / the same function's cold rename of an unsealed record"),
            subject.zip(plain_mcp).map(|(s, p)| {
                let ratio = cold(s) / cold(p);
                (ratio, format!("{ratio:.2} ({:.1} ms against {:.1} ms)", cold(s), cold(p)))
            }),
            1.5,
            "≤ 1.5",
        );
        row(
            &format!("MCP {what}: warm − unsealed rename warm, over a bare warm KMS call + a bare warm UpdateItem"),
            subject.zip(plain_mcp).zip(encrypt.zip(raw)).map(|((s, p), (e, r))| {
                let added = warm(s) - warm(p);
                let allowed = warm(e) + warm(r);
                (
                    added / allowed,
                    format!("{:.2} ({added:.2} ms added against {allowed:.2} ms)", added / allowed),
                )
            }),
            1.0,
            "≤ 1",
        );
    }
    out.push('\n');
    out
}

/// Billed milliseconds: each duration rounded up to the next millisecond,
/// averaged.
fn billed_ms(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.iter().map(|v| v.ceil().max(1.0)).sum::<f64>() / values.len() as f64
}

fn costs(results: &[SetupResult]) -> String {
    let mut out = format!(
        "Cost per million requests, arm64, US East (N. Virginia) prices (${PRICE_GB_SECOND} per GB-second, \
         ${:.2} per million requests); warm = every request warm; with cold starts = {:.0}% of requests \
         cold, each billed init + first invocation (custom runtimes' init is billed):\n\n\
         | memory | implementation | billed warm duration | billed cold request | KMS calls | warm | with cold starts |\n\
         |---|---|---|---|---|---|---|\n",
        PRICE_REQUEST * 1e6,
        COLD_SHARE * 100.0
    );
    for key in ["128-init", "256-init", "512-init"] {
        let Some(result) = results.iter().find(|r| r.setup.key == key) else {
            continue;
        };
        let (Ok(measured), Some(memory)) = (&result.outcome, result.setup.memory_mb) else {
            continue;
        };
        let gb = memory as f64 / 1024.0;
        for m in measured.iter().filter(|m| {
            ["update-model", "Python", "update-api-key", "update-mcp-server"]
                .iter()
                .any(|prefix| m.name.starts_with(prefix))
        }) {
            let warm = billed_ms(&m.warm_ms);
            let cold = billed_ms(&m.cold_ms());
            // One KMS call per request where the request seals or opens a
            // secret; none otherwise (and none at warm-up's DescribeKey,
            // once per instance: below a cent per million requests).
            let kms_calls = ["seals api_key", "headers sealed", "sets headers"]
                .iter()
                .any(|case| m.name.contains(case)) as u8;
            let per_million = |ms: f64| {
                1e6 * (PRICE_REQUEST + PRICE_GB_SECOND * gb * ms / 1000.0 + f64::from(kms_calls) * PRICE_KMS_REQUEST)
            };
            let mixed = (1.0 - COLD_SHARE) * per_million(warm) + COLD_SHARE * per_million(cold);
            out.push_str(&format!(
                "| {memory} MB | {} | {warm:.2} ms | {cold:.1} ms | {kms_calls} (${:.2}) | ${:.3} | ${mixed:.3} |\n",
                m.name,
                f64::from(kms_calls) * PRICE_KMS_REQUEST * 1e6,
                per_million(warm)
            ));
        }
    }
    out.push('\n');
    out
}

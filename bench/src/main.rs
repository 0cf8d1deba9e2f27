//! `make bench`: cold start, latency and memory of `update-model` against
//! the Rust floor (a do-nothing `lambda_runtime` function), an equivalent
//! Python 3.11 handler on `awslambdaric` with boto3, and a raw conditional
//! `UpdateItem` from a warm Rust client, all against one DynamoDB Local.
//!
//! The harness is the Lambda service as far as a function can tell: it
//! serves the Runtime API (`/2018-06-01/runtime/...`) on loopback, starts
//! each function as a fresh process with the environment Lambda sets, hands
//! it real API Gateway HTTP API events, and times:
//! - init: process spawn until its first `GET .../invocation/next`;
//! - first and warm latency: event handed out until its response is posted;
//! - peak RSS: the process's `VmHWM` before it is stopped.
//!
//! Usage: `bench [--cold N] [--warm M] [--raw K] [--python PYTHON] [--out DIR]`

mod runtime_api;
mod stats;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use agent_server_shared::Table;
use agent_server_shared::config::TableNames;
use agent_server_shared::store::{DynamoStore, Key, Store, Update};
use aws_sdk_dynamodb::types::AttributeValue;
use integration_tests::{DynamoLocal, client, free_port, repo_root};
use local_api::samples;
use runtime_api::RuntimeApi;
use stats::Summary;

/// One implementation under test.
struct Subject {
    name: &'static str,
    program: PathBuf,
    args: Vec<String>,
    /// Working directory (the Python handler's code root).
    dir: Option<PathBuf>,
    /// Whether each response must be an API Gateway response with status 200
    /// (the floor only echoes).
    envelope: bool,
}

/// What one subject measured.
struct Measured {
    name: &'static str,
    init_ms: Summary,
    first_ms: Summary,
    warm_ms: Summary,
    rss_mib: Summary,
}

struct Options {
    cold: usize,
    warm: usize,
    raw: usize,
    python: PathBuf,
    out: PathBuf,
}

fn options() -> Result<Options, String> {
    let root = repo_root();
    let mut options = Options {
        cold: 20,
        warm: 100,
        raw: 500,
        python: root.join(".venv-bench/bin/python"),
        out: root.join("bench/results"),
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--cold" => options.cold = value()?.parse().map_err(|e| format!("--cold: {e}"))?,
            "--warm" => options.warm = value()?.parse().map_err(|e| format!("--warm: {e}"))?,
            "--raw" => options.raw = value()?.parse().map_err(|e| format!("--raw: {e}"))?,
            "--python" => options.python = PathBuf::from(value()?),
            "--out" => options.out = PathBuf::from(value()?),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if options.cold == 0 || options.warm == 0 || options.raw == 0 {
        return Err("--cold, --warm and --raw must be at least 1".into());
    }
    Ok(options)
}

#[tokio::main]
async fn main() {
    let options = match options() {
        Ok(options) => options,
        Err(message) => {
            eprintln!("bench: {message}");
            std::process::exit(2);
        }
    };
    if let Err(message) = run(options).await {
        eprintln!("bench: {message}");
        std::process::exit(1);
    }
}

async fn run(options: Options) -> Result<(), String> {
    let root = repo_root();
    let release = root.join("target/release");
    let dynamodb_port = free_port();
    let endpoint = format!("http://127.0.0.1:{dynamodb_port}");
    eprintln!("bench: DynamoDB Local on {endpoint}");
    let dynamodb = DynamoLocal::start(dynamodb_port);
    let dynamo = client(&endpoint);
    local_api::setup::prepare(&dynamo, &TableNames::default(), Duration::from_secs(60))
        .await
        .map_err(|e| e.to_string())?;

    let event_path = root.join("events/update-model/200-switch-provider.json");
    let event = std::fs::read_to_string(&event_path).map_err(|e| format!("{}: {e}", event_path.display()))?;
    let api = RuntimeApi::start().await.map_err(|e| e.to_string())?;

    let subjects = [
        Subject {
            name: "update-model (Rust)",
            program: release.join("update-model"),
            args: vec![],
            dir: None,
            envelope: true,
        },
        Subject {
            name: "hello-world floor (Rust)",
            program: release.join("hello"),
            args: vec![],
            dir: None,
            envelope: false,
        },
        Subject {
            name: "Python 3.11 + boto3",
            program: options.python.clone(),
            args: vec!["-m".into(), "awslambdaric".into(), "handler.handler".into()],
            dir: Some(root.join("bench/python")),
            envelope: true,
        },
    ];
    let mut results = Vec::new();
    for subject in &subjects {
        if !subject.program.exists() {
            return Err(format!(
                "{} not found (make bench builds it)",
                subject.program.display()
            ));
        }
        eprintln!(
            "bench: {} — {} cold starts x {} warm invocations",
            subject.name, options.cold, options.warm
        );
        results.push(measure(subject, &api, &event, &endpoint, &options).await?);
    }
    let raw = raw_update_item(&endpoint, options.raw).await?;
    dynamodb.stop();

    let sizes = bootstrap_sizes(&root);
    let report = report(&results, &raw, &sizes, &options);
    println!("{report}");
    std::fs::create_dir_all(&options.out).map_err(|e| e.to_string())?;
    std::fs::write(options.out.join("latest.md"), &report).map_err(|e| e.to_string())?;
    let svg = stats::chart(
        &results
            .iter()
            .map(|m| (m.name, m.init_ms.median, m.warm_ms.median))
            .collect::<Vec<_>>(),
        raw.median,
    );
    std::fs::write(options.out.join("chart.svg"), svg).map_err(|e| e.to_string())?;
    eprintln!("bench: wrote {}/latest.md and chart.svg", options.out.display());
    Ok(())
}

async fn measure(
    subject: &Subject,
    api: &RuntimeApi,
    event: &str,
    endpoint: &str,
    options: &Options,
) -> Result<Measured, String> {
    let (mut init, mut first, mut warm, mut rss) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..options.cold {
        let mut command = tokio::process::Command::new(&subject.program);
        command
            .args(&subject.args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("AWS_LAMBDA_RUNTIME_API", api.address())
            .env("AWS_LAMBDA_FUNCTION_NAME", "update-model")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
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
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        if let Some(dir) = &subject.dir {
            command.current_dir(dir);
        }
        // As template.yaml sets it for the functions: read one CA bundle, not
        // every file of the certificate directory as well.
        if let Ok(bundle) = std::env::var("SSL_CERT_FILE") {
            command.env("SSL_CERT_FILE", bundle);
        }
        let spawned = Instant::now();
        let mut child = command
            .spawn()
            .map_err(|e| format!("{}: {e}", subject.program.display()))?;
        let pid = child.id().unwrap_or(0);
        let ready = api
            .wait_for_next(Duration::from_secs(30))
            .await
            .map_err(|e| format!("{}: {e}", subject.name))?;
        init.push(ms(ready - spawned));
        for invocation in 0..=options.warm {
            let outcome = api
                .invoke(event, Duration::from_secs(30))
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
            } else {
                warm.push(ms(outcome.latency));
            }
        }
        rss.push(peak_rss_mib(pid));
        let _ = child.kill().await;
        let _ = child.wait().await;
        api.forget_process().await;
    }
    Ok(Measured {
        name: subject.name,
        init_ms: Summary::of(&init),
        first_ms: Summary::of(&first),
        warm_ms: Summary::of(&warm),
        rss_mib: Summary::of(&rss),
    })
}

/// The database floor: the same conditional UpdateItem the function makes,
/// from a warm client in this process.
async fn raw_update_item(endpoint: &str, count: usize) -> Result<Summary, String> {
    let store = DynamoStore::new(client(endpoint), TableNames::default());
    let mut latencies = Vec::with_capacity(count);
    for i in 0..=count {
        let update = Update {
            table: Table::Models,
            key: Key {
                project_id: Some(samples::PROJECT_ID.into()),
                id: samples::MODEL_ID.into(),
            },
            set: vec![
                ("name", AttributeValue::S("Claude Sonnet".into())),
                ("provider_type", AttributeValue::S("Anthropic".into())),
                (
                    "parameters",
                    AttributeValue::M(
                        [
                            ("temperature".to_string(), AttributeValue::N("0.2".into())),
                            ("max_tokens".to_string(), AttributeValue::N(i.to_string())),
                        ]
                        .into(),
                    ),
                ),
            ],
            expected_versions: None,
            now: agent_server_shared::handler::timestamp(),
        };
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

fn report(results: &[Measured], raw: &Summary, sizes: &[(String, Option<u64>)], options: &Options) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "{} cold starts per implementation, {} warm invocations after each; raw UpdateItem x {}.\n\n",
        options.cold, options.warm, options.raw
    ));
    out.push_str("| implementation | init median | init p90 | first median | first p90 | warm median | warm p90 | peak RSS median | peak RSS p90 |\n");
    out.push_str("|---|---|---|---|---|---|---|---|---|\n");
    for m in results {
        out.push_str(&format!(
            "| {} | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms | {:.3} ms | {:.3} ms | {:.1} MiB | {:.1} MiB |\n",
            m.name,
            m.init_ms.median,
            m.init_ms.p90,
            m.first_ms.median,
            m.first_ms.p90,
            m.warm_ms.median,
            m.warm_ms.p90,
            m.rss_mib.median,
            m.rss_mib.p90
        ));
    }
    out.push_str(&format!(
        "| raw conditional UpdateItem (warm Rust client) | | | | | {:.3} ms | {:.3} ms | | |\n\n",
        raw.median, raw.p90
    ));
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
    let [ours, floor, python] = [&results[0], &results[1], &results[2]];
    out.push_str("\n| ratio | value | target |\n|---|---|---|\n");
    let ratios = [
        (
            "our init / Rust floor init",
            ours.init_ms.median / floor.init_ms.median,
            "<= 1.5",
        ),
        (
            "our init / Python init",
            ours.init_ms.median / python.init_ms.median,
            "<= 0.125",
        ),
        (
            "our warm latency / raw UpdateItem",
            ours.warm_ms.median / raw.median,
            "<= 1.15",
        ),
        (
            "our peak RSS / Python peak RSS",
            ours.rss_mib.median / python.rss_mib.median,
            "(RSS < 20 MiB)",
        ),
    ];
    for (name, value, target) in ratios {
        out.push_str(&format!("| {name} | {value:.3} | {target} |\n"));
    }
    out
}

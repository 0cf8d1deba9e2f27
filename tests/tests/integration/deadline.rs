//! The invocation's deadline bounds a request, in the real function binary:
//! `update-model` runs under a Lambda Runtime API of this test's own, which
//! hands it one invocation due about a second later, while its DynamoDB
//! endpoint accepts connections and never answers. The function must post
//! its 503 envelope, and write its access and metrics lines, before that
//! deadline: Lambda would otherwise end the invocation and the caller would
//! get API Gateway's bare error instead of the envelope.
//!
//! The binary is built first with the Makefile's own debug build command
//! (`cargo build --workspace --bins --examples`), so the test always runs
//! the code it was compiled with, and, its features unified as under
//! `make build`, reuses that build's artifacts instead of compiling the
//! functions a second time with other features.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use agent_server_shared::budget::TIME_BUDGET;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::{Method, StatusCode};
use hyper_util::rt::TokioIo;
use integration_tests::Route;
use integration_tests::events::Event;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

const PROJECT: &str = "8a4b2c1d-3e5f-4a6b-8c7d-9e0f1a2b3c4d";
const ID: &str = "7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f";
const REQUEST_ID: &str = "0f1e2d3c-4b5a-4697-8877-665544332211";
const FUNCTION: &str = "update-model";
/// How far away the invocation's deadline is when it is handed out.
const DEADLINE_IN: Duration = Duration::from_millis(1000);
/// How long the binary may take to start (its DynamoDB warm-up alone waits
/// out its one-second budget here) and answer.
const PATIENCE: Duration = Duration::from_secs(30);

const NEXT: &str = "/2018-06-01/runtime/invocation/next";

/// What the function did through the Runtime API, when.
#[derive(Debug)]
enum Call {
    /// It was handed the invocation, due at `deadline`.
    Invoked { at: Instant, deadline: Instant },
    /// It posted the invocation's result.
    Response { at: Instant, path: String, body: Bytes },
    /// It posted an error (an invocation's, or init's), or called a path
    /// the Runtime API does not have.
    Failure { path: String, body: Bytes },
}

/// A Lambda Runtime API on loopback that hands out `event` once (later
/// `next` calls never answer, as when no invocation comes) and reports
/// every call on the returned channel.
async fn runtime_api(event: Value) -> (SocketAddr, mpsc::UnboundedReceiver<Call>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (calls, received) = mpsc::unbounded_channel();
    let handed_out = Arc::new(AtomicBool::new(false));
    let event = Bytes::from(event.to_string());
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (calls, handed_out, event) = (calls.clone(), handed_out.clone(), event.clone());
            let service = hyper::service::service_fn(move |request| {
                answer(request, calls.clone(), handed_out.clone(), event.clone())
            });
            tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(stream), service));
        }
    });
    (address, received)
}

/// One call to the Runtime API: the invocation for the first `next`, a
/// `next` that never answers after it, and 202 for anything posted.
async fn answer(
    request: hyper::Request<Incoming>,
    calls: mpsc::UnboundedSender<Call>,
    handed_out: Arc<AtomicBool>,
    event: Bytes,
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    let path = request.uri().path().to_owned();
    if request.method() == Method::GET && path == NEXT {
        if handed_out.swap(true, Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        let now = SystemTime::now();
        let at = Instant::now();
        let deadline_ms = (now + DEADLINE_IN)
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_millis();
        // Whole milliseconds: the deadline the function reads is this one.
        let deadline = at
            + (SystemTime::UNIX_EPOCH + Duration::from_millis(u64::try_from(deadline_ms).unwrap()))
                .duration_since(now)
                .unwrap_or_default();
        calls.send(Call::Invoked { at, deadline }).unwrap();
        let response = hyper::Response::builder()
            .header("content-type", "application/json")
            .header("lambda-runtime-aws-request-id", REQUEST_ID)
            .header("lambda-runtime-deadline-ms", deadline_ms.to_string())
            .header(
                "lambda-runtime-invoked-function-arn",
                format!("arn:aws:lambda:us-east-1:123456789012:function:{FUNCTION}"),
            )
            .header(
                "lambda-runtime-trace-id",
                "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
            )
            .body(Full::new(event))
            .unwrap();
        return Ok(response);
    }
    let body = request
        .into_body()
        .collect()
        .await
        .map(|body| body.to_bytes())
        .unwrap_or_default();
    let at = Instant::now();
    let is_response = path.starts_with("/2018-06-01/runtime/invocation/") && path.ends_with("/response");
    let call = if is_response {
        Call::Response { at, path, body }
    } else {
        Call::Failure { path, body }
    };
    calls.send(call).unwrap();
    Ok(hyper::Response::builder()
        .status(StatusCode::ACCEPTED)
        .body(Full::new(Bytes::from_static(br#"{"status":"OK"}"#)))
        .unwrap())
}

/// A DynamoDB endpoint that accepts connections, reads nothing and never
/// answers: the sockets are held open for as long as the test runs.
async fn silent_endpoint() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    format!("http://{address}")
}

/// The function's process, killed when the test ends however it ends.
struct Running {
    child: Child,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Running {
    /// Kills the process and returns what it wrote to stdout and stderr.
    fn stop(mut self) -> (String, String) {
        self.kill();
        // Read, then removed: every failure message carries them.
        let read = |path: &Path| {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let _ = std::fs::remove_file(path);
            text
        };
        (read(&self.stdout), read(&self.stderr))
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Starts `binary` as Lambda would, against `runtime_api` and the DynamoDB
/// `endpoint`, with nothing else from this process's environment.
fn start(binary: &Path, runtime_api: SocketAddr, endpoint: &str) -> Running {
    let logs = integration_tests::test_log(&format!("{FUNCTION}-{}", runtime_api.port()));
    let (stdout, stderr) = (logs.with_extension("stdout"), logs.with_extension("stderr"));
    let child = Command::new(binary)
        .env_clear()
        .env("AWS_LAMBDA_RUNTIME_API", runtime_api.to_string())
        .env("AWS_LAMBDA_FUNCTION_NAME", FUNCTION)
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", format!("/aws/lambda/{FUNCTION}"))
        .env(
            "AWS_LAMBDA_LOG_STREAM_NAME",
            "2026/11/26/[$LATEST]0123456789abcdef",
        )
        .env("MODELS_TABLE", "agent-server-models")
        .env("AWS_ENDPOINT_URL_DYNAMODB", endpoint)
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "local")
        .env("AWS_SECRET_ACCESS_KEY", "local")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
    Running {
        child,
        stdout,
        stderr,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_database_is_a_503_envelope_before_the_invocations_deadline() {
    // Only while the plain budget outlasts the deadline does the deadline
    // have anything to bound.
    assert!(TIME_BUDGET >= 2 * DEADLINE_IN, "{TIME_BUDGET:?}");
    let binary = tokio::task::spawn_blocking(|| integration_tests::workspace_binary(FUNCTION))
        .await
        .unwrap();
    let event = Event::put(Route::Models, ID, Some(PROJECT))
        .json(&json!({"name": "renamed"}))
        .to_json();
    let (api, mut calls) = runtime_api(event).await;
    let function = start(&binary, api, &silent_endpoint().await);

    // Every call up to the first result (or failure) the function posts.
    let mut seen = Vec::new();
    let waited = tokio::time::timeout(PATIENCE, async {
        while let Some(call) = calls.recv().await {
            let last = !matches!(call, Call::Invoked { .. });
            seen.push(call);
            if last {
                break;
            }
        }
    })
    .await;
    // Anything posted just after (an error would be) is seen too.
    tokio::time::sleep(Duration::from_millis(200)).await;
    while let Ok(call) = calls.try_recv() {
        seen.push(call);
    }
    let (stdout, stderr) = function.stop();
    let output = format!("calls: {seen:?}\nstdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(waited.is_ok(), "nothing posted within {PATIENCE:?}; {output}");
    let failures: Vec<String> = seen
        .iter()
        .filter_map(|call| match call {
            Call::Failure { path, body } => Some(format!("{path}: {}", String::from_utf8_lossy(body))),
            _ => None,
        })
        .collect();
    assert!(failures.is_empty(), "the function posted {failures:?}; {output}");

    let [
        Call::Invoked {
            at: invoked,
            deadline,
        },
        Call::Response {
            at: answered,
            path,
            body,
        },
    ] = &seen[..]
    else {
        panic!("want one invocation and its response; {output}");
    };
    assert_eq!(
        path,
        &format!("/2018-06-01/runtime/invocation/{REQUEST_ID}/response")
    );

    // Posted before the deadline, and not before the call had waited at
    // least half the deadline's second (the budget it leaves is 750 ms,
    // the rest is the margin to answer): the deadline, not the plain
    // budget, ended the wait. Both bounds are this test's own numbers,
    // not the code's constants, so a change to those cannot move them.
    let took = answered.duration_since(*invoked);
    assert!(
        answered < deadline,
        "answered {took:?} after the invocation, past its deadline; {output}"
    );
    assert!(
        took >= DEADLINE_IN / 2,
        "answered after only {took:?}: the call did not wait for DynamoDB; {output}"
    );
    assert!(
        took < TIME_BUDGET / 2,
        "took {took:?}, near the plain budget {TIME_BUDGET:?}; {output}"
    );

    // API Gateway's payload 2.0 response, carrying the 503 envelope.
    let response: Value = serde_json::from_slice(body).unwrap_or_else(|e| panic!("{e}; {output}"));
    assert_eq!(response["statusCode"], 503, "{output}");
    assert_eq!(response["headers"]["retry-after"], "1", "{output}");
    assert_eq!(response["isBase64Encoded"], false, "{output}");
    let envelope: Value = serde_json::from_str(response["body"].as_str().unwrap_or_default())
        .unwrap_or_else(|e| panic!("the body is not JSON ({e}); {output}"));
    assert_eq!(envelope["status"], 503, "{output}");
    assert_eq!(envelope["errorDetails"]["code"], "unavailable", "{output}");
    assert_eq!(envelope["errorDetails"]["requestId"], REQUEST_ID, "{output}");

    // Its access line and its metrics line, tied to it by the request id.
    let lines: Vec<Value> = stdout
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let access: Vec<&Value> = lines.iter().filter(|line| line["target"] == "access").collect();
    let [access] = access[..] else {
        panic!("want exactly one access line; {output}");
    };
    assert_eq!(access["status"], 503, "{output}");
    assert_eq!(access["request_id"], REQUEST_ID, "{output}");
    let metrics: Vec<&Value> = lines.iter().filter(|line| line.get("_aws").is_some()).collect();
    let [metrics] = metrics[..] else {
        panic!("want exactly one metrics line; {output}");
    };
    assert_eq!(metrics["request_id"], REQUEST_ID, "{output}");
    assert_eq!(metrics["Outcome"], "unavailable", "{output}");
    assert_eq!(metrics["Route"], FUNCTION, "{output}");
}

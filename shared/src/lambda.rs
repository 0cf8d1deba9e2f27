//! The entry point every Lambda function runs, and the panic guard the
//! local API shares with it.
//!
//! Everything a function writes must be a JSON line with a `level`: Lambda
//! counts a line without one as INFO, so at an application log level of
//! WARN or above a plain-text line (Rust's panic message, `main`'s
//! `Error: ...` after a failed start-up) would be dropped, and with it the
//! only trace of the failure. So a panic is logged by a hook through the
//! same subscriber as everything else, a failed start-up is logged before
//! the process exits, and `main` never returns an error for Rust to print.
//!
//! The guard relies on panics unwinding (the release profile says
//! `panic = "unwind"`, which cargo-lambda would otherwise replace with
//! `"abort"`): a panicking request then gets the envelope's 500
//! instead of API Gateway's bare `{"message":"Internal Server Error"}`.
//!
//! The function takes its event as JSON ([`respond`]) and reads it itself
//! ([`Request::from_event`]), so an event that is not an HTTP API event is
//! answered with the envelope's 400, not failed in the runtime (which API
//! Gateway would turn into its bare 502).

use std::convert::Infallible;
use std::future::Future;
use std::panic::{AssertUnwindSafe, PanicHookInfo};
use std::process::ExitCode;
use std::time::Instant;

use aws_lambda_events::apigw::ApiGatewayV2httpResponse;
use aws_lambda_events::encodings::Body;
use aws_lambda_events::http::Method;
use aws_lambda_events::http::header::SET_COOKIE;
use futures_util::FutureExt as _;
use lambda_runtime::{LambdaEvent, service_fn};
use serde_json::Value;
use tracing::Instrument;

use crate::config::ConfigError;
use crate::envelope;
use crate::error::ApiError;
use crate::handler::{AccessEntry, access_log, update_record_as};
use crate::records::Resource;
use crate::request::request_id;
use crate::store::Store;
use crate::{App, Request, Response, auth, logging, metrics};

/// The whole of a function's `main`: a single-threaded Tokio runtime
/// driving [`run`].
///
/// One thread because an instance serves one invocation at a time and has a
/// fraction of a CPU. On a multi-threaded runtime the handler runs on the
/// main thread while the connections' I/O is polled on worker threads, so
/// every read from the Runtime API or DynamoDB is a wake-up across threads
/// (a futex round trip, a scheduler hop); under Lambda's CPU quota, shared
/// by all threads of the instance, those hops also draw on the quota from
/// more than one CPU. BENCHMARKS.md, "Runtime", has the measurements.
/// Blocking work the SDK hands off (`spawn_blocking`, e.g. a DNS lookup)
/// still gets Tokio's blocking threads.
pub fn main<R: Resource>() -> ExitCode {
    match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime.block_on(run::<R>()),
        Err(error) => {
            logging::init();
            tracing::error!(%error, "start-up failed: no async runtime");
            ExitCode::FAILURE
        }
    }
}

/// Runs the function for records of kind `R` until the Lambda runtime
/// stops: logging and the panic hook first, then the app, then one
/// [`handle`] per invocation. Returns failure (after logging why) if the
/// app cannot start or the runtime fails.
pub async fn run<R: Resource>() -> ExitCode {
    logging::init();
    install_panic_hook();
    let Some(app) = started(App::from_env::<R>().await) else {
        return ExitCode::FAILURE;
    };
    let app = &app;
    let served = lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        Ok::<_, Infallible>(respond::<R, _>(app, event.payload, event.context).await)
    }))
    .await;
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(%error, "Lambda runtime stopped");
            ExitCode::FAILURE
        }
    }
}

/// The start-up step of [`run`]: the app, or `None` after logging why there
/// is none as a JSON ERROR line.
pub fn started<S>(app: Result<App<S>, ConfigError>) -> Option<App<S>> {
    app.inspect_err(|error| tracing::error!(%error, "start-up failed"))
        .ok()
}

/// One invocation: the API Gateway HTTP API (payload 2.0) `event` read
/// into a request, handled, and the response in the form API Gateway
/// expects back. An event that cannot be read as an HTTP request is
/// answered 400 `invalid_request`, in the envelope like everything else.
pub async fn respond<R: Resource, S: Store>(
    app: &App<S>,
    event: Value,
    context: lambda_runtime::Context,
) -> ApiGatewayV2httpResponse {
    let span = logging::request_span(&context.request_id);
    respond_in_span::<R, S>(app, event, context)
        .instrument(span)
        .await
}

async fn respond_in_span<R: Resource, S: Store>(
    app: &App<S>,
    event: Value,
    context: lambda_runtime::Context,
) -> ApiGatewayV2httpResponse {
    let response = match Request::from_event(event, context.clone()) {
        Ok(request) => handle::<R, S>(app, request).await,
        Err(error) => {
            let started = Instant::now();
            let response = envelope::failure(&error, &context.request_id);
            access_log(&AccessEntry {
                method: "-",
                route: R::ROUTE,
                principal: None,
                key: None,
                response: &response,
                latency: started.elapsed(),
                request_id: &context.request_id,
            });
            record_metrics::<R, S>(app, &response, started, metrics::first_request());
            response
        }
    };
    event_response(response)
}

/// A response in the form API Gateway's HTTP API takes back from a function.
pub fn event_response(response: Response) -> ApiGatewayV2httpResponse {
    let (parts, body) = response.into_parts();
    let mut reply = ApiGatewayV2httpResponse::default();
    reply.status_code = i64::from(parts.status.as_u16());
    reply.cookies = parts
        .headers
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok().map(str::to_owned))
        .collect();
    reply.headers = parts.headers;
    reply.headers.remove(SET_COOKIE);
    (reply.body, reply.is_base64_encoded) = match body {
        Body::Empty => (None, false),
        Body::Text(text) => (Some(Body::Text(text)), false),
        binary => (Some(binary), true),
    };
    reply
}

/// One update of a record of kind `R`, guarded: a panic anywhere in it
/// becomes a 500 envelope carrying the request id.
pub async fn handle<R: Resource, S: Store>(app: &App<S>, request: Request) -> Response {
    let method = request.method().clone();
    let request_id = request_id(&request);
    let principal = auth::principal(&request);
    let started = Instant::now();
    let cold_start = metrics::first_request();
    let handler = update_record_as::<R, S>(app, request, cold_start);
    let guarded = guard(R::ROUTE, &method, principal.as_deref(), &request_id, handler);
    // The guard's own lines, too, carry the request's id.
    let (response, panicked) = guarded.instrument(logging::request_span(&request_id)).await;
    if panicked {
        // The handler's own metrics line was never written.
        record_metrics::<R, S>(app, &response, started, cold_start);
    }
    response
}

/// The metrics line of a request the handler did not finish.
fn record_metrics<R: Resource, S: Store>(
    app: &App<S>,
    response: &Response,
    started: Instant,
    cold_start: bool,
) {
    metrics::record(
        &app.settings.metrics_namespace,
        &metrics::Measurement {
            route: R::FUNCTION,
            status: response.status().as_u16(),
            latency: started.elapsed(),
            calls: metrics::Calls::default(),
            cold_start,
        },
    );
}

/// Awaits `handler`; if it panics, answers the 500 envelope and writes the
/// access-log line the handler could not (and says it panicked). The panic
/// itself is logged by the hook [`install_panic_hook`] installs.
pub async fn guard(
    route: &str,
    method: &Method,
    principal: Option<&str>,
    request_id: &str,
    handler: impl Future<Output = Response>,
) -> (Response, bool) {
    let started = Instant::now();
    // AssertUnwindSafe holds because nothing a request touches outlives it
    // in a half-written state: the settings are immutable, the store's
    // client is built for concurrent use, and the panicked future is
    // dropped, never polled again.
    match AssertUnwindSafe(handler).catch_unwind().await {
        Ok(response) => (response, false),
        Err(_) => {
            // The hook has logged the panic; this line ties it to the
            // request id the caller sees in the envelope.
            tracing::error!(route, request_id, "request panicked; answered 500");
            let response = envelope::failure(&ApiError::Internal, request_id);
            access_log(&AccessEntry {
                method: method.as_str(),
                route,
                principal,
                key: None,
                response: &response,
                latency: started.elapsed(),
                request_id,
            });
            (response, true)
        }
    }
}

/// Replaces Rust's panic message on stderr, which is plain text, with an
/// ERROR event through the installed subscriber, naming where the panic was
/// raised.
///
/// The message is logged only when it is a literal (`panic!("...")`): a
/// formatted one may carry request data (the standard library's own
/// messages quote the string a bad slice was taken of, which could be an
/// `api_key`), and secrets never reach a log line.
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(log_panic));
}

fn log_panic(info: &PanicHookInfo<'_>) {
    let message = info
        .payload()
        .downcast_ref::<&'static str>()
        .copied()
        .unwrap_or("(withheld: a formatted panic message may quote request data)");
    let location = info
        .location()
        .map(|location| format!("{}:{}", location.file(), location.line()))
        .unwrap_or_default();
    tracing::error!(panic = message, location, "panicked");
}

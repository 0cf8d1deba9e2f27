//! The entry point every Lambda function runs: logging and the panic hook,
//! start-up, the event read as JSON ([`respond`]) and the response.
//! Every line must be JSON with a `level` (Lambda drops a plain-text line
//! above INFO), so a panic or a failed start-up is logged, never printed:
//! docs/operations.md, Logs. The panic guard ([`crate::handler::serve`])
//! needs the release profile's `panic = "unwind"` (Cargo.toml says why).

use std::convert::Infallible;
use std::panic::PanicHookInfo;
use std::process::ExitCode;

use aws_lambda_events::apigw::ApiGatewayV2httpResponse;
use aws_lambda_events::encodings::Body;
use aws_lambda_events::http::header::SET_COOKIE;
use lambda_runtime::{LambdaEvent, service_fn};
use serde_json::Value;

use crate::apigw::Request;
use crate::config::ConfigError;
use crate::handler::serve;
use crate::records::Resource;
use crate::store::Store;
use crate::{App, Response, logging, metrics};

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
/// [`respond`] per invocation. Returns failure (after logging why) if the
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
/// into a request and served ([`crate::handler::serve`]), and the response
/// in the form API Gateway expects back. An event that cannot be read as an
/// HTTP request is answered 400 `invalid_request`, in the envelope like
/// everything else.
pub async fn respond<R: Resource, S: Store>(
    app: &App<S>,
    event: Value,
    context: lambda_runtime::Context,
) -> ApiGatewayV2httpResponse {
    let cold_start = metrics::first_request();
    let request_id = context.request_id.clone();
    let request = Request::from_event(event, context);
    event_response(serve::<R, S>(app, request, &request_id, cold_start).await)
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

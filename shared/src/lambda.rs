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
//! The function reads its event itself ([`respond`]) rather than through
//! `lambda_http::run`, whose conversion of an event into a request unwraps
//! and expects (a URL built from `Host` and `X-Forwarded-Proto`, the raw
//! query, a base64 body): a value there that it cannot parse would panic
//! before any guard of ours runs, and API Gateway would answer its bare
//! 502. Here the event is read, the values that conversion cannot take are
//! repaired or refused (400 `invalid_request`), and the conversion runs
//! under a guard, so every event gets an envelope.

use std::any::Any;
use std::convert::Infallible;
use std::future::Future;
use std::panic::{AssertUnwindSafe, PanicHookInfo};
use std::pin::{Pin, pin};
use std::process::ExitCode;
use std::task::{Context, Poll};
use std::time::Instant;

use base64::Engine as _;
use lambda_http::aws_lambda_events::apigw::{ApiGatewayV2httpRequest, ApiGatewayV2httpResponse};
use lambda_http::http::header::{HOST, SET_COOKIE};
use lambda_http::http::{HeaderName, Method};
use lambda_http::request::LambdaRequest;
use lambda_http::{Body, LambdaEvent, RequestExt, service_fn};
use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use serde_json::Value;
use tracing::Instrument;
use url::Url;

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
    context: lambda_http::Context,
) -> ApiGatewayV2httpResponse {
    let span = logging::request_span(&context.request_id);
    respond_in_span::<R, S>(app, event, context)
        .instrument(span)
        .await
}

async fn respond_in_span<R: Resource, S: Store>(
    app: &App<S>,
    event: Value,
    context: lambda_http::Context,
) -> ApiGatewayV2httpResponse {
    let response = match request_from_event(event, context.clone()) {
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

/// `X-Forwarded-Proto`: read by `lambda_http` as the URL's scheme.
const FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");

/// What `http::Uri` refuses in a query, percent-encoded so a raw query
/// API Gateway passed on verbatim still forms a request line. `%` stays:
/// the query's own escapes must survive unchanged.
const QUERY_ESCAPES: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'<')
    .add(b'>')
    .add(b'\\')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}');

/// The request `lambda_http` makes of a payload 2.0 `event`, with the
/// values its conversion would panic on dealt with first:
///
/// - a `Host` or `X-Forwarded-Proto` that does not form a URL with the
///   path is dropped (the handlers never read the URL's scheme or host;
///   API Gateway routed on them already);
/// - a raw query's bytes a request line cannot carry are percent-encoded;
/// - a body flagged base64 that is not base64 is refused.
///
/// The conversion still runs under `catch_unwind`, so a case not foreseen
/// here is a 400 as well, never a panic out of the function.
pub fn request_from_event(event: Value, context: lambda_http::Context) -> Result<Request, ApiError> {
    let mut event: ApiGatewayV2httpRequest =
        serde_json::from_value(event).map_err(|_| ApiError::BadRequest)?;
    if let Some(query) = &event.raw_query_string {
        event.raw_query_string = Some(escape_query(query));
    }
    // Each step drops one value the URL is built from, until it builds.
    let fallbacks: [fn(&mut ApiGatewayV2httpRequest); 3] = [
        |event| drop(event.headers.remove(FORWARDED_PROTO)),
        |event| drop(event.headers.remove(HOST)),
        |event| event.request_context.domain_name = None,
    ];
    let mut fallbacks = fallbacks.iter();
    while !forms_uri(&event) {
        let Some(fallback) = fallbacks.next() else {
            return Err(ApiError::BadRequest);
        };
        fallback(&mut event);
    }
    if event.is_base64_encoded
        && let Some(body) = &event.body
        && base64::engine::general_purpose::STANDARD.decode(body).is_err()
    {
        return Err(ApiError::BadRequest);
    }
    let request = std::panic::catch_unwind(AssertUnwindSafe(|| {
        Request::from(LambdaRequest::ApiGatewayV2(event))
    }))
    .map_err(|_| ApiError::BadRequest)?;
    Ok(request.with_lambda_context(context))
}

/// `query` with the ASCII characters a request line cannot carry
/// percent-encoded. Other characters stay as they are: `http::Uri` takes
/// them in a query, and encoding each as three bytes could push a long
/// query past its length limit.
fn escape_query(query: &str) -> String {
    let mut escaped = String::with_capacity(query.len());
    let mut buffer = [0; 4];
    for c in query.chars() {
        if c.is_ascii() {
            escaped.extend(utf8_percent_encode(c.encode_utf8(&mut buffer), QUERY_ESCAPES));
        } else {
            escaped.push(c);
        }
    }
    escaped
}

/// Whether `lambda_http` can build the request's URI from `event`, the
/// way its conversion does: the path with the stage in front (unless the
/// stage is `$default` or `AWS_LAMBDA_HTTP_IGNORE_STAGE_IN_PATH` is set),
/// behind `X-Forwarded-Proto`'s scheme and the `Host` header's (or the
/// domain name's) host, parsed and written out as a WHATWG URL, then the
/// raw query; and the result must still parse as an `http::Uri` (a host
/// such as `a}b` is a URL host, but no URI's) and keep the path (a host
/// such as `h/x?` parses, but moves the path).
fn forms_uri(event: &ApiGatewayV2httpRequest) -> bool {
    let raw_path = event.raw_path.as_deref().unwrap_or_default();
    let path = match event.request_context.stage.as_deref() {
        _ if std::env::var_os("AWS_LAMBDA_HTTP_IGNORE_STAGE_IN_PATH").is_some() => raw_path.to_owned(),
        None | Some("$default") => raw_path.to_owned(),
        Some(stage) if raw_path.starts_with(&format!("/{stage}/")) => raw_path.to_owned(),
        Some(stage) => format!("/{stage}{raw_path}"),
    };
    let Ok(relative) = Url::parse(&format!("http://localhost{path}")) else {
        return false;
    };
    let host = event
        .headers
        .get(HOST)
        .and_then(|value| value.to_str().ok())
        .or(event.request_context.domain_name.as_deref());
    let mut uri = match host {
        None => relative.path().to_owned(),
        Some(host) => {
            let scheme = event
                .headers
                .get(FORWARDED_PROTO)
                .and_then(|value| value.to_str().ok())
                .unwrap_or("https");
            let Ok(url) = Url::parse(&format!("{scheme}://{host}{path}")) else {
                return false;
            };
            if url.path() != relative.path()
                || url.query() != relative.query()
                || url.fragment() != relative.fragment()
            {
                return false;
            }
            url.to_string()
        }
    };
    if let Some(query) = event.raw_query_string.as_deref().filter(|q| !q.is_empty()) {
        uri.push('?');
        uri.push_str(query);
    }
    lambda_http::http::Uri::try_from(uri).is_ok()
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
    match CatchUnwind(pin!(handler)).await {
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

/// A future that turns a panic while polling `F` into `Err`.
///
/// `AssertUnwindSafe` holds because nothing a request touches outlives it
/// in a half-written state: the settings are immutable, the store's client
/// is built for concurrent use, and the panicked future is dropped, never
/// polled again.
struct CatchUnwind<F>(F);

impl<F: Future + Unpin> Future for CatchUnwind<F> {
    type Output = Result<F::Output, Box<dyn Any + Send>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = &mut self.0;
        match std::panic::catch_unwind(AssertUnwindSafe(|| Pin::new(inner).poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(output)) => Poll::Ready(Ok(output)),
            Err(payload) => Poll::Ready(Err(payload)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(host: &str, proto: Option<&str>, raw_query: &str) -> Value {
        let mut headers = json!({"host": host, "content-type": "application/json"});
        if let Some(proto) = proto {
            headers["x-forwarded-proto"] = json!(proto);
        }
        json!({
            "version": "2.0",
            "routeKey": "PUT /api/agent-server/models/{id}",
            "rawPath": "/api/agent-server/models/x",
            "rawQueryString": raw_query,
            "headers": headers,
            "requestContext": {
                "http": {"method": "PUT", "path": "/api/agent-server/models/x", "protocol": "HTTP/1.1", "sourceIp": "192.0.2.1", "userAgent": "t"},
                "domainName": "api.example.com",
                "stage": "$default",
                "requestId": "r",
            },
            "pathParameters": {"id": "x"},
            "isBase64Encoded": false,
            "body": "{}",
        })
    }

    fn converts(event: Value) -> Result<Request, ApiError> {
        request_from_event(event, lambda_http::Context::default())
    }

    #[test]
    fn every_query_character_forms_a_request() {
        for code in (0u32..0x300).chain([0xFFFD, 0x1F600]) {
            let Some(c) = char::from_u32(code) else { continue };
            let query = format!("project_id=a{c}b&{c}=%zz%2{c}");
            let request = converts(event("api.example.com", None, &query));
            assert!(request.is_ok(), "{code:#x}");
        }
    }

    #[test]
    fn a_host_or_scheme_that_forms_no_url_is_dropped_not_fatal() {
        for (host, proto) in [
            ("api.example.com", Some("1nvalid")),
            ("api.example.com", Some("https, http")),
            ("api.example.com", Some("")),
            ("a b", None),
            ("[::1", Some("https")),
            ("api.example.com:99999999", None),
            ("", Some("https")),
            ("h/x?", None),
            ("h#", None),
            ("u@h", Some("http")),
        ] {
            let request = converts(event(host, proto, "project_id=p"));
            let request = request.unwrap_or_else(|error| panic!("{host:?} {proto:?}: {error}"));
            assert_eq!(
                request.uri().path(),
                "/api/agent-server/models/x",
                "{host:?} {proto:?}"
            );
            assert_eq!(request.uri().query(), Some("project_id=p"));
        }
    }

    #[test]
    fn a_long_query_of_non_ascii_text_converts() {
        // 22,000 two-byte characters: percent-encoded they would pass
        // http::Uri's 65,534-byte limit.
        let query = format!("project_id=p&x={}", "é".repeat(22_000));
        let request = converts(event("api.example.com", None, &query));
        let request = request.unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(request.uri().query(), Some(query.as_str()));
        let spaced = converts(event("api.example.com", None, "project_id=p&q=a b"));
        assert_eq!(
            spaced
                .ok()
                .and_then(|r| r.uri().query().map(str::to_owned))
                .as_deref(),
            Some("project_id=p&q=a%20b")
        );
    }

    #[test]
    fn bodies_flagged_base64_must_be_base64() {
        let mut bad = event("api.example.com", None, "");
        bad["isBase64Encoded"] = json!(true);
        bad["body"] = json!("not base64!");
        assert_eq!(converts(bad).err().map(|e| e.code()), Some("invalid_request"));
        let mut good = event("api.example.com", None, "");
        good["isBase64Encoded"] = json!(true);
        good["body"] = json!("e30=");
        assert_eq!(
            converts(good).map(|r| r.body().to_vec()).ok(),
            Some(b"{}".to_vec())
        );
    }

    #[test]
    fn an_event_that_is_not_an_http_event_is_refused() {
        let mut bad_method = event("api.example.com", None, "");
        bad_method["requestContext"]["http"]["method"] = json!("PU T");
        for value in [
            json!(null),
            json!("PUT"),
            json!([1]),
            json!({"rawPath": 7}),
            bad_method,
        ] {
            assert_eq!(
                converts(value.clone()).err().map(|e| e.code()),
                Some("invalid_request"),
                "{value}"
            );
        }
    }
}

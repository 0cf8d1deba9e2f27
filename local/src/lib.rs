//! The local API: the three update handlers served over HTTP, the way API
//! Gateway would call them, for running and testing without AWS or Docker.
//!
//! [`route`] maps a path to its function and does what API Gateway would:
//! authenticate ([`gateway`]), turn the request into the payload 2.0 event
//! ([`event`]), invoke the function ([`functions`]: in this process, or
//! the real binary under the Runtime Interface Emulator) and turn its
//! answer back into HTTP; [`serve`] is a plain HTTP/1.1 server around it.
//! Beside the routes it serves the API reference ([`docs`]: `/docs`,
//! `/openapi.yaml`), which the deployed API does not.

pub mod docs;
pub mod event;
pub mod functions;
pub mod gateway;
pub mod linger;
pub mod routes;
pub mod samples;
pub mod setup;

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_server_shared::envelope;
use agent_server_shared::handler::{AccessEntry, access_log};
use agent_server_shared::{App, Response, Store};
use aws_lambda_events::encodings::Body;
use aws_lambda_events::http;
use functions::Functions;
use gateway::Authorizer;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use lambda_runtime::Context;
use routes::Route as FunctionRoute;
use tokio::net::TcpListener;
use tracing::Instrument;

/// A request as the local API reads it off the socket, before API
/// Gateway's part turns it into the event a function takes.
pub type HttpRequest = http::Request<Body>;

/// Where every route lives.
pub const PREFIX: &str = "/api/agent-server/";

/// The largest request body read at all: Lambda's own payload limit. The
/// handlers apply the API's 64 KiB limit themselves, as they do on AWS; a
/// longer body reaches them cut short, still over that limit.
pub const MAX_REQUEST_BYTES: usize = 6 * 1024 * 1024;

/// The most header lines one request may carry (hyper's default is 100).
/// API Gateway's limit is 10 KiB of headers, not a count.
pub const MAX_HEADER_LINES: usize = 1024;

/// How long in-flight requests get to finish after Ctrl-C.
const DRAIN_TIME: Duration = Duration::from_secs(5);

/// What the local API serves: the functions, behind API Gateway's
/// authorizer.
#[derive(Debug)]
pub struct LocalApi<S> {
    /// The app every route's function runs with in this process.
    pub app: App<S>,
    /// How requests are authenticated.
    pub authorizer: Authorizer,
    /// Where the functions run.
    pub functions: Functions,
    /// The API reference, at paths no route uses.
    pub docs: docs::Docs,
}

/// Routes one request, its body already read, to its handler, as API
/// Gateway would ([`respond`] reads the body only once the function would
/// take it).
pub async fn route<S: Store>(local: &LocalApi<S>, request: HttpRequest) -> Response {
    let (parts, body) = request.into_parts();
    route_pending(
        local,
        HttpRequest::from_parts(parts, Body::Empty),
        Pending::Read(body),
    )
    .await
}

/// A request's body: read, or still on the connection.
enum Pending {
    Read(Body),
    Incoming(Incoming),
}

impl Pending {
    /// The body, at most [`MAX_REQUEST_BYTES`] of it read. A longer one is
    /// cut to one byte past the API's limit: what the function answers 413
    /// for, in its own order (after the record's key and the caller's grant).
    async fn read(self) -> Body {
        let incoming = match self {
            Self::Read(body) => return body,
            Self::Incoming(incoming) => incoming,
        };
        let mut bytes = Vec::new();
        let mut frames = Limited::new(incoming, MAX_REQUEST_BYTES);
        loop {
            match frames.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        bytes.extend_from_slice(&data);
                    }
                }
                Some(Err(error)) if error.is::<http_body_util::LengthLimitError>() => {
                    bytes.resize(agent_server_shared::request::MAX_BODY_BYTES + 1, b' ');
                    break;
                }
                // The client broke off: what arrived is the body (the
                // function answers it, most likely 400).
                Some(Err(_)) => break,
                None => break,
            }
        }
        if bytes.is_empty() {
            Body::Empty
        } else {
            Body::Binary(bytes)
        }
    }
}

/// Routes one request as API Gateway would: the reference's own paths
/// ([`docs`]) first, without a token (they are no route of the API); then
/// the route (404, 405), the authorizer (401), and the function. The body is
/// read only if the function will take it: a request its function refuses
/// for its record key or the caller's grant (400, 403) is answered without
/// it, so those come before 413 and before `100 Continue`.
async fn route_pending<S: Store>(local: &LocalApi<S>, request: HttpRequest, body: Pending) -> Response {
    let request_id = uuid::Uuid::new_v4().to_string();
    let span = agent_server_shared::logging::request_span(&request_id, None);
    route_in_span(local, request, body, request_id)
        .instrument(span)
        .await
}

/// [`route_pending`], inside the request's span: every line it logs carries
/// the id.
async fn route_in_span<S: Store>(
    local: &LocalApi<S>,
    mut request: HttpRequest,
    body: Pending,
    request_id: String,
) -> Response {
    let started = Instant::now();
    let path = request.uri().path().to_string();
    if let Some(response) = local.docs.answer(request.method(), &path, &request_id) {
        log(&request, &response, started, &request_id);
        return response;
    }
    let Some((route, id)) =
        split_path(&path).and_then(|(collection, id)| Some((FunctionRoute::of_collection(collection)?, id)))
    else {
        return unrouted(&request, Unrouted::NoRoute, started, &request_id);
    };
    let method = request.method().clone();
    if !ROUTED_METHODS.contains(&method) {
        return unrouted(&request, Unrouted::Method, started, &request_id);
    }
    let projects_claim = &local.app.settings.projects_claim;
    let Ok(authorizer) = local.authorizer.context(request.headers(), projects_claim) else {
        let response = gateway::unauthorized();
        log(&request, &response, started, &request_id);
        return response;
    };
    let id = percent_encoding::percent_decode_str(id)
        .decode_utf8_lossy()
        .into_owned();
    let route_key = format!("{method} {}", route.template());
    let gateway = event::Gateway {
        route_key: &route_key,
        id: &id,
        authorizer: &authorizer,
        request_id: &request_id,
        time: chrono::Utc::now(),
    };
    let bodiless = event::of_request(&request, gateway);
    let event = if route.refuses_before_body(&local.app.settings, &bodiless) {
        bodiless
    } else {
        *request.body_mut() = body.read().await;
        event::of_request(&request, gateway)
    };
    let answer = match &local.functions {
        // The functions' own entry, event reading and guard included, so
        // a panic is a 500 envelope here exactly as on Lambda.
        Functions::InProcess => {
            let mut context = Context::default();
            context.request_id = request_id.clone();
            route.respond(&local.app, event, context).await
        }
        Functions::Emulated(emulators) => match emulators.invoke(route, &event).await {
            Ok(answer) => answer,
            Err(error) => {
                tracing::error!(%error, request_id, "invocation failed");
                let response = event::failure(error.status());
                log(&request, &response, started, &request_id);
                return response;
            }
        },
    };
    event::into_response(answer)
}

/// `/api/agent-server/{collection}/{id}` with a non-empty id.
fn split_path(path: &str) -> Option<(&str, &str)> {
    let (collection, id) = path.strip_prefix(PREFIX)?.split_once('/')?;
    (!id.is_empty() && !id.contains('/')).then_some((collection, id))
}

/// What the local API answers itself, before any function (on AWS, API
/// Gateway answers these on its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unrouted {
    /// No route serves the path: 404 `not_found`.
    NoRoute,
    /// The path exists, not for this method: 405 `method_not_allowed`.
    Method,
}

/// The methods each route accepts: `PUT` (a partial update) and `PATCH` (a
/// JSON Merge Patch), both served by the record kind's one function.
pub const ROUTED_METHODS: [http::Method; 2] = [http::Method::PUT, http::Method::PATCH];
/// The methods the routes accept, for `Allow` on a 405.
pub const ALLOWED_METHODS: &str = "PUT, PATCH";

impl Unrouted {
    /// The envelope of this answer.
    pub fn response(self, request_id: &str) -> Response {
        match self {
            Self::NoRoute => {
                envelope::error_envelope(404, "not_found", "No route for this path", None, request_id)
            }
            Self::Method => envelope::method_not_allowed(ALLOWED_METHODS, request_id),
        }
    }
}

fn unrouted(request: &HttpRequest, answer: Unrouted, started: Instant, request_id: &str) -> Response {
    let response = answer.response(request_id);
    log(request, &response, started, request_id);
    response
}

/// The access-log line of a request no function saw.
fn log(request: &HttpRequest, response: &Response, started: Instant, request_id: &str) {
    access_log(&AccessEntry {
        method: request.method().as_str(),
        route: request.uri().path(),
        principal: None,
        key: None,
        response,
        latency: started.elapsed(),
        request_id,
    });
}

/// Routes a hyper request (its body read only if its function will take
/// it) and turns the response back.
pub async fn respond<S: Store>(
    local: &LocalApi<S>,
    request: hyper::Request<Incoming>,
) -> hyper::Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    // A target with bytes HTTP does not allow there (non-ASCII: the `http`
    // crate takes them) never reaches a function: the bare 400 API
    // Gateway's HTTP layer would answer.
    if parts
        .uri
        .path_and_query()
        .is_some_and(|target| !target.as_str().is_ascii())
    {
        let mut bare = hyper::Response::new(Full::new(Bytes::new()));
        *bare.status_mut() = http::StatusCode::BAD_REQUEST;
        return bare;
    }
    let head = HttpRequest::from_parts(parts, Body::Empty);
    let response = route_pending(local, head, Pending::Incoming(body)).await;
    let (parts, body) = response.into_parts();
    let bytes = match body {
        Body::Empty => Bytes::new(),
        Body::Text(text) => Bytes::from(text),
        Body::Binary(bytes) => Bytes::from(bytes),
        // Body is non-exhaustive; the handlers only ever produce text.
        other => Bytes::copy_from_slice(other.as_ref()),
    };
    hyper::Response::from_parts(parts, Full::new(bytes))
}

/// Serves `local` on `listener` until `shutdown` resolves, then lets
/// in-flight requests finish (for a few seconds at most).
pub async fn serve<S: Store + 'static>(
    listener: TcpListener,
    local: Arc<LocalApi<S>>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(error) => {
                        tracing::warn!(%error, "accept failed");
                        continue;
                    }
                };
                let local = Arc::clone(&local);
                let service = hyper::service::service_fn(move |request| {
                    let local = Arc::clone(&local);
                    async move { Ok::<_, Infallible>(respond(&local, request).await) }
                });
                // hyper answers more than 100 header lines with a bare 431; API
                // Gateway takes as many as fit its 10 KiB of headers, so the
                // request reaches the function (a 101st If-Match line is its
                // 400 to give, in the envelope). An answer given before the
                // body was read closes by lingering, so the client reads it.
                let connection = http1::Builder::new()
                    .max_headers(MAX_HEADER_LINES)
                    .serve_connection(TokioIo::new(linger::Lingering::new(stream)), service);
                let connection = graceful.watch(connection);
                tokio::spawn(async move {
                    if let Err(error) = connection.await {
                        tracing::debug!(%error, "connection closed with an error");
                    }
                });
            }
            () = &mut shutdown => break,
        }
    }
    if tokio::time::timeout(DRAIN_TIME, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("in-flight requests did not finish in time");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn its_own_answers_are_envelopes() {
        let not_found = Unrouted::NoRoute.response("r");
        assert_eq!(not_found.status(), 404);
        let method = Unrouted::Method.response("r");
        assert_eq!(method.status(), 405);
        assert_eq!(method.headers()["allow"], "PUT, PATCH");
        let body: serde_json::Value = serde_json::from_slice(method.body().as_ref()).unwrap_or_default();
        assert_eq!(body["errorDetails"]["code"], "method_not_allowed");
        assert_eq!(body["status"], 405);
    }

    #[test]
    fn paths() {
        assert_eq!(
            split_path("/api/agent-server/models/abc"),
            Some(("models", "abc"))
        );
        assert_eq!(split_path("/api/agent-server/models/"), None);
        assert_eq!(split_path("/api/agent-server/models"), None);
        assert_eq!(split_path("/api/agent-server/models/a/b"), None);
        assert_eq!(split_path("/api/other/models/a"), None);
    }
}

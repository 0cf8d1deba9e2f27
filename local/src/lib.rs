//! The local API: the three update handlers served over HTTP, the way API
//! Gateway would call them, for running and testing without AWS or Docker.
//!
//! [`route`] maps a path to its function's handler and fills in what API
//! Gateway would (the `{id}` path parameter, the parsed query string, a
//! request id); [`serve`] is a plain HTTP/1.1 server around it.

pub mod samples;
pub mod setup;

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_server_shared::envelope;
use agent_server_shared::handler::access_log;
use agent_server_shared::{ApiError, App, Request, Response, Store};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use lambda_http::{Body, Context, RequestExt};
use tokio::net::TcpListener;

/// Where every route lives.
pub const PREFIX: &str = "/api/agent-server/";

/// The largest request body read at all: Lambda's own payload limit. The
/// handlers apply the API's 64 KiB limit themselves, as they do on AWS.
pub const MAX_REQUEST_BYTES: usize = 6 * 1024 * 1024;

/// How long in-flight requests get to finish after Ctrl-C.
const DRAIN_TIME: Duration = Duration::from_secs(5);

/// Routes one request to its handler, as API Gateway would.
pub async fn route<S: Store>(app: &App<S>, request: Request) -> Response {
    let started = Instant::now();
    let request_id = uuid::Uuid::new_v4().to_string();
    let path = request.uri().path().to_string();
    let Some((collection, id)) = split_path(&path) else {
        return unrouted(&request, ApiError::RouteNotFound, started, &request_id);
    };
    if !matches!(collection, "api-keys" | "mcp-servers" | "models") {
        return unrouted(&request, ApiError::RouteNotFound, started, &request_id);
    }
    if request.method() != lambda_http::http::Method::PUT {
        return unrouted(&request, ApiError::MethodNotAllowed, started, &request_id);
    }
    let query = parse_query(request.uri().query().unwrap_or_default());
    let id = percent_encoding::percent_decode_str(id)
        .decode_utf8_lossy()
        .into_owned();
    let mut context = Context::default();
    context.request_id = request_id;
    let request = request
        .with_path_parameters(HashMap::from([("id".to_string(), id)]))
        .with_query_string_parameters(query)
        .with_lambda_context(context);
    match collection {
        "api-keys" => update_api_key::handle(app, request).await,
        "mcp-servers" => update_mcp_server::handle(app, request).await,
        _ => update_model::handle(app, request).await,
    }
}

/// `/api/agent-server/{collection}/{id}` with a non-empty id.
fn split_path(path: &str) -> Option<(&str, &str)> {
    let (collection, id) = path.strip_prefix(PREFIX)?.split_once('/')?;
    (!id.is_empty() && !id.contains('/')).then_some((collection, id))
}

/// The query string as API Gateway hands it to `lambda_http`: every value
/// of a repeated name kept.
fn parse_query(raw: &str) -> HashMap<String, Vec<String>> {
    let mut query: HashMap<String, Vec<String>> = HashMap::new();
    for (name, value) in url::form_urlencoded::parse(raw.as_bytes()) {
        query
            .entry(name.into_owned())
            .or_default()
            .push(value.into_owned());
    }
    query
}

fn unrouted(request: &Request, error: ApiError, started: Instant, request_id: &str) -> Response {
    let response = envelope::failure(&error, request_id);
    access_log(
        request.method().as_str(),
        request.uri().path(),
        &response,
        started.elapsed(),
        request_id,
    );
    response
}

/// Reads a hyper request into `lambda_http`'s type, routes it, and turns
/// the response back.
pub async fn respond<S: Store>(
    app: &App<S>,
    request: hyper::Request<Incoming>,
) -> hyper::Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    let response = match Limited::new(body, MAX_REQUEST_BYTES).collect().await {
        Ok(collected) => {
            let bytes = collected.to_bytes();
            let body = if bytes.is_empty() {
                Body::Empty
            } else {
                Body::Binary(bytes.to_vec())
            };
            route(app, Request::from_parts(parts, body)).await
        }
        Err(_) => {
            let request = Request::from_parts(parts, Body::Empty);
            let request_id = uuid::Uuid::new_v4().to_string();
            unrouted(&request, ApiError::PayloadTooLarge, Instant::now(), &request_id)
        }
    };
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

/// Serves `app` on `listener` until `shutdown` resolves, then lets
/// in-flight requests finish (for a few seconds at most).
pub async fn serve<S: Store + 'static>(
    listener: TcpListener,
    app: Arc<App<S>>,
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
                let app = Arc::clone(&app);
                let service = hyper::service::service_fn(move |request| {
                    let app = Arc::clone(&app);
                    async move { Ok::<_, Infallible>(respond(&app, request).await) }
                });
                let connection = graceful.watch(http1::Builder::new().serve_connection(TokioIo::new(stream), service));
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

    #[test]
    fn repeated_query_names_keep_every_value() {
        let query = parse_query("project_id=a&x=1&project_id=b%20c");
        assert_eq!(query["project_id"], ["a", "b c"]);
        assert_eq!(query["x"], ["1"]);
    }
}

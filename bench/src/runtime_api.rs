//! A minimal Lambda Runtime API on loopback: `GET invocation/next`,
//! `POST invocation/{id}/response`, `POST invocation/{id}/error` and
//! `POST init/error`, one function process at a time.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::{Mutex, mpsc, watch};

const PREFIX: &str = "/2018-06-01/runtime/";

/// An event waiting to be handed to the function.
struct Pending {
    request_id: String,
    body: String,
    handed: tokio::sync::oneshot::Sender<Instant>,
}

/// What the function posted back.
struct Posted {
    request_id: String,
    error: bool,
    body: String,
    at: Instant,
}

/// The result of one invocation.
pub struct Outcome {
    /// Event handed out until the response was posted.
    pub latency: Duration,
    /// The response payload.
    pub body: String,
}

struct Shared {
    next_calls: mpsc::UnboundedSender<Instant>,
    events: Mutex<mpsc::UnboundedReceiver<Pending>>,
    posted: mpsc::UnboundedSender<Posted>,
    cancel: watch::Sender<u64>,
}

/// The running emulator and the harness's end of its channels.
pub struct RuntimeApi {
    address: SocketAddr,
    shared: Arc<Shared>,
    next_calls: Mutex<mpsc::UnboundedReceiver<Instant>>,
    events: mpsc::UnboundedSender<Pending>,
    posted: Mutex<mpsc::UnboundedReceiver<Posted>>,
}

impl RuntimeApi {
    /// Starts serving on a free loopback port.
    pub async fn start() -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let (next_tx, next_rx) = mpsc::unbounded_channel();
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let (posted_tx, posted_rx) = mpsc::unbounded_channel();
        let (cancel, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            next_calls: next_tx,
            events: Mutex::new(events_rx),
            posted: posted_tx,
            cancel,
        });
        let serving = Arc::clone(&shared);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let shared = Arc::clone(&serving);
                let service = hyper::service::service_fn(move |request| {
                    let shared = Arc::clone(&shared);
                    async move { Ok::<_, Infallible>(handle(&shared, request).await) }
                });
                tokio::spawn(async move {
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(Self {
            address,
            shared,
            next_calls: Mutex::new(next_rx),
            events: events_tx,
            posted: Mutex::new(posted_rx),
        })
    }

    /// `host:port`, for `AWS_LAMBDA_RUNTIME_API`.
    pub fn address(&self) -> String {
        self.address.to_string()
    }

    /// Forgets calls and waiters left by earlier processes, then waits for
    /// the next process's first `GET .../next` and returns when it came.
    pub async fn wait_for_next(&self, timeout: Duration) -> Result<Instant, String> {
        let mut calls = self.next_calls.lock().await;
        match tokio::time::timeout(timeout, calls.recv()).await {
            Ok(Some(at)) => Ok(at),
            Ok(None) => Err("runtime API stopped".into()),
            Err(_) => Err(format!("no GET /invocation/next within {timeout:?}")),
        }
    }

    /// Cancels a `GET .../next` still pending from a process that is gone,
    /// and drops its record, so the next process starts clean.
    pub async fn forget_process(&self) {
        self.shared.cancel.send_modify(|generation| *generation += 1);
        let mut calls = self.next_calls.lock().await;
        while calls.try_recv().is_ok() {}
    }

    /// Hands `event` to the function and waits for its response.
    pub async fn invoke(&self, event: &str, timeout: Duration) -> Result<Outcome, String> {
        let request_id = uuid::Uuid::new_v4().to_string();
        let (handed_tx, handed_rx) = tokio::sync::oneshot::channel();
        self.events
            .send(Pending {
                request_id: request_id.clone(),
                body: event.to_string(),
                handed: handed_tx,
            })
            .map_err(|_| "runtime API stopped".to_string())?;
        let handed = tokio::time::timeout(timeout, handed_rx)
            .await
            .map_err(|_| format!("the function did not ask for the event within {timeout:?}"))?
            .map_err(|_| "event dropped".to_string())?;
        let mut posted = self.posted.lock().await;
        loop {
            let reply = tokio::time::timeout(timeout, posted.recv())
                .await
                .map_err(|_| format!("no response within {timeout:?}"))?
                .ok_or("runtime API stopped")?;
            if reply.request_id != request_id {
                continue; // a late post from an earlier invocation
            }
            if reply.error {
                return Err(format!("the function reported an error: {}", reply.body));
            }
            // The next GET /next of this process is not an init.
            return Ok(Outcome {
                latency: reply.at - handed,
                body: reply.body,
            });
        }
    }
}

async fn handle(shared: &Shared, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let path = request
        .uri()
        .path()
        .strip_prefix(PREFIX)
        .unwrap_or_default()
        .to_string();
    let method = request.method().clone();
    match (method, path.as_str()) {
        (Method::GET, "invocation/next") => next(shared).await,
        (Method::POST, "init/error") => {
            let body = read(request).await;
            let _ = shared.posted.send(Posted {
                request_id: String::new(),
                error: true,
                body,
                at: Instant::now(),
            });
            reply(StatusCode::ACCEPTED, "{}")
        }
        (Method::POST, other) if other.starts_with("invocation/") => {
            let mut parts = other.trim_start_matches("invocation/").splitn(2, '/');
            let request_id = parts.next().unwrap_or_default().to_string();
            let error = parts.next() == Some("error");
            let body = read(request).await;
            let at = Instant::now();
            let _ = shared.posted.send(Posted {
                request_id,
                error,
                body,
                at,
            });
            reply(StatusCode::ACCEPTED, "{\"status\":\"OK\"}")
        }
        _ => reply(StatusCode::NOT_FOUND, "{}"),
    }
}

async fn next(shared: &Shared) -> Response<Full<Bytes>> {
    let mut cancelled = shared.cancel.subscribe();
    cancelled.mark_unchanged();
    let _ = shared.next_calls.send(Instant::now());
    let mut events = tokio::select! {
        events = shared.events.lock() => events,
        _ = cancelled.changed() => return reply(StatusCode::GONE, "{}"),
    };
    let pending = tokio::select! {
        pending = events.recv() => pending,
        _ = cancelled.changed() => return reply(StatusCode::GONE, "{}"),
    };
    let Some(pending) = pending else {
        return reply(StatusCode::GONE, "{}");
    };
    let deadline = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default() + Duration::from_secs(30);
    let mut response = Response::new(Full::new(Bytes::from(pending.body)));
    let headers = response.headers_mut();
    let header = |value: &str| {
        hyper::header::HeaderValue::from_str(value).unwrap_or(hyper::header::HeaderValue::from_static("x"))
    };
    headers.insert("content-type", header("application/json"));
    headers.insert("lambda-runtime-aws-request-id", header(&pending.request_id));
    headers.insert(
        "lambda-runtime-deadline-ms",
        header(&deadline.as_millis().to_string()),
    );
    headers.insert(
        "lambda-runtime-invoked-function-arn",
        header("arn:aws:lambda:us-east-1:123456789012:function:update-model"),
    );
    headers.insert(
        "lambda-runtime-trace-id",
        header("Root=1-6740b5d4-0123456789abcdef01234567;Sampled=0"),
    );
    let _ = pending.handed.send(Instant::now());
    response
}

async fn read(request: Request<Incoming>) -> String {
    let bytes = request
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn reply(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = status;
    response
}

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
//! The guard relies on panics unwinding (the release profile must not set
//! `panic = "abort"`): a panicking request then gets the envelope's 500
//! instead of API Gateway's bare `{"message":"Internal Server Error"}`.

use std::any::Any;
use std::convert::Infallible;
use std::future::Future;
use std::panic::{AssertUnwindSafe, PanicHookInfo};
use std::pin::{Pin, pin};
use std::process::ExitCode;
use std::task::{Context, Poll};
use std::time::Instant;

use lambda_http::http::Method;
use lambda_http::service_fn;

use crate::config::ConfigError;
use crate::envelope;
use crate::error::ApiError;
use crate::handler::{AccessEntry, access_log, update};
use crate::records::Resource;
use crate::request::request_id;
use crate::store::Store;
use crate::{App, Request, Response, auth, logging};

/// Runs the function for records of kind `R` until the Lambda runtime
/// stops: logging and the panic hook first, then the app, then one
/// [`handle`] per invocation. Returns failure (after logging why) if the
/// app cannot start or the runtime fails.
pub async fn run<R: Resource>() -> ExitCode {
    logging::init();
    install_panic_hook();
    let Some(app) = started(App::from_env().await) else {
        return ExitCode::FAILURE;
    };
    let app = &app;
    let served = lambda_http::run(service_fn(move |request: Request| async move {
        Ok::<_, Infallible>(handle::<R, _>(app, request).await)
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

/// One update of a record of kind `R`, guarded: a panic anywhere in it
/// becomes a 500 envelope carrying the request id.
pub async fn handle<R: Resource, S: Store>(app: &App<S>, request: Request) -> Response {
    let method = request.method().clone();
    let request_id = request_id(&request);
    let principal = auth::principal(&request).map(str::to_owned);
    let handler = update::<R, S>(app, request);
    guard(R::ROUTE, &method, principal.as_deref(), &request_id, handler).await
}

/// Awaits `handler`; if it panics, answers the 500 envelope and writes the
/// access-log line the handler could not. The panic itself is logged by
/// the hook [`install_panic_hook`] installs.
pub async fn guard(
    route: &str,
    method: &Method,
    principal: Option<&str>,
    request_id: &str,
    handler: impl Future<Output = Response>,
) -> Response {
    let started = Instant::now();
    match CatchUnwind(pin!(handler)).await {
        Ok(response) => response,
        Err(_) => {
            // The hook has logged the panic; this line ties it to the
            // request id the caller sees in the envelope.
            tracing::error!(route, request_id, "request panicked; answered 500");
            let response = envelope::failure(&ApiError::Internal, request_id);
            access_log(&AccessEntry {
                method: method.as_str(),
                route,
                principal,
                response: &response,
                latency: started.elapsed(),
                request_id,
            });
            response
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

//! The update every route runs: [`serve`], the one edge (span, panic
//! guard, access and metrics lines), around extract, authorize, validate,
//! the writes, envelope.

use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use futures_util::FutureExt as _;
use tracing::Instrument;

use crate::Response;
use crate::apigw::Request;
use crate::app::App;
use crate::auth::{Caller, Target};
use crate::budget::{Budget, TIME_BUDGET};
use crate::envelope;
use crate::error::ApiError;
use crate::item;
use crate::merge;
use crate::metrics::{self, Calls, Measurement};
use crate::patch;
use crate::records::Resource;
use crate::request::{self, idempotency};
use crate::store::{Key, Store};
use crate::writes;

/// Handles one update of a record of kind `R` ([`serve`]). Never fails:
/// every outcome, a database outage or a panic included, is an envelope.
pub async fn update_record<R: Resource, S: Store>(app: &App<S>, request: Request) -> Response {
    let request_id = request::request_id(&request);
    serve::<R, S>(app, Ok(request), &request_id, metrics::first_request()).await
}

/// The one edge every request of a function passes, from Lambda or from
/// the local API: inside the request's span, it answers an unreadable
/// event in the envelope, runs the update under a panic guard (a panic is a
/// 500 carrying the request id), and writes the request's access line and
/// metrics line, once each, whatever happened. `cold_start` is taken by the
/// caller before anything runs, so a request that panics still reports it.
///
/// Everything that can reject the request runs before the store is called,
/// so a rejected request costs no database call.
pub async fn serve<R: Resource, S: Store>(
    app: &App<S>,
    request: Result<Request, ApiError>,
    request_id: &str,
    cold_start: bool,
) -> Response {
    let span = crate::logging::request_span(request_id, Some(R::ROUTE));
    async {
        let started = Instant::now();
        let mut seen = Seen::default();
        let response = match &request {
            Err(error) => envelope::failure(error, request_id),
            Ok(request) => {
                seen.method = request.method().as_str();
                // AssertUnwindSafe holds because nothing a request touches
                // outlives it half-written: the settings are immutable, the
                // store's client is built for concurrent use, and the
                // panicked future is dropped, never polled again.
                let handled = AssertUnwindSafe(async {
                    let caller = Caller::of(request, &app.settings.projects_claim);
                    seen.principal.clone_from(&caller.principal);
                    apply::<R, S>(app, &caller, request, &mut seen).await
                })
                .catch_unwind()
                .await;
                match handled {
                    Ok(Ok(answered)) => {
                        let Answered {
                            record,
                            version,
                            written,
                            replayed,
                        } = answered;
                        let mut response =
                            envelope::success(R::UPDATED, record, &version, written.as_deref());
                        if replayed {
                            envelope::set_header(&mut response, envelope::IDEMPOTENT_REPLAYED, "true");
                        }
                        response
                    }
                    Ok(Err(error)) => envelope::failure(&error, request_id),
                    Err(_) => {
                        // The panic hook has logged the panic; this line ties
                        // it to the request id the caller sees.
                        tracing::error!(request_id, "request panicked; answered 500");
                        envelope::failure(&ApiError::Internal, request_id)
                    }
                }
            }
        };
        let latency = started.elapsed();
        access_log(&AccessEntry {
            method: seen.method,
            route: R::ROUTE,
            principal: seen.principal.as_deref(),
            key: seen.key.as_ref(),
            response: &response,
            latency,
            request_id,
        });
        metrics::record(
            &app.settings.metrics_namespace,
            &Measurement {
                route: R::FUNCTION,
                status: response.status().as_u16(),
                replayed: envelope::is_replayed(&response),
                latency,
                calls: seen.calls,
                cold_start,
            },
        );
        response
    }
    .instrument(span)
    .await
}

/// What a request's handling learned on the way, for its access and
/// metrics lines: the method and caller, the record's key once validated,
/// the time in each call.
#[derive(Debug)]
struct Seen<'a> {
    method: &'a str,
    principal: Option<String>,
    key: Option<Key>,
    calls: Calls,
}

impl Default for Seen<'_> {
    fn default() -> Self {
        Self {
            // An event that is not an HTTP request has no method.
            method: "-",
            principal: None,
            key: None,
            calls: Calls::default(),
        }
    }
}

/// What an update answers with: the record, its version (the `ETag`),
/// when it was written (`Last-Modified`), and whether it is a replay.
struct Answered<R> {
    record: R,
    version: String,
    written: Option<String>,
    replayed: bool,
}

/// Extract, authorize, validate, then one run of the write pipeline.
async fn apply<R: Resource, S: Store>(
    app: &App<S>,
    caller: &Caller,
    request: &Request,
    seen: &mut Seen<'_>,
) -> Result<Answered<R>, ApiError> {
    // The record's key first (400), then who may change it (403) whatever
    // the request holds, so a caller without a grant learns nothing of the
    // body rules; then the rest of the request (400, 413, 415). A request
    // refused either way costs no database call.
    let key = request::key(request, R::TABLE)?;
    seen.key = Some(key.clone());
    authorize(caller, &key)?;
    let preconditions = request::preconditions(request)?;
    let idempotency_key = request::idempotency_key(request)?;
    // `verify` only where the record kind can be verified: 400 elsewhere.
    let verify = request::verify(request, R::VERIFY_MODES)?;
    let kind = request::BodyKind::of(request);
    let body = request::json_body(request, kind)?;
    // Every AWS call shares one budget, bounded by the invocation's
    // deadline (a handshake's time on top when verifying); nothing reaches
    // the table unless every secret was sealed.
    let deadline = Budget::deadline_of(request.context());
    // A keyed write keeps its outcome, and a retry of it answers that.
    // A key is its caller's: a caller with no name can own none.
    let keyed = match (idempotency_key, crate::auth::identity(request)) {
        (None, _) => None,
        (Some(_), None) => return Err(idempotency::unnamed_caller()),
        (Some(idempotency_key), Some(identity)) => Some(writes::Keyed {
            kept_key: idempotency::kept_key(R::FUNCTION, &identity, R::ROUTE, &key, &idempotency_key),
            fingerprint: idempotency::fingerprint(
                request,
                (R::ROUTE, &key),
                &body,
                (R::FIELDS, &preconditions),
                verify,
            ),
            published: crate::logging::escaped(idempotency_key.as_str(), 3 * idempotency::MAX_KEY_CHARS),
        }),
    };
    let intent = writes::Intent {
        key,
        preconditions,
        principal: caller.principal.clone(),
        budget: if verify.is_some() {
            Budget::start_with(deadline, TIME_BUDGET + crate::mcp::HANDSHAKE_BUDGET)
        } else {
            Budget::start(deadline)
        },
        verify,
        keyed,
    };
    let patch;
    let write = match kind {
        request::BodyKind::Update => {
            let set = patch::parse::<R>(&body, app.settings.policy)?;
            log_fields(set.iter().map(|(name, _)| *name));
            writes::Write::Put(set, Vec::new())
        }
        request::BodyKind::MergePatch => {
            patch = merge::parse::<R>(&body, app.settings.policy)?;
            log_fields(patch.fields());
            // `{}` changes nothing: the record as it is (unless verifying).
            // A patch that merges no object is the partial update a PUT
            // makes (its nulls remove): no read is needed, but for one below.
            match patch.as_update() {
                _ if patch.is_empty() => writes::Write::Nothing,
                // Read first when what it sets may leave a verification's
                // values as they were. A removal alone is written unread, as a
                // PUT's, and counts as a change (no stored value need open).
                Some((set, _)) if writes::compares_verified::<R>(set.iter().map(|(name, _)| *name)) => {
                    writes::Write::Merge(&patch)
                }
                Some((set, remove)) => writes::Write::Put(set, remove),
                None => writes::Write::Merge(&patch),
            }
        }
    };
    let (outcome, calls) = writes::Pipeline::<R, S>::new(app, intent).run(write).await;
    seen.calls = calls;
    let writes::Outcome { item, replayed } = outcome?;
    let written = item::string(&item, "updated_at").ok().flatten();
    let answered = item::version_tag(&item).and_then(|version| {
        Ok(Answered {
            record: R::from_item(&item)?,
            version,
            written,
            replayed,
        })
    });
    answered.map_err(|error| {
        tracing::error!(%error, "stored item is malformed");
        ApiError::Internal
    })
}

/// Whether `caller` may change the record `key`: a 403 otherwise.
fn authorize(caller: &Caller, key: &Key) -> Result<(), ApiError> {
    caller.authorize(match &key.project_id {
        Some(project) => Target::Project(project),
        None => Target::Unscoped,
    })
}

/// Whether a function of record kind `R` refuses `request` before it reads
/// a body: for its record key (400) or for the caller's grant (403). The
/// local API asks this before it takes a body, as API Gateway's
/// authorizer is heard before a body is read; the function then gives that
/// answer itself.
pub fn refused_before_body<R: Resource>(settings: &crate::config::Settings, request: &Request) -> bool {
    let caller = Caller::of(request, &settings.projects_claim);
    request::key(request, R::TABLE)
        .and_then(|key| authorize(&caller, &key))
        .is_err()
}

/// The DEBUG line naming the fields a request writes: names only, values may
/// be secrets. Built only when DEBUG is on (tracing evaluates fields after
/// its level check).
fn log_fields(fields: impl Iterator<Item = &'static str>) {
    tracing::debug!(fields = ?fields.collect::<Vec<_>>(), "writing");
}

/// What the access log says of one request.
#[derive(Debug)]
pub struct AccessEntry<'a> {
    /// The HTTP method.
    pub method: &'a str,
    /// The route template, or the path where no route matched.
    pub route: &'a str,
    /// Who called ([`Caller::principal`], in its logged form); never a
    /// token.
    pub principal: Option<&'a str>,
    /// The record's key, once validated (normalised UUIDs, never raw
    /// query text); `None` when the request was refused before.
    pub key: Option<&'a Key>,
    /// The answer (its status is logged).
    pub response: &'a Response,
    /// Time from the request's arrival to its answer.
    pub latency: Duration,
    /// The request id the caller can quote.
    pub request_id: &'a str,
}

/// The most characters of a route the access log keeps (an unmatched
/// path is the caller's, up to the size of a request line).
pub const MAX_LOGGED_ROUTE_CHARS: usize = 256;

/// The one log line per request: never a body, a header value, a query or
/// a token. The record's `id` and `project_id` join it to the change event
/// and to any other line of the request; `replayed: true` marks an answer
/// kept for an `Idempotency-Key` (nothing was written).
pub fn access_log(entry: &AccessEntry<'_>) {
    let status = entry.response.status().as_u16();
    let replayed = envelope::is_replayed(entry.response).then_some(true);
    let latency_ms = entry.latency.as_secs_f64() * 1000.0;
    // An unmatched path is the caller's: shown in the principal's form.
    let route = crate::logging::escaped(entry.route, MAX_LOGGED_ROUTE_CHARS);
    tracing::info!(
        target: "access",
        method = entry.method,
        route = route.as_str(),
        principal = entry.principal,
        id = entry.key.map(|key| key.id.as_str()),
        project_id = entry.key.and_then(|key| key.project_id.as_deref()),
        status,
        replayed,
        latency_ms,
        request_id = entry.request_id,
        "request"
    );
}

#[cfg(test)]
mod tests {
    #[test]
    fn routes_are_logged_as_visible_ascii() {
        let logged = |route| crate::logging::escaped(route, super::MAX_LOGGED_ROUTE_CHARS);
        assert_eq!(
            logged("/api/agent-server/models/{id}"),
            "/api/agent-server/models/{id}"
        );
        assert_eq!(
            logged("/a\u{202e}b\nc d%0A\"\\"),
            "/a%E2%80%AEb%0Ac%20d%250A%22%5C"
        );
    }
}

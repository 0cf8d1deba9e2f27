//! The update pipeline every route runs: extract, validate, one store
//! call, envelope, one access-log line.

use std::time::{Duration, Instant};

use chrono::{SecondsFormat, Utc};
use tracing::Instrument;

use crate::app::App;
use crate::auth::{Caller, Target};
use crate::budget::Budget;
use crate::envelope;
use crate::error::ApiError;
use crate::item::{self, Item};
use crate::metrics::{self, Calls, Measurement};
use crate::patch;
use crate::records::{Resource, Sealing};
use crate::request;
use crate::seal::{self, DataKey, SealError, Sealed};
use crate::store::{ExpectedKey, Key, Store, StoreError, Update};
use crate::{Request, Response};
use lambda_http::RequestExt;

/// Handles one update of a record of kind `R`. Never fails: every outcome,
/// including a database outage, is an envelope.
///
/// Everything that can reject the request runs before the store is called,
/// so a rejected request costs no database call.
pub async fn update_record<R: Resource, S: Store>(app: &App<S>, request: Request) -> Response {
    update_record_as::<R, S>(app, request, metrics::first_request()).await
}

/// [`update_record`], with the process's cold-start flag already taken:
/// the Lambda entry takes it before the handler runs, so that a request
/// that panics still reports it.
pub(crate) async fn update_record_as<R: Resource, S: Store>(
    app: &App<S>,
    request: Request,
    cold_start: bool,
) -> Response {
    let span = crate::logging::request_span(&request::request_id(&request));
    update_in_span::<R, S>(app, request, cold_start)
        .instrument(span)
        .await
}

/// [`update_record_as`], inside the request's span.
async fn update_in_span<R: Resource, S: Store>(app: &App<S>, request: Request, cold_start: bool) -> Response {
    let started = Instant::now();
    let request_id = request::request_id(&request);
    let caller = Caller::of(&request, &app.settings.projects_claim);
    let mut seen = Seen::default();
    let response = match apply::<R, S>(app, &caller, &request, &mut seen).await {
        Ok((record, version, written)) => envelope::success(R::UPDATED, record, &version, written.as_deref()),
        Err(error) => envelope::failure(&error, &request_id),
    };
    let latency = started.elapsed();
    access_log(&AccessEntry {
        method: request.method().as_str(),
        route: R::ROUTE,
        principal: caller.principal.as_deref(),
        key: seen.key.as_ref(),
        response: &response,
        latency,
        request_id: &request_id,
    });
    metrics::record(
        &app.settings.metrics_namespace,
        &Measurement {
            route: R::FUNCTION,
            status: response.status().as_u16(),
            latency,
            calls: seen.calls,
            cold_start,
        },
    );
    response
}

/// What a request's handling learned on the way, for its access and
/// metrics lines: the record's key once validated, the time in each call.
#[derive(Debug, Default)]
struct Seen {
    key: Option<Key>,
    calls: Calls,
}

async fn apply<R: Resource, S: Store>(
    app: &App<S>,
    caller: &Caller,
    request: &Request,
    seen: &mut Seen,
) -> Result<(R, String, Option<String>), ApiError> {
    // The record's key first (400), then who may change it (403) whatever
    // the request holds, so a caller without a grant learns nothing of the
    // body rules; then the rest of the request (400, 413, 415). A request
    // refused either way costs no database call.
    let key = request::key(request, R::TABLE)?;
    seen.key = Some(key.clone());
    caller.authorize(match &key.project_id {
        Some(project) => Target::Project(project),
        None => Target::Unscoped,
    })?;
    let preconditions = request::preconditions(request)?;
    let body = request::json_body(request, request::BodyKind::of(request))?;
    let mut set = patch::parse::<R>(&body, app.settings.policy)?;
    // Field names only: values may be secrets. The list is built only when
    // DEBUG is on (tracing evaluates fields after its level check).
    tracing::debug!(
        route = R::ROUTE,
        fields = ?set.iter().map(|(name, _)| *name).collect::<Vec<_>>(),
        "writing"
    );
    // Every AWS call shares one budget, bounded by the invocation's
    // deadline; nothing reaches the table unless every secret was sealed.
    let budget = Budget::start(request.lambda_context_ref().and_then(Budget::deadline_of));
    // A constant per record kind: the functions whose records seal nothing
    // never reach the KMS client, so their binaries do not carry it.
    let sealed = if R::SEALS {
        let started = Instant::now();
        let sealed =
            seal::seal_request(app.sealer.as_ref(), R::FIELDS, &key, &mut set, budget.remaining()).await;
        // Time in KMS, if it was called: a value sealed, or KMS's own
        // failure (not a missing sealer).
        if matches!(
            &sealed,
            Ok(Sealed { called_kms: true, .. }) | Err(SealError::Unavailable(_) | SealError::Refused(_))
        ) {
            seen.calls.kms = Some(started.elapsed());
        }
        sealed.map_err(|error| sealing_failed(R::ROUTE, error))?
    } else {
        Sealed::default()
    };
    let update = Update {
        table: R::TABLE,
        key,
        set,
        expected_versions: preconditions.if_match,
        none_match: preconditions.if_none_match,
        unmodified_before: preconditions.unmodified_before,
        now: timestamp(),
        write_id: Update::new_write_id(),
        fields: R::FIELDS,
        updated_by: caller.principal.clone(),
        budget: budget.remaining(),
        data_key: sealed.key_use,
    };
    let item = write::<R, S>(app, update, sealed.data_key, budget, seen).await?;
    let written = item::string(&item, "updated_at").ok().flatten();
    let stored = item::version_tag(&item).and_then(|version| Ok((R::from_item(&item)?, version, written)));
    stored.map_err(|error| {
        tracing::error!(route = R::ROUTE, %error, "stored item is malformed");
        ApiError::Internal
    })
}

/// Writes `update` and returns the item as written, its sealed values open
/// (with `data_key`, the key the request sealed them under, if any).
///
/// A record whose sealed values the request does not replace is shown
/// with them opened, which takes its data key: the first try expects none
/// (a record with no sealed values is one `UpdateItem`, no KMS call); if
/// the record has one, the refused try returned it, KMS opens it (the
/// request's one KMS call) and the second try expects exactly that key, so
/// the values returned are the ones it opens. A key replaced in between is
/// a 409: opening another would be a second KMS call.
async fn write<R: Resource, S: Store>(
    app: &App<S>,
    mut update: Update,
    mut data_key: Option<DataKey>,
    budget: Budget,
    seen: &mut Seen,
) -> Result<Item, ApiError> {
    let key = update.key.clone();
    loop {
        let may_open = data_key.is_none()
            && update
                .data_key
                .as_ref()
                .is_some_and(|key_use| key_use.expected == ExpectedKey::Absent);
        let retry = may_open.then(|| update.clone());
        let started = Instant::now();
        let written = app.store.update(update).await;
        seen.calls.dynamodb = Some(seen.calls.dynamodb.unwrap_or_default() + started.elapsed());
        match written {
            Ok(mut item) => {
                seal::open_item(R::FIELDS, &key, &mut item, data_key.as_ref()).map_err(|error| {
                    tracing::error!(route = R::ROUTE, %error, "stored item is malformed");
                    ApiError::Internal
                })?;
                return Ok(item);
            }
            Err(StoreError::DataKeyChanged(stored)) => {
                let (Some(mut retry), Some(attribute)) = (retry, update_key_attribute::<R>()) else {
                    tracing::warn!(
                        route = R::ROUTE,
                        "the record's data key changed during the update"
                    );
                    return Err(ApiError::Conflict);
                };
                let started = Instant::now();
                let opened = seal::open_stored_key(
                    app.sealer.as_ref(),
                    attribute.0,
                    attribute.1,
                    &key,
                    &stored,
                    budget.remaining(),
                )
                .await;
                seen.calls.kms = Some(started.elapsed());
                let opened = opened.map_err(|error| sealing_failed(R::ROUTE, error))?;
                let Some(opened) = opened else {
                    tracing::error!(route = R::ROUTE, "stored data key is not binary: nothing written");
                    return Err(ApiError::Internal);
                };
                if let Some(key_use) = &mut retry.data_key {
                    key_use.expected = ExpectedKey::Is(opened.sealed().to_vec());
                }
                retry.budget = budget.remaining();
                data_key = Some(opened);
                update = retry;
            }
            Err(error) => return Err(store_failed(R::ROUTE, R::NOUN, error)),
        }
    }
}

/// The field of `R` whose values are sealed under a data key, and the
/// attribute holding that key.
fn update_key_attribute<R: Resource>() -> Option<(&'static str, &'static str)> {
    R::FIELDS.iter().find_map(|field| match field.sealing() {
        Some(Sealing::Values { key }) => Some((field.name, key)),
        _ => None,
    })
}

/// The answer to a write the store refused, with the log line that explains
/// a 5xx.
fn store_failed(route: &str, noun: &'static str, error: StoreError) -> ApiError {
    match error {
        StoreError::NotFound => ApiError::NotFound(noun),
        StoreError::VersionMismatch { current } => ApiError::PreconditionFailed {
            current_version: current,
        },
        StoreError::DataKeyChanged(_) => ApiError::Conflict,
        StoreError::Unavailable(reason) => {
            tracing::warn!(route, %reason, "database unavailable");
            ApiError::Unavailable
        }
        StoreError::Unreadable(reason) => {
            tracing::error!(route, %reason, "stored item left unchanged: it is not one this service wrote");
            ApiError::Internal
        }
        StoreError::Internal(reason) => {
            tracing::error!(route, %reason, "database error");
            ApiError::Internal
        }
    }
}

/// The answer to a secret that could not be sealed or opened, with the one
/// log line that explains it: the KMS code, never the key material or the
/// value.
fn sealing_failed(route: &str, error: SealError) -> ApiError {
    match error {
        SealError::Unavailable(reason) => {
            tracing::warn!(route, %reason, "KMS unavailable: nothing written");
            ApiError::Unavailable
        }
        SealError::Refused(_) | SealError::NotConfigured => {
            tracing::error!(route, %error, "sealing or opening a secret failed: nothing written");
            ApiError::Internal
        }
    }
}

/// Now, as stored: RFC 3339, UTC, millisecond precision, `Z` suffix.
pub fn timestamp() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true)
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
/// and to any other line of the request.
pub fn access_log(entry: &AccessEntry<'_>) {
    let status = entry.response.status().as_u16();
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
        latency_ms,
        request_id = entry.request_id,
        "request"
    );
}

#[cfg(test)]
mod tests {
    use super::timestamp;

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

    #[test]
    fn timestamps_have_milliseconds_and_z() {
        let now = timestamp();
        assert_eq!(now.len(), "2026-11-21T14:55:00.123Z".len(), "{now}");
        assert!(now.ends_with('Z'));
        assert_eq!(&now[19..20], ".");
        assert!(chrono::DateTime::parse_from_rfc3339(&now).is_ok());
    }
}

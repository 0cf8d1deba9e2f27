//! The one JSON envelope every response body uses:
//! `{"error", "message", "data", "status", "errorDetails"}`.

use aws_lambda_events::encodings::Body;
use aws_lambda_events::http::{HeaderValue, StatusCode, header};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::Response;
use crate::error::{ApiError, FieldError};

/// Seconds a client should wait before retrying a 503.
pub const RETRY_AFTER_SECONDS: u32 = 1;

#[derive(Serialize)]
struct Envelope<'a, T: Serialize> {
    error: bool,
    message: &'a str,
    data: Option<T>,
    status: u16,
    #[serde(rename = "errorDetails")]
    error_details: Details<'a>,
}

#[derive(Serialize, Default)]
struct Details<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fields: Option<&'a [FieldError]>,
    #[serde(rename = "requestId", skip_serializing_if = "Option::is_none")]
    request_id: Option<&'a str>,
    /// Where a `verify=true` handshake failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    stage: Option<&'static str>,
    /// The HTTP status the MCP server answered, where that was the failure.
    #[serde(rename = "httpStatus", skip_serializing_if = "Option::is_none")]
    http_status: Option<u16>,
    /// How a server's tools moved against its pin (`verify=pinned`).
    #[serde(skip_serializing_if = "Option::is_none")]
    added: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    removed: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    changed: Option<&'a [String]>,
}

/// An `ETag` value (a strong validator) for a stored `version`, given as
/// its decimal text.
pub fn etag(version: impl std::fmt::Display) -> String {
    format!("\"{version}\"")
}

/// A 200 envelope carrying `data`, with `ETag` set from the record's
/// version and `Last-Modified` from its `updated_at` (stored format), when
/// that reads as a time.
pub fn success<T: Serialize>(message: &str, data: T, version: &str, updated_at: Option<&str>) -> Response {
    let body = Envelope {
        error: false,
        message,
        data: Some(data),
        status: 200,
        error_details: Details::default(),
    };
    let mut response = render(200, &body);
    set_header(&mut response, header::ETAG, &etag(version));
    if let Some(date) = updated_at.and_then(http_date) {
        set_header(&mut response, header::LAST_MODIFIED, &date);
    }
    response
}

/// An RFC 3339 timestamp as an RFC 9110 HTTP-date (whole seconds).
pub fn http_date(timestamp: &str) -> Option<String> {
    let time = chrono::DateTime::parse_from_rfc3339(timestamp).ok()?;
    let time = std::time::SystemTime::from(time.with_timezone(&chrono::Utc));
    Some(httpdate::fmt_http_date(time))
}

/// The error envelope for `error`. `request_id` is reported on a 500 and a
/// 503, where it is the one thing an operator needs to find the log line
/// that explains it (every line a request causes carries it).
pub fn failure(error: &ApiError, request_id: &str) -> Response {
    let message = error.to_string();
    let mut details = Details {
        code: Some(error.code()),
        fields: error.fields(),
        ..Details::default()
    };
    match error {
        ApiError::McpUnverified { stage, http_status } | ApiError::KeyUnverified { stage, http_status } => {
            details.stage = Some(stage);
            details.http_status = *http_status;
        }
        ApiError::McpToolsChanged {
            added,
            removed,
            changed,
        } => {
            details.added = Some(added);
            details.removed = Some(removed);
            details.changed = Some(changed);
        }
        _ => {}
    }
    let mut response = error_details(error.status(), &message, request_id, details);
    match error {
        ApiError::Unavailable => set_header(
            &mut response,
            header::RETRY_AFTER,
            &RETRY_AFTER_SECONDS.to_string(),
        ),
        ApiError::PreconditionFailed { current_version } => {
            set_header(&mut response, header::ETAG, &etag(current_version))
        }
        // RFC 5789: the patch format this API applies, whichever method was
        // refused (a client that sent PUT may learn it can PATCH).
        ApiError::UnsupportedMediaType(_) => set_header(
            &mut response,
            header::HeaderName::from_static("accept-patch"),
            crate::request::MERGE_PATCH_TYPE,
        ),
        _ => {}
    }
    response
}

/// The 405 envelope of a path that takes only `allow`, with its `Allow`.
pub fn method_not_allowed(allow: &str, request_id: &str) -> Response {
    let mut response = error_envelope(405, "method_not_allowed", "Method not allowed", None, request_id);
    set_header(&mut response, header::ALLOW, allow);
    response
}

/// An error envelope from its parts: what [`failure`] renders for an
/// [`ApiError`], and what the local API renders for its own answers (an
/// unknown path, another method), which no function gives.
pub fn error_envelope(
    status: u16,
    code: &'static str,
    message: &str,
    fields: Option<&[FieldError]>,
    request_id: &str,
) -> Response {
    let details = Details {
        code: Some(code),
        fields,
        ..Details::default()
    };
    error_details(status, message, request_id, details)
}

/// An error envelope: status and message, and its details (code, field
/// problems, what a verification found), with the request id on a 500 or
/// 503.
fn error_details(status: u16, message: &str, request_id: &str, details: Details<'_>) -> Response {
    let body: Envelope<'_, Value> = Envelope {
        error: true,
        message,
        data: None,
        status,
        error_details: Details {
            request_id: matches!(status, 500 | 503).then_some(request_id),
            ..details
        },
    };
    render(status, &body)
}

fn render<T: Serialize>(status: u16, envelope: &T) -> Response {
    // Serialising these types cannot fail (string keys, no custom impls); the
    // fallback only keeps the promise of a JSON body if that ever changes.
    let body = serde_json::to_string(envelope).unwrap_or_else(|_| {
        let mut fallback = Map::new();
        fallback.insert("error".into(), Value::Bool(true));
        fallback.insert("message".into(), "Internal server error".into());
        fallback.insert("data".into(), Value::Null);
        fallback.insert("status".into(), 500.into());
        fallback.insert("errorDetails".into(), serde_json::json!({"code": "internal"}));
        Value::Object(fallback).to_string()
    });
    let mut response = Response::new(Body::Text(body));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    // Configuration responses must never be served from a shared cache.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The header a replayed outcome carries (`true`): the answer is the one
/// kept under the request's `Idempotency-Key`, and nothing was written.
pub const IDEMPOTENT_REPLAYED: header::HeaderName = header::HeaderName::from_static("idempotent-replayed");

/// Whether `response` answers a retry with the outcome kept for its
/// `Idempotency-Key` (it carries `Idempotent-Replayed: true`): what the
/// access and metrics lines call a replay.
pub fn is_replayed(response: &Response) -> bool {
    response
        .headers()
        .get(IDEMPOTENT_REPLAYED)
        .is_some_and(|value| value == "true")
}

/// Sets (replaces) the header `name` of `response` to `value`, if it is a
/// valid header value.
pub fn set_header(response: &mut Response, name: header::HeaderName, value: &str) {
    if let Ok(value) = HeaderValue::from_str(value) {
        response.headers_mut().insert(name, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body_json(response: &Response) -> Value {
        serde_json::from_slice(response.body().as_ref()).unwrap_or(Value::Null)
    }

    #[test]
    fn success_has_the_five_keys_and_an_etag() {
        let response = success(
            "Model updated successfully",
            serde_json::json!({"id": "x"}),
            "7",
            Some("2026-11-21T14:55:00.123Z"),
        );
        let body = body_json(&response);
        assert_eq!(
            body,
            serde_json::json!({"error": false, "message": "Model updated successfully",
                "data": {"id": "x"}, "status": 200, "errorDetails": {}})
        );
        assert_eq!(response.headers()["etag"], "\"7\"");
        assert_eq!(response.headers()["content-type"], "application/json");
        assert_eq!(
            response.headers()["last-modified"],
            "Sat, 21 Nov 2026 14:55:00 GMT"
        );
    }

    #[test]
    fn every_error_status_matches_the_body() {
        let errors = [
            ApiError::InvalidId(vec![FieldError::new("id", "invalid_uuid", "must be a UUID")]),
            ApiError::Validation(vec![FieldError::new("name", "too_long", "x")]),
            ApiError::EmptyUpdate,
            ApiError::NotFound("Model"),
            ApiError::PreconditionFailed {
                current_version: "3".into(),
            },
            ApiError::PayloadTooLarge {
                limit: crate::request::MAX_BODY_BYTES,
            },
            ApiError::UnsupportedMediaType(crate::error::Unsupported::NotJson),
            ApiError::Unavailable,
            ApiError::Internal,
        ];
        for error in errors {
            let response = failure(&error, "req-1");
            let body = body_json(&response);
            assert_eq!(response.status().as_u16(), error.status());
            assert_eq!(body["status"], error.status());
            assert_eq!(body["error"], true);
            assert_eq!(body["data"], Value::Null);
            assert_eq!(body["errorDetails"]["code"], error.code());
            assert_eq!(body.as_object().map(|o| o.len()), Some(5));
        }
    }

    #[test]
    fn headers_that_belong_to_an_error() {
        assert_eq!(failure(&ApiError::Unavailable, "r").headers()["retry-after"], "1");
        let stale = failure(
            &ApiError::PreconditionFailed {
                current_version: "4".into(),
            },
            "r",
        );
        assert_eq!(stale.headers()["etag"], "\"4\"");
        for unsupported in [
            crate::error::Unsupported::NotJson,
            crate::error::Unsupported::PatchType,
            crate::error::Unsupported::NotMergePatch,
            crate::error::Unsupported::Coding,
        ] {
            let refused = failure(&ApiError::UnsupportedMediaType(unsupported), "r");
            assert_eq!(refused.headers()["accept-patch"], "application/merge-patch+json");
        }
    }

    #[test]
    fn only_internal_errors_carry_the_request_id() {
        let internal = body_json(&failure(&ApiError::Internal, "req-9"));
        assert_eq!(internal["errorDetails"]["requestId"], "req-9");
        let not_found = body_json(&failure(&ApiError::NotFound("Model"), "req-9"));
        assert!(not_found["errorDetails"].get("requestId").is_none());
        assert_eq!(not_found["message"], "Model not found");
    }
}

//! Reading a request: the record key and the JSON body here; the
//! preconditions ([`mod@preconditions`]) and media types ([`media`]) in their
//! own modules.
//!
//! Works on the request as API Gateway (HTTP API, payload 2.0) delivers it
//! ([`Request`]): the `{id}` path parameter, the query string parsed from
//! `rawQueryString` (so a repeated `project_id` is visible), and the body
//! already base64-decoded.

pub mod idempotency;
pub mod media;
pub mod preconditions;

use serde_json::{Map, Value};

use crate::apigw::Request;
use crate::error::{ApiError, FieldError, Unsupported};
use crate::ids::parse_uuid;
use crate::json;
use crate::records::VerifyMode;
use crate::store::{Key, Table};
pub use idempotency::{IdempotencyKey, idempotency_key};
pub use media::{BodyKind, MERGE_PATCH_TYPE, PATCH_TYPES};
pub use preconditions::{MAX_IF_MATCH_TAGS, Preconditions, preconditions};

/// Largest accepted body.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// The key of the record the request addresses.
pub fn key(request: &Request, table: Table) -> Result<Key, ApiError> {
    let id = record_id(request);
    let project_id = table.scoped_by_project().then(|| project_id(request)).transpose();
    match (id, project_id) {
        (Ok(id), Ok(project_id)) => Ok(Key { project_id, id }),
        // Both wrong: the id's code, and both problems listed.
        (Err(id), Err(ApiError::InvalidProjectId(project))) => Err(ApiError::InvalidId(vec![id, project])),
        (Err(id), _) => Err(ApiError::InvalidId(vec![id])),
        (Ok(_), Err(error)) => Err(error),
    }
}

fn record_id(request: &Request) -> Result<String, FieldError> {
    let raw = request.path_parameter("id").unwrap_or_default();
    parse_uuid(raw).ok_or_else(|| FieldError::new("id", "invalid_uuid", "must be a UUID"))
}

fn project_id(request: &Request) -> Result<String, ApiError> {
    let invalid = |code, message| ApiError::InvalidProjectId(FieldError::new("project_id", code, message));
    match request.query_values("project_id").as_slice() {
        [value] if !value.is_empty() => {
            parse_uuid(value).ok_or_else(|| invalid("invalid_uuid", "must be a UUID"))
        }
        [] | [_] => Err(invalid("required", "the project_id query parameter is required")),
        _ => Err(invalid("repeated", "must be given exactly once")),
    }
}

/// What the request's `verify` asks: one of `modes` (the route's), at most
/// once; 400 otherwise.
pub fn verify(request: &Request, modes: &[VerifyMode]) -> Result<Option<VerifyMode>, ApiError> {
    let invalid = |code, message: String| ApiError::InvalidVerify(FieldError::new("verify", code, message));
    match request.query_values("verify").as_slice() {
        [] => Ok(None),
        [_, _, ..] => Err(invalid("repeated", "must be given at most once".into())),
        [_] if modes.is_empty() => Err(invalid(
            "invalid_value",
            "this route takes no verify: it has nothing to verify".into(),
        )),
        [value] => modes
            .iter()
            .find(|mode| mode.as_str() == value)
            .copied()
            .map(Some)
            .ok_or_else(|| {
                let values: Vec<&str> = modes.iter().map(|mode| mode.as_str()).collect();
                invalid("invalid_value", format!("must be one of {}", values.join(", ")))
            }),
    }
}

/// A request's body read as a JSON object. Its `Debug` shows the field
/// names only: from the moment it is read, a body may hold secrets
/// (`api_key`, header values) that no `{:?}` may show.
#[derive(Clone, PartialEq)]
pub struct Body(Map<String, Value>);

impl std::ops::Deref for Body {
    type Target = Map<String, Value>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::fmt::Debug for Body {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_map()
            .entries(self.0.keys().map(|name| (name, "…")))
            .finish()
    }
}

/// The body as a JSON object, after the `Content-Encoding`,
/// `Content-Type` (as `kind` takes it) and size checks.
pub fn json_body(request: &Request, kind: BodyKind) -> Result<Body, ApiError> {
    if !media::is_identity(request) {
        return Err(ApiError::UnsupportedMediaType(Unsupported::Coding));
    }
    let content_type = request
        .headers()
        .get(aws_lambda_events::http::header::CONTENT_TYPE);
    let json_type = match content_type {
        None => None,
        Some(content_type) => match content_type.to_str().ok().filter(|text| media::is_json(text)) {
            Some(text) => Some(media::essence(text)),
            None if kind == BodyKind::MergePatch => {
                return Err(ApiError::UnsupportedMediaType(Unsupported::NotMergePatch));
            }
            None => return Err(ApiError::UnsupportedMediaType(Unsupported::NotJson)),
        },
    };
    match (kind, json_type.as_deref()) {
        (BodyKind::MergePatch, Some(MERGE_PATCH_TYPE)) => {}
        (BodyKind::MergePatch, _) => return Err(ApiError::UnsupportedMediaType(Unsupported::NotMergePatch)),
        (BodyKind::Update, Some(essence)) if PATCH_TYPES.contains(&essence) => {
            return Err(ApiError::UnsupportedMediaType(Unsupported::PatchType));
        }
        (BodyKind::Update, _) => {}
    }
    let body = request.body();
    if body.len() > MAX_BODY_BYTES {
        return Err(ApiError::PayloadTooLarge {
            limit: MAX_BODY_BYTES,
        });
    }
    json::parse_object(body).map(Body)
}

/// The id that ties a response to its log lines: the Lambda request id.
pub fn request_id(request: &Request) -> String {
    match request.context().request_id.as_str() {
        "" => "unknown".into(),
        id => id.into(),
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    use super::*;
    use serde_json::json;

    /// A PUT event with these query pairs, header lines and body.
    pub(crate) fn request(query: &[(&str, &str)], headers: &[(&str, &str)], body: &str) -> Request {
        let raw_query = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(query)
            .finish();
        let mut lines = Map::new();
        for (name, value) in headers {
            let line = lines.entry(name.to_string()).or_insert_with(|| json!([]));
            line.as_array_mut().unwrap().push(json!(value));
        }
        let event = json!({
            "rawQueryString": raw_query,
            "headers": lines,
            "requestContext": {"http": {"method": "PUT"}},
            "pathParameters": {"id": "3F1C2A9E-7B4D-4E8A-9C21-5D6E7F8A9B01"},
            "body": body,
        });
        Request::from_event(event, lambda_runtime::Context::default()).unwrap()
    }

    /// `result` with its error as the code a client reads (the field's
    /// code where there is one), to compare with expected values.
    pub(crate) fn code<T>(result: Result<T, ApiError>) -> Result<T, String> {
        result.map_err(|error| match error {
            ApiError::InvalidProjectId(field)
            | ApiError::InvalidIfMatch(field)
            | ApiError::InvalidIfNoneMatch(field)
            | ApiError::InvalidJson(field) => field.code.to_string(),
            error => error.code().to_string(),
        })
    }

    /// The failure with this code.
    pub(crate) fn fails<T>(code: &str) -> Result<T, String> {
        Err(code.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::{code, fails, request};
    use super::*;

    #[test]
    fn project_id_cases() {
        let uuid = "8A4B2C1D-3E5F-4A6B-8C7D-9E0F1A2B3C4D";
        assert_eq!(
            project_id(&request(&[("project_id", uuid)], &[], ""))
                .ok()
                .as_deref(),
            Some("8a4b2c1d-3e5f-4a6b-8c7d-9e0f1a2b3c4d")
        );
        assert_eq!(code(project_id(&request(&[], &[], ""))), fails("required"));
        assert_eq!(
            code(project_id(&request(&[("project_id", "")], &[], ""))),
            fails("required")
        );
        assert_eq!(
            code(project_id(&request(&[("project_id", "nope")], &[], ""))),
            fails("invalid_uuid")
        );
        assert_eq!(
            code(project_id(&request(
                &[("project_id", uuid), ("project_id", uuid)],
                &[],
                ""
            ))),
            fails("repeated")
        );
    }

    #[test]
    fn ids_are_normalised() {
        let key = key(&request(&[], &[], ""), Table::ApiKeys).ok();
        assert_eq!(
            key.map(|k| k.id).as_deref(),
            Some("3f1c2a9e-7b4d-4e8a-9c21-5d6e7f8a9b01")
        );
    }

    #[test]
    fn a_bad_id_and_a_bad_project_id_are_both_listed() {
        let with = |id: &str, query: &str| {
            let event = serde_json::json!({
                "rawQueryString": query,
                "requestContext": {"http": {"method": "PUT"}},
                "pathParameters": {"id": id},
            });
            let request = Request::from_event(event, lambda_runtime::Context::default()).unwrap();
            match key(&request, Table::Models) {
                Err(error) => {
                    let fields = error.fields().unwrap_or_default();
                    (
                        error.code(),
                        fields.iter().map(|f| f.field.clone()).collect::<Vec<_>>(),
                    )
                }
                Ok(_) => ("ok", Vec::new()),
            }
        };
        let uuid = "8a4b2c1d-3e5f-4a6b-8c7d-9e0f1a2b3c4d";
        assert_eq!(
            with("bad", "project_id=bad"),
            ("invalid_id", vec!["id".into(), "project_id".into()])
        );
        assert_eq!(
            with("bad", ""),
            ("invalid_id", vec!["id".into(), "project_id".into()])
        );
        assert_eq!(
            with("bad", &format!("project_id={uuid}")),
            ("invalid_id", vec!["id".into()])
        );
        assert_eq!(
            with(uuid, "project_id=bad"),
            ("invalid_project_id", vec!["project_id".into()])
        );
        assert_eq!(with(uuid, &format!("project_id={uuid}")), ("ok", Vec::new()));
    }

    #[test]
    fn body_size_limit() {
        let fits = format!("{{\"name\":\"{}\"}}", "a".repeat(MAX_BODY_BYTES - 11));
        assert_eq!(fits.len(), MAX_BODY_BYTES);
        assert!(json_body(&request(&[], &[], &fits), BodyKind::Update).is_ok());
        let over = format!("{{\"name\":\"{}\"}}", "a".repeat(MAX_BODY_BYTES - 10));
        assert_eq!(
            code(json_body(&request(&[], &[], &over), BodyKind::Update)),
            fails("payload_too_large")
        );
    }
}

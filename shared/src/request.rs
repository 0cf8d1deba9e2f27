//! Reading a request: the record key, `If-Match`, and the JSON body.
//!
//! Works on the request as API Gateway (HTTP API, payload 2.0) delivers it
//! ([`Request`]): the `{id}` path parameter, the query string parsed from
//! `rawQueryString` (so a repeated `project_id` is visible), and the body
//! already base64-decoded.

use aws_lambda_events::http::{Method, header};
use serde_json::{Map, Value};

use crate::Request;
use crate::error::{ApiError, FieldError, Unsupported};
use crate::ids::parse_uuid;
use crate::json;
#[cfg(doc)]
use crate::store::Update;
use crate::store::{Key, NoneMatch, Table};

/// Largest accepted body.
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// Most entity tags one `If-Match` may list (DynamoDB's `IN` limit).
pub const MAX_IF_MATCH_TAGS: usize = 100;

/// The key of the record the request addresses.
pub fn key(request: &Request, table: Table) -> Result<Key, ApiError> {
    let id = record_id(request)?;
    let project_id = if table.scoped_by_project() {
        Some(project_id(request)?)
    } else {
        None
    };
    Ok(Key { project_id, id })
}

fn record_id(request: &Request) -> Result<String, ApiError> {
    let raw = request.path_parameter("id").unwrap_or_default();
    parse_uuid(raw)
        .ok_or_else(|| ApiError::InvalidId(FieldError::new("id", "invalid_uuid", "must be a UUID")))
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

/// What a request's preconditions (RFC 9110 section 13) ask of the stored
/// record; all are checked inside the one conditional write.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preconditions {
    /// The versions `If-Match` accepts ([`Update::expected_versions`]).
    pub if_match: Option<Vec<u64>>,
    /// What `If-None-Match` refuses ([`Update::none_match`]).
    pub if_none_match: Option<NoneMatch>,
    /// `If-Unmodified-Since` as the stored-format timestamp the record's
    /// `updated_at` must be earlier than ([`Update::unmodified_before`]).
    pub unmodified_before: Option<String>,
}

/// Reads `If-Match`, `If-None-Match` and `If-Unmodified-Since`.
///
/// `If-Match`: `None` without the header or with `*` (the record need only
/// exist), else the versions its strong entity tags name. Weak and
/// non-numeric tags never match a version, so a list of only those is
/// `Some(vec![])`, which no stored record satisfies.
///
/// `If-None-Match`: `*`, or the versions its tags name compared weakly
/// (`W/"3"` names version 3), as RFC 9110 13.1.2 says.
///
/// `If-Unmodified-Since`: ignored when `If-Match` is present or when it is
/// not a valid HTTP-date (RFC 9110 13.1.4); the record must not have been
/// written after it, to the second.
///
/// Several header lines are one comma-separated list (RFC 9110 5.3), so
/// `*` is valid only as the whole of a single line; inside a list it is
/// malformed. The tag limit is checked while reading, so a huge header
/// costs no more than its first [`MAX_IF_MATCH_TAGS`] + 1 tags.
pub fn preconditions(request: &Request) -> Result<Preconditions, ApiError> {
    let if_match = match tag_list(request, &header::IF_MATCH, false, ApiError::InvalidIfMatch)? {
        None | Some(TagList::Any) => None,
        Some(TagList::Versions(versions)) => Some(versions),
    };
    let if_none_match = match tag_list(
        request,
        &header::IF_NONE_MATCH,
        true,
        ApiError::InvalidIfNoneMatch,
    )? {
        None => None,
        Some(TagList::Any) => Some(NoneMatch::Any),
        Some(TagList::Versions(versions)) => Some(NoneMatch::Versions(versions)),
    };
    let unmodified_before = if request.headers().contains_key(header::IF_MATCH) {
        None
    } else {
        unmodified_before(request)
    };
    Ok(Preconditions {
        if_match,
        if_none_match,
        unmodified_before,
    })
}

/// The stored-format timestamp one second past `If-Unmodified-Since`, if it
/// is one valid HTTP-date: `updated_at` earlier than it means "not modified
/// since", at the date's one-second precision.
fn unmodified_before(request: &Request) -> Option<String> {
    let mut lines = request.headers().get_all(header::IF_UNMODIFIED_SINCE).iter();
    let (Some(line), None) = (lines.next(), lines.next()) else {
        return None;
    };
    let text = line.to_str().ok()?.trim_matches([' ', '\t']);
    // IMF-fixdate first with chrono, which reads years before 1970 too (a
    // valid HTTP-date, earlier than every write); httpdate for the two
    // obsolete forms.
    let date = match chrono::NaiveDateTime::parse_from_str(text, "%a, %d %b %Y %H:%M:%S GMT") {
        Ok(date) => date.and_utc(),
        Err(_) => chrono::DateTime::<chrono::Utc>::from(httpdate::parse_http_date(text).ok()?),
    };
    let bound = date + chrono::Duration::seconds(1);
    // Past year 9999 the stored format has no spelling; every write is earlier.
    if chrono::Datelike::year(&bound) > 9999 {
        return None;
    }
    Some(bound.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}

/// A precondition header's value: `*`, or the versions its entity tags
/// name.
enum TagList {
    Any,
    Versions(Vec<u64>),
}

/// Reads the entity-tag list of header `name` (all its lines), or `None`
/// without it; a malformed one is `invalid` (with the header's own code).
/// Weak tags name a version only where `weak` comparison applies
/// (If-None-Match); only the canonical decimal spelling is an ETag this
/// service issued.
fn tag_list(
    request: &Request,
    name: &header::HeaderName,
    weak: bool,
    invalid: fn(FieldError) -> ApiError,
) -> Result<Option<TagList>, ApiError> {
    let (header_name, code) = if *name == header::IF_MATCH {
        ("If-Match", "invalid_if_match")
    } else {
        ("If-None-Match", "invalid_if_none_match")
    };
    let malformed = || {
        invalid(FieldError::new(
            header_name,
            code,
            "must be * or a list of entity tags",
        ))
    };
    let lines = request.headers().get_all(name);
    let mut iter = lines.iter();
    let Some(first) = iter.next() else {
        return Ok(None);
    };
    let single = iter.next().is_none();
    if single
        && first
            .to_str()
            .is_ok_and(|text| text.trim_matches([' ', '\t']) == "*")
    {
        return Ok(Some(TagList::Any));
    }
    let mut versions = Vec::new();
    let mut tags = 0;
    for line in lines {
        // RFC 9110's etagc includes obs-text (bytes 0x80-0xFF), which
        // `to_str` refuses; such a tag is well-formed and matches no version.
        let text = String::from_utf8_lossy(line.as_bytes());
        for tag in EntityTags(&text) {
            tags += 1;
            if tags > MAX_IF_MATCH_TAGS {
                return Err(invalid(FieldError::new(
                    header_name,
                    code,
                    format!("must list at most {MAX_IF_MATCH_TAGS} entity tags"),
                )));
            }
            let opaque = match tag.ok_or_else(malformed)? {
                EntityTag::Strong(opaque) => opaque,
                EntityTag::Weak(opaque) if weak => opaque,
                EntityTag::Weak(_) => continue,
            };
            if let Ok(version) = opaque.parse::<u64>()
                && version.to_string() == opaque
                && !versions.contains(&version)
            {
                versions.push(version);
            }
        }
    }
    Ok(Some(TagList::Versions(versions)))
}

enum EntityTag<'a> {
    Strong(&'a str),
    Weak(&'a str),
}

/// Reads RFC 9110 `#entity-tag` one tag at a time: `Some(None)` for a
/// malformed list, after which it stops. The list may be empty (then no
/// version matches).
struct EntityTags<'a>(&'a str);

impl<'a> Iterator for EntityTags<'a> {
    type Item = Option<EntityTag<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.0.trim_start_matches([' ', '\t', ',']);
        if rest.is_empty() {
            return None;
        }
        let tag = read_tag(rest);
        self.0 = match tag {
            Some((_, after)) => after,
            None => "",
        };
        Some(tag.map(|(tag, _)| tag))
    }
}

/// One entity tag at the start of `text` and what follows its separator.
fn read_tag(text: &str) -> Option<(EntityTag<'_>, &str)> {
    let (weak, rest) = match text.strip_prefix("W/") {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let body = rest.strip_prefix('"')?;
    let end = body.find('"')?;
    let opaque = &body[..end];
    let etagc = |c: char| c == '\x21' || ('\x23'..='\x7e').contains(&c) || !c.is_ascii();
    if !opaque.chars().all(etagc) {
        return None;
    }
    let after = body[end + 1..].trim_start_matches([' ', '\t']);
    if !(after.is_empty() || after.starts_with(',')) {
        return None;
    }
    let tag = if weak {
        EntityTag::Weak(opaque)
    } else {
        EntityTag::Strong(opaque)
    };
    Some((tag, after))
}

/// The media types that are JSON but ask for patch semantics (RFC 7396's
/// merge patch, RFC 6902's JSON Patch) this API does not apply.
pub const PATCH_TYPES: [&str; 2] = ["application/merge-patch+json", "application/json-patch+json"];

/// Whether a `Content-Type` names JSON: `application/json`, or any type
/// whose subtype ends in `+json` (RFC 6839), in any case, with any
/// well-formed parameters (not read: the body is UTF-8 JSON either way).
/// The [`PATCH_TYPES`] are JSON here; [`json_body`] refuses them apart.
/// `mime` checks the media type's syntax once the optional whitespace RFC
/// 9110 allows before a parameter's `;` is dropped (`mime` refuses it);
/// the subtype is then compared as written, since `mime` reads
/// `application/json+xml` as the subtype `json` with a suffix.
fn is_json(content_type: &str) -> bool {
    if without_space_before_semicolons(content_type)
        .parse::<mime::Mime>()
        .is_err()
    {
        return false;
    }
    match essence(content_type).split_once('/') {
        Some(("application", "json")) => true,
        Some((_, subtype)) => subtype.len() > "+json".len() && subtype.ends_with("+json"),
        None => false,
    }
}

/// `text` without the spaces and tabs that stand right before a `;`
/// outside a quoted string.
fn without_space_before_semicolons(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let (mut quoted, mut escaped) = (false, false);
    let mut pending = String::new();
    for c in text.chars() {
        if !quoted && (c == ' ' || c == '\t') {
            pending.push(c);
            continue;
        }
        if c != ';' || quoted {
            out.push_str(&pending);
        }
        pending.clear();
        out.push(c);
        if escaped {
            escaped = false;
        } else if quoted && c == '\\' {
            escaped = true;
        } else if c == '"' {
            quoted = !quoted;
        }
    }
    out.push_str(&pending);
    out
}

/// The media type of a `Content-Type`, lowercase, without parameters.
fn essence(content_type: &str) -> String {
    let essence = content_type.split(';').next().unwrap_or_default();
    essence.trim_matches([' ', '\t']).to_ascii_lowercase()
}

/// Whether every `Content-Encoding` line lists only `identity` (any case;
/// an empty list is no coding at all).
fn is_identity(request: &Request) -> bool {
    request
        .headers()
        .get_all(header::CONTENT_ENCODING)
        .iter()
        .all(|line| {
            line.to_str().is_ok_and(|codings| {
                codings
                    .split(',')
                    .map(|coding| coding.trim_matches([' ', '\t']))
                    .all(|coding| coding.is_empty() || coding.eq_ignore_ascii_case("identity"))
            })
        })
}

/// The one patch format `PATCH` takes: RFC 7396's JSON Merge Patch.
pub const MERGE_PATCH_TYPE: &str = "application/merge-patch+json";

/// How a request's body is to be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// `PUT`: the fields to set, as JSON (`Content-Type` optional).
    Update,
    /// `PATCH`: a JSON Merge Patch (`Content-Type` required, and only
    /// [`MERGE_PATCH_TYPE`]).
    MergePatch,
}

impl BodyKind {
    /// The kind a request's method asks for: `PATCH` a merge patch, any
    /// other an update.
    pub fn of(request: &Request) -> Self {
        if request.method() == Method::PATCH {
            Self::MergePatch
        } else {
            Self::Update
        }
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
    if !is_identity(request) {
        return Err(ApiError::UnsupportedMediaType(Unsupported::Coding));
    }
    let content_type = request.headers().get(header::CONTENT_TYPE);
    let json_type = match content_type {
        None => None,
        Some(content_type) => match content_type.to_str().ok().filter(|text| is_json(text)) {
            Some(text) => Some(essence(text)),
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
        return Err(ApiError::PayloadTooLarge);
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
mod tests {
    use super::*;
    use serde_json::json;

    /// A PUT event with these query pairs, header lines and body.
    fn request(query: &[(&str, &str)], headers: &[(&str, &str)], body: &str) -> Request {
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
    fn code<T>(result: Result<T, ApiError>) -> Result<T, String> {
        result.map_err(|error| match error {
            ApiError::InvalidProjectId(field)
            | ApiError::InvalidIfMatch(field)
            | ApiError::InvalidIfNoneMatch(field)
            | ApiError::InvalidJson(field) => field.code.to_string(),
            error => error.code().to_string(),
        })
    }

    /// The failure with this code.
    fn fails<T>(code: &str) -> Result<T, String> {
        Err(code.to_string())
    }

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
    fn content_types() {
        for ok in [
            "application/json",
            "Application/JSON; charset=utf-8",
            "application/vnd.api+json;v=1",
            // RFC 9110: optional whitespace around the `;` of parameters.
            "application/json ; charset=utf-8",
            "application/json\t;charset=utf-8",
            "application/problem+json ; x=y",
            "application/json ;charset=\"a ; b\"",
            "application/json;",
            "application/a+b+json",
            "APPLICATION/LD+JSON",
        ] {
            assert!(
                json_body(&request(&[], &[("content-type", ok)], "{}"), BodyKind::Update).is_ok(),
                "{ok}"
            );
        }
        assert!(json_body(&request(&[], &[], "{}"), BodyKind::Update).is_ok());
        for bad in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "json",
            "",
            "application/jsonx",
            "text/json",
            // A suffix names the structure: these are not JSON.
            "application/json+xml",
            "application/json+foo",
            "application/jSoN+zip",
            "application/+json",
            "application/json/x",
            "application /json",
            "; application/json",
            // Parameters must be well-formed, and one type is one type.
            "application/json; garbage",
            "application/json;x=1,text/plain",
            "application/json, text/plain",
        ] {
            assert_eq!(
                code(json_body(
                    &request(&[], &[("content-type", bad)], "{}"),
                    BodyKind::Update
                )),
                fails("unsupported_media_type"),
                "{bad}"
            );
        }
    }

    #[test]
    fn patch_types_and_codings_are_refused_with_their_reason() {
        let refused =
            |headers: &[(&str, &str)]| match json_body(&request(&[], headers, "{}"), BodyKind::Update) {
                Err(ApiError::UnsupportedMediaType(reason)) => Some(reason),
                _ => None,
            };
        for patch in [
            "application/merge-patch+json",
            "Application/Merge-Patch+JSON; charset=utf-8",
            "application/json-patch+json",
            "application/json-patch+json ; x=y",
        ] {
            assert_eq!(
                refused(&[("content-type", patch)]),
                Some(Unsupported::PatchType),
                "{patch}"
            );
        }
        let message = ApiError::UnsupportedMediaType(Unsupported::PatchType).to_string();
        assert!(message.contains("application/json"), "{message}");
        for coding in [
            "gzip",
            "br",
            "deflate",
            "identity, gzip",
            "x-gzip",
            "zstd",
            "identity;q=1",
        ] {
            assert_eq!(
                refused(&[("content-encoding", coding)]),
                Some(Unsupported::Coding),
                "{coding}"
            );
        }
        assert_eq!(
            refused(&[("content-encoding", "identity"), ("content-encoding", "gzip")]),
            Some(Unsupported::Coding)
        );
        for identity in ["identity", "IDENTITY", " identity ", "identity, identity", ""] {
            assert_eq!(refused(&[("content-encoding", identity)]), None, "{identity:?}");
        }
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

    fn expected_versions(request: &Request) -> Result<Option<Vec<u64>>, ApiError> {
        preconditions(request).map(|found| found.if_match)
    }

    fn none_match(value: &str) -> Result<Option<NoneMatch>, String> {
        code(preconditions(&request(&[], &[("if-none-match", value)], "")).map(|found| found.if_none_match))
    }

    #[test]
    fn if_none_match_forms_compare_weakly() {
        assert_eq!(none_match("*"), Ok(Some(NoneMatch::Any)));
        assert_eq!(none_match("\"3\""), Ok(Some(NoneMatch::Versions(vec![3]))));
        assert_eq!(
            none_match("W/\"3\", \"5\""),
            Ok(Some(NoneMatch::Versions(vec![3, 5])))
        );
        assert_eq!(none_match("\"abc\""), Ok(Some(NoneMatch::Versions(vec![]))));
        for bad in ["3", "*, \"3\"", "W/3", "\"3\" x"] {
            assert_eq!(none_match(bad), fails("invalid_if_none_match"), "{bad:?}");
        }
        let lines = preconditions(&request(
            &[],
            &[("if-none-match", "\"1\""), ("if-none-match", "*")],
            "",
        ));
        assert!(matches!(lines, Err(ApiError::InvalidIfNoneMatch(_))));
    }

    #[test]
    fn if_unmodified_since_is_a_bound_one_second_past_its_date() {
        let bound = |headers: &[(&str, &str)]| {
            preconditions(&request(&[], headers, ""))
                .ok()
                .and_then(|found| found.unmodified_before)
        };
        let expected = Some("2026-11-21T14:55:01.000Z".to_string());
        // IMF-fixdate, and the two obsolete forms RFC 9110 says to accept.
        assert_eq!(
            bound(&[("if-unmodified-since", "Sat, 21 Nov 2026 14:55:00 GMT")]),
            expected
        );
        assert_eq!(
            bound(&[("if-unmodified-since", "Saturday, 21-Nov-26 14:55:00 GMT")]),
            expected
        );
        assert_eq!(
            bound(&[("if-unmodified-since", "Sat Nov 21 14:55:00 2026")]),
            expected
        );
        // Ignored: not a date, two lines, or If-Match present.
        for ignored in [
            "yesterday",
            "",
            "2026-11-21T14:55:00Z",
            "Sat, 21 Nov 2026 14:55:00 UTC",
        ] {
            assert_eq!(bound(&[("if-unmodified-since", ignored)]), None, "{ignored:?}");
        }
        let date = "Sat, 21 Nov 2026 14:55:00 GMT";
        assert_eq!(
            bound(&[("if-unmodified-since", date), ("if-unmodified-since", date)]),
            None
        );
        assert_eq!(bound(&[("if-unmodified-since", date), ("if-match", "*")]), None);
    }

    #[test]
    fn if_match_forms() {
        let versions = |value: &str| code(expected_versions(&request(&[], &[("if-match", value)], "")));
        assert_eq!(code(expected_versions(&request(&[], &[], ""))), Ok(None));
        assert_eq!(versions("*"), Ok(None));
        assert_eq!(versions("\"3\""), Ok(Some(vec![3])));
        assert_eq!(versions("\"3\", \"5\" ,\"3\""), Ok(Some(vec![3, 5])));
        assert_eq!(versions("W/\"3\""), Ok(Some(vec![])));
        assert_eq!(versions("\"abc\""), Ok(Some(vec![])));
        assert_eq!(versions("\"03\""), Ok(Some(vec![])));
        assert_eq!(versions("\"a,b\", \"0\""), Ok(Some(vec![0])));
        // RFC 9110's `#entity-tag` may be an empty list, which matches nothing.
        assert_eq!(versions(""), Ok(Some(vec![])));
        assert_eq!(versions(" , ,"), Ok(Some(vec![])));
        // obs-text is an etagc: well-formed, matching no version.
        for value in ["\"\u{ff}\"", "\"café\", \"2\"", "W/\"\u{80}\""] {
            let expected = if value.ends_with("\"2\"") {
                Ok(Some(vec![2]))
            } else {
                Ok(Some(vec![]))
            };
            assert_eq!(versions(value), expected, "{value:?}");
        }
        for bad in [
            "3",
            "\"3",
            "\"3\" \"4\"",
            "W/3",
            "\"a b\"",
            "*, \"3\"",
            "\"3\",x",
            "**",
            "\"3\", *",
        ] {
            assert_eq!(versions(bad), fails("invalid_if_match"), "{bad:?}");
        }
    }

    #[test]
    fn repeated_if_match_lines_are_one_list() {
        let lines = |values: &[&str]| {
            let headers: Vec<(&str, &str)> = values.iter().map(|value| ("if-match", *value)).collect();
            code(expected_versions(&request(&[], &headers, "")))
        };
        assert_eq!(lines(&["\"999\"", "\"3\""]), Ok(Some(vec![999, 3])));
        assert_eq!(lines(&["\"999\"", "W/\"1\""]), Ok(Some(vec![999])));
        // `*` is the whole field or nothing: never one member of a list.
        assert_eq!(lines(&["\"999\"", "*"]), fails("invalid_if_match"));
        assert_eq!(lines(&["*", "\"999\""]), fails("invalid_if_match"));
        assert_eq!(lines(&["*", "*"]), fails("invalid_if_match"));
        assert_eq!(lines(&["*"]), Ok(None));
        assert_eq!(lines(&["\"1\"", "bad"]), fails("invalid_if_match"));
    }

    #[test]
    fn the_tag_limit_counts_across_lines_and_stops_reading_early() {
        let tags = |count: usize| {
            (0..count)
                .map(|i| format!("\"{i}\""))
                .collect::<Vec<_>>()
                .join(",")
        };
        let exact = tags(MAX_IF_MATCH_TAGS);
        assert!(expected_versions(&request(&[], &[("if-match", &exact)], "")).is_ok());
        let half = tags(MAX_IF_MATCH_TAGS / 2 + 1);
        assert_eq!(
            code(expected_versions(&request(
                &[],
                &[("if-match", &half), ("if-match", &half)],
                ""
            ))),
            fails("invalid_if_match")
        );
        // A huge list followed by garbage is refused for its length: reading
        // stopped at the limit and never reached the garbage.
        let huge = format!("{}, garbage", tags(50_000));
        let error = expected_versions(&request(&[], &[("if-match", &huge)], "")).err();
        assert!(
            matches!(&error, Some(ApiError::InvalidIfMatch(field)) if field.message.contains("at most")),
            "{error:?}"
        );
    }
}

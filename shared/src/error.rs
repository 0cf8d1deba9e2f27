//! The failures a request can meet, and the one place they become HTTP
//! status codes and `errorDetails.code` values.

use serde::Serialize;

/// The most field problems one response lists; validation stops collecting
/// there, so a 64 KiB body of bad numbers cannot produce a megabyte of errors.
pub const MAX_FIELD_ERRORS: usize = 100;
/// The most bytes the listed problems take in the response JSON: the list
/// also stops when it reaches this size, so however long the paths, an
/// error response stays under 25 KiB (a hundred problems with short paths
/// fit; long paths make the list shorter).
pub const MAX_FIELD_ERRORS_BYTES: usize = 24 * 1024;
/// The most bytes a `field` path takes in the response JSON, escapes
/// counted (a control character in a key is written as six bytes); a longer
/// path (a long key in `parameters`) is cut and ends in `…`, so no error
/// copies a large part of the body however many there are.
pub const MAX_FIELD_PATH_BYTES: usize = 128;

/// Every `FieldError.code`: the one list openapi.yaml's enum is held to.
/// A code not listed here fails every test that meets it (debug builds
/// check each [`FieldError::new`]).
pub const FIELD_CODES: [&str; 36] = [
    "invalid_uuid",
    "required",
    "repeated",
    "invalid_if_match",
    "invalid_if_none_match",
    "invalid_idempotency_key",
    "empty",
    "invalid_utf8",
    "syntax",
    "not_object",
    "invalid_type",
    "too_short",
    "too_long",
    "blank",
    "control_character",
    "bidi_control",
    "noncharacter",
    "invalid_character",
    "invalid_url",
    "user_info",
    "forbidden_host",
    "private_host",
    "too_many_entries",
    "invalid_name",
    "duplicate_name",
    "invalid_value",
    "invalid_enum",
    "too_large",
    "too_deep",
    "empty_key",
    "invalid_number",
    "unknown_field",
    "read_only",
    "forbidden_name",
    "reserved_key",
    "too_many_values",
];

/// One problem with one input, named by its JSON path (`headers.Authorization`,
/// `parameters.reasoning.effort`, `project_id`, `id`, `body`).
///
/// The message describes the rule that was broken and never repeats the
/// submitted value, so secrets cannot leak through it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldError {
    /// JSON path of the offending input.
    pub field: String,
    /// Stable snake_case code of the broken rule.
    pub code: &'static str,
    /// Human-readable rule, without the submitted value.
    pub message: String,
}

impl FieldError {
    /// Builds a field error; a `field` path longer than
    /// [`MAX_FIELD_PATH_BYTES`] as JSON is cut (copying only what is kept).
    pub fn new(field: &str, code: &'static str, message: impl Into<String>) -> Self {
        debug_assert!(FIELD_CODES.contains(&code), "{code} is not in FIELD_CODES");
        Self {
            field: short_path(field),
            code,
            message: message.into(),
        }
    }
}

impl FieldError {
    /// The bytes this error takes in the response's `fields` list.
    fn written_len(&self) -> usize {
        const FRAME: usize = r#"{"field":"","code":"","message":""},"#.len();
        let text = |text: &str| text.chars().map(json_len).sum::<usize>();
        FRAME + text(&self.field) + self.code.len() + text(&self.message)
    }
}

/// The bytes `c` takes inside a JSON string as serde_json writes it.
fn json_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        '\0'..='\u{1f}' => 6,
        _ => c.len_utf8(),
    }
}

fn short_path(path: &str) -> String {
    const CUT: char = '…';
    let mut used = 0;
    // Where the path must end if it is cut: the mark must fit as well.
    let mut cut_at = None;
    for (index, c) in path.char_indices() {
        if cut_at.is_none() && used + json_len(c) + CUT.len_utf8() > MAX_FIELD_PATH_BYTES {
            cut_at = Some(index);
        }
        used += json_len(c);
        if used > MAX_FIELD_PATH_BYTES {
            let end = cut_at.unwrap_or(index);
            return format!("{}{CUT}", &path[..end]);
        }
    }
    path.to_string()
}

/// The field problems of one request: at most [`MAX_FIELD_ERRORS`] are kept,
/// taking at most [`MAX_FIELD_ERRORS_BYTES`] in the response, and
/// [`FieldErrors::is_full`] tells a rule it may stop looking.
#[derive(Debug, Default)]
pub struct FieldErrors {
    kept: Vec<FieldError>,
    written: usize,
}

impl FieldErrors {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `error` unless the list is full.
    /// Adds `error` unless the list is full or `error` would take it past
    /// its size (the first problem is always kept: it is never large).
    pub fn push(&mut self, error: FieldError) {
        let size = error.written_len();
        if self.is_full() || (!self.kept.is_empty() && self.written + size > MAX_FIELD_ERRORS_BYTES) {
            // Once one problem does not fit, later ones must not slip in
            // out of order.
            self.written = MAX_FIELD_ERRORS_BYTES;
            return;
        }
        self.written += size;
        self.kept.push(error);
    }

    /// Whether no further problem would be kept.
    pub fn is_full(&self) -> bool {
        self.kept.len() >= MAX_FIELD_ERRORS || self.written >= MAX_FIELD_ERRORS_BYTES
    }

    /// How many problems were kept.
    pub fn len(&self) -> usize {
        self.kept.len()
    }

    /// Whether no problem was found.
    pub fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }

    /// The problems kept, in the order found.
    pub fn into_vec(self) -> Vec<FieldError> {
        self.kept
    }
}

/// Why a body's media type or coding is refused (415).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unsupported {
    /// `Content-Type` names something other than JSON.
    NotJson,
    /// On `PUT`, `application/merge-patch+json` or
    /// `application/json-patch+json`: JSON, but asking for RFC 7396's or RFC
    /// 6902's semantics, which `PUT` does not apply (its partial update
    /// replaces `headers` and `parameters` whole, silently unlike a merge).
    PatchType,
    /// On `PATCH`, anything but `application/merge-patch+json` (RFC 7396),
    /// the one patch format this API applies; a missing type included.
    NotMergePatch,
    /// A `Content-Encoding` other than `identity`: the body would be read
    /// as if it were not encoded.
    Coding,
}

impl Unsupported {
    /// What the envelope's message says.
    pub fn message(self) -> &'static str {
        match self {
            Self::NotJson => "Content-Type must be application/json",
            Self::PatchType => {
                "Content-Type must be application/json: PUT applies its own partial update; \
                 send a JSON Merge Patch with PATCH"
            }
            Self::NotMergePatch => {
                "Content-Type must be application/merge-patch+json: PATCH applies JSON Merge Patch"
            }
            Self::Coding => "Content-Encoding must be identity: the body must not be compressed or encoded",
        }
    }
}

/// Every way a request can fail.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// The `{id}` path parameter is not a UUID: its problem, then the
    /// `project_id` query's if that is wrong too (every problem listed).
    #[error("Invalid id: must be a UUID")]
    InvalidId(Vec<FieldError>),
    /// `project_id` is missing, empty, repeated or not a UUID.
    #[error("Invalid project_id: exactly one UUID is required")]
    InvalidProjectId(FieldError),
    /// `If-Match` is not `*` or a list of strong entity tags.
    #[error("Invalid If-Match header")]
    InvalidIfMatch(FieldError),
    /// `If-None-Match` is not `*` or a list of entity tags.
    #[error("Invalid If-None-Match header")]
    InvalidIfNoneMatch(FieldError),
    /// `Idempotency-Key` is not one key of 1 to 255 visible ASCII
    /// characters, bare or as a structured-field string.
    #[error("Invalid Idempotency-Key header")]
    InvalidIdempotencyKey(FieldError),
    /// The caller used this `Idempotency-Key` on this record for another
    /// request (another method, body or preconditions) within 24 hours.
    #[error("Idempotency-Key already used on this record with another request")]
    IdempotencyKeyReused,
    /// `verify` is not `true`, is given more than once, or is given on a
    /// route that verifies nothing.
    #[error("Invalid verify parameter")]
    InvalidVerify(FieldError),
    /// `verify=true` and the MCP handshake failed; nothing was written.
    #[error("MCP server not verified: the handshake failed at {stage}")]
    McpUnverified {
        /// Where it failed ([`crate::mcp::Failure::stage`]).
        stage: &'static str,
        /// The HTTP status the server answered, where that was the failure.
        http_status: Option<u16>,
    },
    /// `verify=pinned` and the server's tools differ from the record's pin;
    /// nothing was written. Tool names only, sorted.
    #[error("MCP server not verified: its tools changed since they were pinned")]
    McpToolsChanged {
        /// Offered now, not pinned.
        added: Vec<String>,
        /// Pinned, not offered now.
        removed: Vec<String>,
        /// Pinned and offered, with another digest.
        changed: Vec<String>,
    },
    /// `verify=true` on an API key and the provider did not accept it;
    /// nothing was written.
    #[error("API key not verified: the provider check failed at {stage}")]
    KeyUnverified {
        /// Where it failed ([`crate::keycheck::KeyFailure::stage`]).
        stage: &'static str,
        /// The HTTP status the provider answered, where that was the failure.
        http_status: Option<u16>,
    },
    /// The body is missing, empty, not JSON, not an object, or not UTF-8.
    #[error("Request body must be a JSON object")]
    InvalidJson(FieldError),
    /// One or more fields break their rules.
    #[error("Invalid request body")]
    Validation(Vec<FieldError>),
    /// The body is `{}`.
    #[error("Nothing to update: the request body has no fields")]
    EmptyUpdate,
    /// The caller's identity does not grant the project (or, on the API-key
    /// route, every project). Says nothing of the record or the request.
    #[error("Forbidden: the caller's identity does not grant this change")]
    Forbidden,
    /// The record does not exist (in this project).
    #[error("{0} not found")]
    NotFound(&'static str),
    /// The stored record changed while the update was applied, in a way
    /// the update cannot simply be applied over: nothing was written, and
    /// the same request may be sent again.
    #[error("Conflict: the record changed while it was being updated; nothing was written, retry")]
    Conflict,
    /// A precondition failed: `If-Match` named a version other than the
    /// stored one, `If-None-Match` named the stored one (or `*`), or the
    /// record was written after `If-Unmodified-Since`.
    #[error("Precondition failed: the record has changed")]
    PreconditionFailed {
        /// The stored version, sent back as the current `ETag`.
        current_version: String,
    },
    /// The body is larger than `limit` bytes
    /// ([`crate::request::MAX_BODY_BYTES`]).
    #[error("Request body is larger than {limit} bytes")]
    PayloadTooLarge {
        /// The most a body may hold.
        limit: usize,
    },
    /// `Content-Type` is present and is not JSON (or is a patch type whose
    /// semantics this API does not apply), or the body has a
    /// `Content-Encoding` other than `identity`.
    #[error("{}", .0.message())]
    UnsupportedMediaType(Unsupported),
    /// DynamoDB throttled, was unreachable, or the time budget ran out.
    #[error("Service temporarily unavailable, retry later")]
    Unavailable,
    /// The event itself cannot be read as an HTTP request (a header or
    /// request line no HTTP request can carry; direct invokes only).
    #[error("The request could not be read")]
    BadRequest,
    /// Anything else; the details go to the log, never to the client.
    #[error("Internal server error")]
    Internal,
}

impl ApiError {
    /// The HTTP status code for this error.
    pub fn status(&self) -> u16 {
        match self {
            Self::InvalidId(_)
            | Self::InvalidProjectId(_)
            | Self::InvalidIfMatch(_)
            | Self::InvalidIfNoneMatch(_)
            | Self::InvalidIdempotencyKey(_)
            | Self::InvalidVerify(_)
            | Self::InvalidJson(_)
            | Self::Validation(_)
            | Self::EmptyUpdate
            | Self::BadRequest => 400,
            Self::Forbidden => 403,
            Self::NotFound(_) => 404,
            Self::Conflict => 409,
            Self::PreconditionFailed { .. } => 412,
            Self::IdempotencyKeyReused
            | Self::McpUnverified { .. }
            | Self::McpToolsChanged { .. }
            | Self::KeyUnverified { .. } => 422,
            Self::PayloadTooLarge { .. } => 413,
            Self::UnsupportedMediaType(_) => 415,
            Self::Internal => 500,
            Self::Unavailable => 503,
        }
    }

    /// The stable `errorDetails.code`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidId(_) => "invalid_id",
            Self::InvalidProjectId(_) => "invalid_project_id",
            Self::InvalidIfMatch(_) => "invalid_if_match",
            Self::InvalidIfNoneMatch(_) => "invalid_if_none_match",
            Self::InvalidIdempotencyKey(_) => "invalid_idempotency_key",
            Self::IdempotencyKeyReused => "idempotency_key_reused",
            Self::InvalidVerify(_) => "invalid_verify",
            Self::McpUnverified { .. } => "mcp_unverified",
            Self::McpToolsChanged { .. } => "mcp_tools_changed",
            Self::KeyUnverified { .. } => "key_unverified",
            Self::InvalidJson(_) => "invalid_json",
            Self::Validation(_) => "validation_failed",
            Self::EmptyUpdate => "empty_update",
            Self::BadRequest => "invalid_request",
            Self::Forbidden => "forbidden",
            Self::NotFound(_) => "not_found",
            Self::Conflict => "conflict",
            Self::PreconditionFailed { .. } => "precondition_failed",
            Self::PayloadTooLarge { .. } => "payload_too_large",
            Self::UnsupportedMediaType(_) => "unsupported_media_type",
            Self::Unavailable => "unavailable",
            Self::Internal => "internal",
        }
    }

    /// The field problems behind a 400, if any.
    pub fn fields(&self) -> Option<&[FieldError]> {
        match self {
            Self::InvalidId(fields) => Some(fields),
            Self::InvalidProjectId(field)
            | Self::InvalidIfMatch(field)
            | Self::InvalidIfNoneMatch(field)
            | Self::InvalidIdempotencyKey(field)
            | Self::InvalidVerify(field)
            | Self::InvalidJson(field) => Some(std::slice::from_ref(field)),
            Self::Validation(fields) => Some(fields),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The path as the response carries it: a JSON string, quotes included.
    fn written(path: &str) -> usize {
        serde_json::to_string(path).map_or(usize::MAX, |json| json.len() - 2)
    }

    #[test]
    fn long_paths_are_cut_short_ones_kept() {
        let exact = "p".repeat(MAX_FIELD_PATH_BYTES);
        assert_eq!(FieldError::new(&exact, "too_long", "m").field, exact);
        let one_more = "p".repeat(MAX_FIELD_PATH_BYTES + 1);
        assert!(FieldError::new(&one_more, "too_long", "m").field.ends_with('…'));
        // Every kind of character, escaped or multi-byte, at every offset
        // of the cut: the written path never passes the limit, keeps as
        // much as fits, and is a prefix of the original.
        for filler in ["p", "é", "\u{1}", "\"", "\\", "\n", "😀", "\u{7f}", "\u{2028}"] {
            for lead in 0..4 {
                let long = format!("{}{}", "a".repeat(lead), filler.repeat(70_000));
                let field = FieldError::new(&format!("parameters.{long}"), "too_long", "m").field;
                assert!(written(&field) <= MAX_FIELD_PATH_BYTES, "{filler:?} {lead}");
                assert!(
                    written(&field) + 6 > MAX_FIELD_PATH_BYTES,
                    "{filler:?} {lead}: cut too short"
                );
                let kept = field
                    .strip_suffix('…')
                    .unwrap_or_else(|| panic!("not cut: {filler:?}"));
                assert!(format!("parameters.{long}").starts_with(kept));
            }
        }
    }

    #[test]
    fn the_list_stops_at_its_size() {
        let mut errors = FieldErrors::new();
        let long = "\u{1}".repeat(10_000);
        for _ in 0..MAX_FIELD_ERRORS {
            errors.push(FieldError::new(&long, "invalid_number", "m".repeat(200)));
        }
        assert!(errors.is_full());
        let kept = errors.into_vec();
        let written = serde_json::to_string(&kept).map_or(usize::MAX, |json| json.len());
        assert!(written <= MAX_FIELD_ERRORS_BYTES, "{written}");
        assert!(kept.len() > 10 && kept.len() < MAX_FIELD_ERRORS, "{}", kept.len());
        // A later, smaller problem does not jump the queue.
        let mut errors = FieldErrors::new();
        errors.push(FieldError::new(
            "a",
            "too_long",
            "m".repeat(MAX_FIELD_ERRORS_BYTES - 100),
        ));
        errors.push(FieldError::new("b", "too_long", "m".repeat(200)));
        errors.push(FieldError::new("c", "too_long", "m"));
        assert_eq!(errors.len(), 1);
    }

    #[test]
    fn the_list_stops_at_its_limit() {
        let mut errors = FieldErrors::new();
        for _ in 0..MAX_FIELD_ERRORS * 3 {
            errors.push(FieldError::new("f", "too_long", "m"));
        }
        assert!(errors.is_full());
        assert_eq!(errors.into_vec().len(), MAX_FIELD_ERRORS);
    }
}

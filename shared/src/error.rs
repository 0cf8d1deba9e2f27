//! The failures a request can meet, and the one place they become HTTP
//! status codes and `errorDetails.code` values.

use serde::Serialize;

/// The most field problems one response lists; validation stops collecting
/// there, so a 64 KiB body of bad numbers cannot produce a megabyte of errors.
pub const MAX_FIELD_ERRORS: usize = 100;
/// The longest `field` path an error carries, in characters; a longer one
/// (a long key in `parameters`) is cut and ends in `…`, so no error copies
/// a large part of the body however many there are.
pub const MAX_FIELD_PATH_CHARS: usize = 128;

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
    /// [`MAX_FIELD_PATH_CHARS`] is cut (copying only what is kept).
    pub fn new(field: &str, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            field: short_path(field),
            code,
            message: message.into(),
        }
    }
}

fn short_path(path: &str) -> String {
    match path.char_indices().nth(MAX_FIELD_PATH_CHARS - 1) {
        // More than the limit: keep one character less and mark the cut.
        Some((end, _)) if path[end..].chars().nth(1).is_some() => format!("{}…", &path[..end]),
        _ => path.to_string(),
    }
}

/// The field problems of one request: at most [`MAX_FIELD_ERRORS`] are kept,
/// and [`FieldErrors::is_full`] tells a rule it may stop looking.
#[derive(Debug, Default)]
pub struct FieldErrors(Vec<FieldError>);

impl FieldErrors {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `error` unless the list is full.
    pub fn push(&mut self, error: FieldError) {
        if !self.is_full() {
            self.0.push(error);
        }
    }

    /// Whether no further problem would be kept.
    pub fn is_full(&self) -> bool {
        self.0.len() >= MAX_FIELD_ERRORS
    }

    /// How many problems were kept.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether no problem was found.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The problems kept, in the order found.
    pub fn into_vec(self) -> Vec<FieldError> {
        self.0
    }
}

/// Every way a request can fail.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// The `{id}` path parameter is not a UUID.
    #[error("Invalid id: must be a UUID")]
    InvalidId(FieldError),
    /// `project_id` is missing, empty, repeated or not a UUID.
    #[error("Invalid project_id: exactly one UUID is required")]
    InvalidProjectId(FieldError),
    /// `If-Match` is not `*` or a list of strong entity tags.
    #[error("Invalid If-Match header")]
    InvalidIfMatch(FieldError),
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
    /// `If-Match` named a version other than the stored one.
    #[error("Precondition failed: the record has changed")]
    PreconditionFailed {
        /// The stored version, sent back as the current `ETag`.
        current_version: u64,
    },
    /// The body is larger than [`crate::request::MAX_BODY_BYTES`].
    #[error("Request body is larger than 65536 bytes")]
    PayloadTooLarge,
    /// `Content-Type` is present and is not JSON.
    #[error("Content-Type must be application/json")]
    UnsupportedMediaType,
    /// No route serves the path (local API only; API Gateway answers itself).
    #[error("No route for this path")]
    RouteNotFound,
    /// The path exists but not for this method (local API only).
    #[error("Method not allowed")]
    MethodNotAllowed,
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
            | Self::InvalidJson(_)
            | Self::Validation(_)
            | Self::EmptyUpdate
            | Self::BadRequest => 400,
            Self::Forbidden => 403,
            Self::NotFound(_) | Self::RouteNotFound => 404,
            Self::MethodNotAllowed => 405,
            Self::PreconditionFailed { .. } => 412,
            Self::PayloadTooLarge => 413,
            Self::UnsupportedMediaType => 415,
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
            Self::InvalidJson(_) => "invalid_json",
            Self::Validation(_) => "validation_failed",
            Self::EmptyUpdate => "empty_update",
            Self::BadRequest => "invalid_request",
            Self::Forbidden => "forbidden",
            Self::NotFound(_) | Self::RouteNotFound => "not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::PreconditionFailed { .. } => "precondition_failed",
            Self::PayloadTooLarge => "payload_too_large",
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::Unavailable => "unavailable",
            Self::Internal => "internal",
        }
    }

    /// The field problems behind a 400, if any.
    pub fn fields(&self) -> Option<&[FieldError]> {
        match self {
            Self::InvalidId(field)
            | Self::InvalidProjectId(field)
            | Self::InvalidIfMatch(field)
            | Self::InvalidJson(field) => Some(std::slice::from_ref(field)),
            Self::Validation(fields) => Some(fields),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_paths_are_cut_short_ones_kept() {
        let exact = "p".repeat(MAX_FIELD_PATH_CHARS);
        assert_eq!(FieldError::new(&exact, "c", "m").field, exact);
        let long = format!("parameters.{}", "é".repeat(70_000));
        let field = FieldError::new(&long, "c", "m").field;
        assert_eq!(field.chars().count(), MAX_FIELD_PATH_CHARS);
        assert!(
            field.starts_with("parameters.é") && field.ends_with('…'),
            "{field}"
        );
    }

    #[test]
    fn the_list_stops_at_its_limit() {
        let mut errors = FieldErrors::new();
        for _ in 0..MAX_FIELD_ERRORS * 3 {
            errors.push(FieldError::new("f", "c", "m"));
        }
        assert!(errors.is_full());
        assert_eq!(errors.into_vec().len(), MAX_FIELD_ERRORS);
    }
}

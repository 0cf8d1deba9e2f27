//! The failures a request can meet, and the one place they become HTTP
//! status codes and `errorDetails.code` values.

use serde::Serialize;

/// The most field problems one response lists; beyond it the list is cut,
/// so a 64 KiB body of bad numbers cannot produce a megabyte of errors.
pub const MAX_FIELD_ERRORS: usize = 100;

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
    /// Builds a field error.
    pub fn new(field: impl Into<String>, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            code,
            message: message.into(),
        }
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
            | Self::EmptyUpdate => 400,
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

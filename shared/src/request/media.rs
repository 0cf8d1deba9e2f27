//! Media types and codings: which `Content-Type` is JSON, which is the merge
//! patch `PATCH` takes, and which `Content-Encoding` is none at all.

use aws_lambda_events::http::{Method, header};

use crate::apigw::Request;
#[cfg(doc)]
use crate::request::json_body;

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
pub(crate) fn is_json(content_type: &str) -> bool {
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
pub(crate) fn essence(content_type: &str) -> String {
    let essence = content_type.split(';').next().unwrap_or_default();
    essence.trim_matches([' ', '\t']).to_ascii_lowercase()
}

/// Whether every `Content-Encoding` line lists only `identity` (any case;
/// an empty list is no coding at all).
pub(crate) fn is_identity(request: &Request) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{ApiError, Unsupported};
    use crate::request::json_body;
    use crate::request::test_support::{code, fails, request};

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
}

//! `Idempotency-Key`: the key a caller names a write by, where its outcome
//! is kept (the caller and the record), and what makes a retry the same
//! request (the fingerprint).

use aws_lambda_events::http::header::{IF_MATCH, IF_NONE_MATCH, IF_UNMODIFIED_SINCE};
use aws_lc_rs::digest::{Context, SHA256};

use crate::apigw::Request;
use crate::error::{ApiError, FieldError};
use crate::records::VerifyMode;
use crate::store::Key;

/// The header.
pub const HEADER: &str = "idempotency-key";
/// The most characters a key has.
pub const MAX_KEY_CHARS: usize = 255;
/// How long an outcome is kept.
pub const KEPT_SECONDS: i64 = 24 * 60 * 60;

/// A key as the caller sent it: the structured-field string's content, or
/// the bare value (the same key either way).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// The key's text: 1 to 255 visible ASCII characters.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The request's `Idempotency-Key`, if it has one: 400
/// `invalid_idempotency_key` for two, or one that is not 1 to 255 visible
/// ASCII characters, bare or as a structured-field string (`"…"`, `\"` and
/// `\\` escaped). A bare key may not hold a comma: API Gateway joins two
/// header lines with one, and two keys are no key.
pub fn idempotency_key(request: &Request) -> Result<Option<IdempotencyKey>, ApiError> {
    let invalid = |message: &str| {
        ApiError::InvalidIdempotencyKey(FieldError::new(
            "Idempotency-Key",
            "invalid_idempotency_key",
            message,
        ))
    };
    let mut lines = request.headers().get_all(HEADER).iter();
    let Some(line) = lines.next() else {
        return Ok(None);
    };
    if lines.next().is_some() {
        return Err(invalid("must be given once"));
    }
    let text = std::str::from_utf8(line.as_bytes())
        .map_err(|_| invalid("must be visible ASCII"))?
        .trim_matches([' ', '\t']);
    let key = match text.strip_prefix('"') {
        Some(quoted) => {
            unquoted(quoted).ok_or_else(|| invalid("a quoted key must be one structured-field string"))?
        }
        None if text.contains(',') => return Err(invalid("must be given once (a bare key holds no comma)")),
        None => text.to_owned(),
    };
    if key.is_empty() || key.len() > MAX_KEY_CHARS || !key.bytes().all(|byte| byte.is_ascii_graphic()) {
        return Err(invalid("must be 1 to 255 visible ASCII characters"));
    }
    Ok(Some(IdempotencyKey(key)))
}

/// The refusal of a key sent by a caller with no name (a JWT without `sub`):
/// a key is its caller's, and such a caller can own none.
pub fn unnamed_caller() -> ApiError {
    ApiError::InvalidIdempotencyKey(FieldError::new(
        "Idempotency-Key",
        "invalid_idempotency_key",
        "needs a caller with a name (a JWT sub or an IAM ARN)",
    ))
}

/// The content of a structured-field string whose opening quote is gone:
/// `None` unless it closes at the end, escaping only `"` and `\`.
fn unquoted(quoted: &str) -> Option<String> {
    let mut key = String::with_capacity(quoted.len());
    let mut chars = quoted.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next()? {
                escaped @ ('"' | '\\') => key.push(escaped),
                _ => return None,
            },
            '"' => return chars.next().is_none().then_some(key),
            c => key.push(c),
        }
    }
    None
}

/// Where the outcome of `key` is kept: the function's own prefix (its role
/// may reach only its own), then a digest of the caller (its whole
/// identity, [`crate::auth::identity`]), the route, the record and the
/// key, so a key is the caller's and the record's.
pub fn kept_key(function: &str, identity: &str, route: &str, record: &Key, key: &IdempotencyKey) -> String {
    let digest = digest(&[
        identity.as_bytes(),
        route.as_bytes(),
        record.project_id.as_deref().unwrap_or_default().as_bytes(),
        record.id.as_bytes(),
        key.as_str().as_bytes(),
    ]);
    format!("{function}#{digest}")
}

/// What makes a retry the same request: the method, the route, the
/// record, a digest of the body and the preconditions as sent.
pub fn fingerprint(request: &Request, route: &str, record: &Key, verify: Option<VerifyMode>) -> String {
    let headers = |name| {
        request
            .headers()
            .get_all(name)
            .iter()
            .map(|value| value.as_bytes())
            .collect::<Vec<_>>()
            .join(&b'\n')
    };
    let (if_match, if_none_match, if_unmodified_since) = (
        headers(IF_MATCH),
        headers(IF_NONE_MATCH),
        headers(IF_UNMODIFIED_SINCE),
    );
    let mut parts = vec![
        request.method().as_str().as_bytes(),
        route.as_bytes(),
        record.project_id.as_deref().unwrap_or_default().as_bytes(),
        record.id.as_bytes(),
        request.body(),
        &if_match,
        &if_none_match,
        &if_unmodified_since,
    ];
    // Only when asked, so a request without it has the print it always had.
    let verify = verify.map(|mode| format!("verify={}", mode.as_str()));
    if let Some(verify) = &verify {
        parts.push(verify.as_bytes());
    }
    digest(&parts)
}

/// SHA-256 of `parts`, each length-prefixed (no two lists of parts run
/// together alike), as lowercase hex.
fn digest(parts: &[&[u8]]) -> String {
    let mut context = Context::new(&SHA256);
    for part in parts {
        context.update(&(part.len() as u64).to_be_bytes());
        context.update(part);
    }
    context
        .finish()
        .as_ref()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::test_support::request;

    fn with(lines: &[&str]) -> Result<Option<String>, &'static str> {
        let headers: Vec<(&str, &str)> = lines.iter().map(|line| (HEADER, *line)).collect();
        idempotency_key(&request(&[], &headers, ""))
            .map(|key| key.map(|key| key.as_str().to_owned()))
            .map_err(|error| error.code())
    }

    #[test]
    fn the_quoted_and_the_bare_form_name_the_same_key() {
        assert_eq!(with(&["abc-123"]), Ok(Some("abc-123".into())));
        assert_eq!(with(&["\"abc-123\""]), Ok(Some("abc-123".into())));
        assert_eq!(with(&["  \"abc-123\"\t"]), Ok(Some("abc-123".into())));
        assert_eq!(with(&[r#""a\"b\\c""#]), Ok(Some(r#"a"b\c"#.into())));
        assert_eq!(with(&[&"k".repeat(255)]), Ok(Some("k".repeat(255))));
        assert_eq!(with(&["\"a,b\""]), Ok(Some("a,b".into())));
    }

    #[test]
    fn anything_else_is_invalid() {
        let invalid = Err("invalid_idempotency_key");
        for bad in [
            "",
            "\"\"",
            "a b",
            "\"a b\"",
            "\"abc",
            "\"abc\"x",
            "\"a\\nb\"",
            "a,b",
            "\"a\",\"b\"",
            "é",
            &"k".repeat(256),
        ] {
            assert_eq!(with(&[bad]), invalid, "{bad:?}");
        }
        assert_eq!(with(&["a", "b"]), invalid);
        assert_eq!(with(&["a", "a"]), invalid);
    }

    #[test]
    fn keys_are_the_caller_s_and_the_record_s() {
        let record = |id: &str| Key {
            project_id: Some("p".into()),
            id: id.into(),
        };
        let key = IdempotencyKey("k".into());
        let base = kept_key("update-model", "alice", "/r", &record("1"), &key);
        assert!(base.starts_with("update-model#"), "{base}");
        assert_eq!(base, kept_key("update-model", "alice", "/r", &record("1"), &key));
        for other in [
            kept_key("update-model", "bob", "/r", &record("1"), &key),
            kept_key("update-model", "", "/r", &record("1"), &key),
            kept_key("update-model", "alice", "/r", &record("2"), &key),
            kept_key(
                "update-model",
                "alice",
                "/r",
                &record("1"),
                &IdempotencyKey("k2".into()),
            ),
            // No two lists of parts run together alike.
            kept_key("update-model", "alice/", "r", &record("1"), &key),
        ] {
            assert_ne!(base, other);
        }
    }
}

//! `Idempotency-Key`: the key a caller names a write by, where its outcome
//! is kept (the caller and the record), and what makes a retry the same
//! request (the fingerprint).

use aws_lambda_events::http::header::{IF_MATCH, IF_NONE_MATCH, IF_UNMODIFIED_SINCE};
use aws_lc_rs::digest::{Context, SHA256};

use serde_json::{Map, Value};

use crate::apigw::Request;
use crate::error::{ApiError, FieldError};
use crate::records::{Field, Sealing, VerifyMode};
use crate::request::Preconditions;
use crate::secret::Secret;
use crate::store::{Key, NoneMatch};

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

/// The form of the prints made now, each print's prefix. A kept outcome's
/// print without it was made in the earlier form (a digest of the raw body
/// and header lines, secrets in it), which only a deployment's first day of
/// this form still finds ([`KEPT_SECONDS`]).
const FORM: &str = "2:";

/// What makes a retry the same request, told apart from its secrets.
#[derive(Debug, Clone)]
pub struct Fingerprint {
    /// The method, the route, the record, the body as canonical JSON (members
    /// sorted, no whitespace, strings escaped alike, numbers as written) with
    /// each secret value replaced by a mark, the preconditions as read, and
    /// `verify` if asked: no secret in any form, so a reader of the kept
    /// outcomes cannot test a guess of one.
    print: String,
    /// The earlier form's print, for an outcome kept in that form.
    earlier: String,
    /// The secret values the body holds, each where it is: a retry's must
    /// equal those its kept outcome holds sealed ([`Fingerprint::matches`]).
    pub secrets: Vec<(SecretAt, Secret)>,
}

/// Where a request's secret value is: a whole field (`api_key`), or a member
/// of a field of sealed values (`headers.<name>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretAt {
    /// The field's whole value.
    Whole(&'static str),
    /// The value of one member (by the name the request gave) of the field.
    Member(&'static str, String),
}

impl Fingerprint {
    /// What a kept outcome's print says of this request: `None` if it was
    /// another request; else the secrets still to compare with the outcome's
    /// (none for a print of the earlier form, which digested them).
    pub fn matches(&self, kept: &str) -> Option<&[(SecretAt, Secret)]> {
        if kept == self.print {
            Some(&self.secrets)
        } else if kept == self.earlier {
            Some(&[])
        } else {
            None
        }
    }

    /// The print kept with the outcome.
    pub fn print(&self) -> &str {
        &self.print
    }
}

/// The request's [`Fingerprint`]: `body` as read, the secret fields of its
/// record kind among `fields`, its preconditions as read.
pub fn fingerprint(
    request: &Request,
    (route, record): (&str, &Key),
    body: &Map<String, Value>,
    (fields, preconditions): (&[Field], &Preconditions),
    verify: Option<VerifyMode>,
) -> Fingerprint {
    let mut secrets = Vec::new();
    let mut canonical = Vec::with_capacity(request.body().len());
    write_body(body, fields, &mut canonical, &mut secrets);
    let read = read_preconditions(preconditions);
    let verify = verify.map(|mode| format!("verify={}", mode.as_str()));
    let mut parts = vec![
        request.method().as_str().as_bytes(),
        route.as_bytes(),
        record.project_id.as_deref().unwrap_or_default().as_bytes(),
        record.id.as_bytes(),
        &canonical,
        read.as_bytes(),
    ];
    if let Some(verify) = &verify {
        parts.push(verify.as_bytes());
    }
    Fingerprint {
        print: format!("{FORM}{}", digest(&parts)),
        earlier: earlier_form(request, (route, record), verify.as_deref()),
        secrets,
    }
}

/// The print an outcome kept before [`FORM`] holds: the raw body and the
/// precondition header lines as sent.
fn earlier_form(request: &Request, (route, record): (&str, &Key), verify: Option<&str>) -> String {
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
    if let Some(verify) = verify {
        parts.push(verify.as_bytes());
    }
    digest(&parts)
}

/// The body as canonical JSON into `out`, each secret string (a whole
/// secret field's, a member's of a sealed-values field) written as the mark
/// `true`, which no valid request holds there, and taken into `secrets`.
fn write_body(
    body: &Map<String, Value>,
    fields: &[Field],
    out: &mut Vec<u8>,
    secrets: &mut Vec<(SecretAt, Secret)>,
) {
    write_object(body, out, |name, value, out| {
        let field = fields.iter().find(|field| field.name == name);
        match (
            field.and_then(|field| Some((field.name, field.sealing()?))),
            value,
        ) {
            (Some((field, Sealing::Whole)), Value::String(secret)) => {
                secrets.push((SecretAt::Whole(field), Secret::from(secret.as_str())));
                out.extend_from_slice(b"true");
            }
            (Some((field, Sealing::Values { .. })), Value::Object(values)) => {
                write_object(values, out, |member, value, out| match value {
                    Value::String(secret) => {
                        secrets.push((
                            SecretAt::Member(field, member.clone()),
                            Secret::from(secret.as_str()),
                        ));
                        out.extend_from_slice(b"true");
                    }
                    other => write_value(other, out),
                });
            }
            _ => write_value(value, out),
        }
    });
}

/// `members` as a canonical JSON object into `out`: sorted by name, each
/// value written by `write`.
fn write_object<'a>(
    members: &'a Map<String, Value>,
    out: &mut Vec<u8>,
    mut write: impl FnMut(&'a String, &'a Value, &mut Vec<u8>),
) {
    let mut members: Vec<(&String, &Value)> = members.iter().collect();
    members.sort_by(|a, b| a.0.cmp(b.0));
    out.push(b'{');
    for (index, (name, value)) in members.into_iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        write_string(name, out);
        out.push(b':');
        write(name, value, out);
    }
    out.push(b'}');
}

/// `value` as canonical JSON into `out`.
fn write_value(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(members) => write_object(members, out, |_, value, out| write_value(value, out)),
        Value::Array(items) => {
            out.push(b'[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write_value(item, out);
            }
            out.push(b']');
        }
        Value::String(text) => write_string(text, out),
        // As written (arbitrary precision): no two numbers collide through a float.
        Value::Number(number) => out.extend_from_slice(number.to_string().as_bytes()),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Null => out.extend_from_slice(b"null"),
    }
}

/// `text` as a JSON string, escaped as serde_json escapes (one spelling per text).
fn write_string(text: &str, out: &mut Vec<u8>) {
    // Writing a string into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, text);
}

/// The preconditions as read: what they accept, not how they were spelled
/// (`"8" ,` and `"8"` alike; an `If-Unmodified-Since` ignored is none).
fn read_preconditions(preconditions: &Preconditions) -> String {
    let versions = |versions: &[u64]| {
        let mut versions = versions.to_vec();
        versions.sort_unstable();
        versions.dedup();
        versions.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
    };
    let if_match = preconditions
        .if_match
        .as_deref()
        .map_or_else(|| "-".to_owned(), versions);
    let if_none_match = match &preconditions.if_none_match {
        None => "-".to_owned(),
        Some(NoneMatch::Any) => "*".to_owned(),
        Some(NoneMatch::Versions(listed)) => versions(listed),
    };
    let since = preconditions.unmodified_before.as_deref().unwrap_or("-");
    format!("if-match={if_match};if-none-match={if_none_match};before={since}")
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

    /// The print and secrets of a PUT of `body` with these header lines, for the record kind `R`.
    fn print_of<R: crate::records::Resource>(body: &str, headers: &[(&str, &str)]) -> Fingerprint {
        let request = request(&[], headers, body);
        let record = Key {
            project_id: None,
            id: "1".into(),
        };
        let read = crate::json::parse_object(body.as_bytes()).expect("a JSON object");
        let preconditions = crate::request::preconditions(&request).expect("preconditions");
        fingerprint(
            &request,
            ("/r", &record),
            &read,
            (R::FIELDS, &preconditions),
            None,
        )
    }

    #[test]
    fn a_print_holds_no_secret_and_is_the_body_s_meaning_not_its_spelling() {
        use crate::records::{ApiKey, McpServer};
        let first = print_of::<ApiKey>(r#"{"name": "n", "api_key": "sk-one"}"#, &[]);
        // Spelled otherwise: members reordered, whitespace, an escape.
        let respelled = print_of::<ApiKey>("{\"api_key\":\"sk-one\",\n \"n\\u0061me\":\"n\"}", &[]);
        assert_eq!(first.print(), respelled.print());
        // Another key: the same print (it cannot test a guess), other secrets.
        let other_key = print_of::<ApiKey>(r#"{"name": "n", "api_key": "sk-two"}"#, &[]);
        assert_eq!(first.print(), other_key.print());
        assert_eq!(
            first.secrets,
            vec![(SecretAt::Whole("api_key"), Secret::from("sk-one"))]
        );
        assert_ne!(first.secrets, other_key.secrets);
        assert!(first.print().starts_with(FORM));
        // Anything else the body says is in the print.
        for other in [
            r#"{"name": "m", "api_key": "sk-one"}"#,
            r#"{"name": "n"}"#,
            r#"{"name": "n", "api_key": "sk-one", "enabled": true}"#,
        ] {
            assert_ne!(print_of::<ApiKey>(other, &[]).print(), first.print(), "{other}");
        }

        // Header values are secrets, their names are not; a null is no secret.
        let headers = print_of::<McpServer>(r#"{"headers": {"B": "two", "A": "one", "C": null}}"#, &[]);
        let other_values = print_of::<McpServer>(r#"{"headers": {"A": "1", "B": "2", "C": null}}"#, &[]);
        assert_eq!(headers.print(), other_values.print());
        assert_eq!(
            headers.secrets,
            vec![
                (SecretAt::Member("headers", "A".into()), Secret::from("one")),
                (SecretAt::Member("headers", "B".into()), Secret::from("two")),
            ]
        );
        for other in [
            r#"{"headers": {"A": "one", "B": "two"}}"#,
            r#"{"headers": {"a": "one", "B": "two", "C": null}}"#,
            r#"{"headers": {"A": "one", "B": "two", "C": null}, "name": "n"}"#,
        ] {
            assert_ne!(
                print_of::<McpServer>(other, &[]).print(),
                headers.print(),
                "{other}"
            );
        }

        // Numbers as written: two that one float would hold alike differ.
        let a = print_of::<crate::records::Model>(
            r#"{"parameters": {"x": 12345678901234567890123456789012345678}}"#,
            &[],
        );
        let b = print_of::<crate::records::Model>(
            r#"{"parameters": {"x": 12345678901234567890123456789012345679}}"#,
            &[],
        );
        assert_ne!(a.print(), b.print());
    }

    #[test]
    fn a_print_holds_the_preconditions_as_read() {
        use crate::records::Model;
        let body = r#"{"name": "n"}"#;
        let plain = print_of::<Model>(body, &[]);
        let print = |headers: &[(&str, &str)]| print_of::<Model>(body, headers).print().to_owned();
        assert_eq!(
            print(&[("if-match", "\"8\"")]),
            print(&[("if-match", " \"8\" ,")])
        );
        assert_eq!(
            print(&[("if-match", "\"8\", \"9\"")]),
            print(&[("if-match", "\"9\""), ("if-match", "\"8\"")])
        );
        assert_ne!(print(&[("if-match", "\"8\"")]), print(&[("if-match", "\"9\"")]));
        assert_ne!(print(&[("if-match", "\"8\"")]), plain.print());
        assert_ne!(print(&[("if-none-match", "*")]), plain.print());
        // An If-Unmodified-Since that is no date is ignored, so no precondition.
        assert_eq!(print(&[("if-unmodified-since", "garbage")]), plain.print());
        assert_ne!(
            print(&[("if-unmodified-since", "Sun, 29 Nov 2026 08:00:00 GMT")]),
            plain.print()
        );
    }

    #[test]
    fn an_outcome_kept_in_the_earlier_form_is_found_by_it() {
        use crate::records::ApiKey;
        let body = r#"{"api_key": "sk-one"}"#;
        let print = print_of::<ApiKey>(body, &[]);
        // The earlier form digested the raw body, secrets in it: nothing left to compare.
        let earlier = earlier_form(
            &request(&[], &[], body),
            (
                "/r",
                &Key {
                    project_id: None,
                    id: "1".into(),
                },
            ),
            None,
        );
        assert_eq!(print.matches(&earlier).map(<[_]>::len), Some(0));
        assert_eq!(print.matches(print.print()).map(<[_]>::len), Some(1));
        assert!(print.matches("2:0000").is_none());
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

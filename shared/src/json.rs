//! Strict JSON: the body must be one UTF-8 JSON object whose objects have no
//! repeated keys, and numbers keep their decimal text (serde_json's
//! `arbitrary_precision`) so DynamoDB's 38-digit numbers survive unchanged.

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::error::{ApiError, FieldError};

/// Parses a request body into a JSON object, or says why it is not one.
///
/// Error messages carry only positions and the kind of problem, never a
/// piece of the body, so they cannot echo a secret.
pub fn parse_object(bytes: &[u8]) -> Result<Map<String, Value>, ApiError> {
    let invalid = |code, message: String| ApiError::InvalidJson(FieldError::new("body", code, message));
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(invalid("empty", "a JSON object is required".into()));
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|_| invalid("invalid_utf8", "the body is not valid UTF-8".into()))?;
    let syntax = |error: serde_json::Error| {
        let message = match error.classify() {
            serde_json::error::Category::Data => format!(
                "repeated object key at line {} column {}",
                error.line(),
                error.column()
            ),
            _ => format!(
                "not valid JSON at line {} column {}",
                error.line(),
                error.column()
            ),
        };
        invalid("syntax", message)
    };
    // Two passes over at most 64 KiB: the first only checks keys for
    // repeats, which serde_json's own Value silently lets the last one win.
    let mut checker = serde_json::Deserializer::from_str(text);
    UniqueKeys.deserialize(&mut checker).map_err(syntax)?;
    checker.end().map_err(syntax)?;
    match serde_json::from_str::<Value>(text).map_err(syntax)? {
        Value::Object(map) => Ok(map),
        _ => Err(invalid("not_object", "the body must be a JSON object".into())),
    }
}

/// Walks any JSON value and fails on the first object with a repeated key.
struct UniqueKeys;

impl<'de> DeserializeSeed<'de> for UniqueKeys {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for UniqueKeys {
    type Value = ();

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(UniqueKeys)?.is_some() {}
        Ok(())
    }

    // With arbitrary_precision a number arrives as a one-entry map; one
    // entry can never repeat, so it needs no special case here.
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key) {
                return Err(de::Error::custom("repeated object key"));
            }
            map.next_value_seed(UniqueKeys)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(bytes: &[u8]) -> &'static str {
        match parse_object(bytes) {
            Err(ApiError::InvalidJson(field)) => field.code,
            other => panic!("expected invalid_json, got {other:?}"),
        }
    }

    #[test]
    fn objects_parse_and_keep_number_text() {
        let map = parse_object(br#"{"n": 1.50e3, "big": 12345678901234567890123456789012345678}"#);
        let map = map.unwrap_or_default();
        assert_eq!(map["n"].to_string(), "1.50e+3");
        assert_eq!(map["big"].to_string(), "12345678901234567890123456789012345678");
    }

    #[test]
    fn every_kind_of_non_object_is_invalid_json() {
        assert_eq!(code(b""), "empty");
        assert_eq!(code(b"  \n"), "empty");
        assert_eq!(code(b"{"), "syntax");
        assert_eq!(code(b"{} {}"), "syntax");
        assert_eq!(code(b"[1]"), "not_object");
        assert_eq!(code(b"null"), "not_object");
        assert_eq!(code(b"\"x\""), "not_object");
        assert_eq!(code(b"{\"name\": \"\xff\"}"), "invalid_utf8");
    }

    #[test]
    fn repeated_keys_are_refused_at_any_depth() {
        assert_eq!(code(br#"{"a": 1, "a": 2}"#), "syntax");
        assert_eq!(code(br#"{"p": [{"x": 1, "x": 1}]}"#), "syntax");
        assert!(parse_object(br#"{"a": {"a": {"a": 1}}}"#).is_ok());
    }

    #[test]
    fn messages_never_quote_the_body() {
        let secret = "sk-live-SENTINEL";
        for body in [
            format!(r#"{{"api_key": "{secret}", "api_key": "{secret}"}}"#),
            format!(r#"{{"api_key": "{secret}""#),
            format!(r#"{{"api_key": {secret}}}"#),
        ] {
            let error = parse_object(body.as_bytes()).err().map(|e| format!("{e:?}"));
            let error = error.unwrap_or_default();
            assert!(!error.is_empty());
            assert!(!error.contains("SENTINEL"), "{error}");
        }
    }
}

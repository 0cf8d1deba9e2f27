//! Strict JSON: the body must be one UTF-8 JSON object whose objects have no
//! repeated keys, and numbers keep their decimal text (serde_json's
//! `arbitrary_precision`) so DynamoDB's 38-digit numbers survive unchanged.
//!
//! Keys are data at every depth. serde_json gives two key names a meaning
//! of their own: with `arbitrary_precision` it hands every number to
//! `Value` as a one-entry object keyed [`NUMBER_KEY`], and with `raw_value`
//! an object keyed [`RAW_VALUE_KEY`] is parsed again from its string. A body
//! that spells either key itself is refused (`reserved_key`), so no object
//! can turn into a number or smuggle keys past the repeat check.

use std::cell::Cell;
use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::error::{ApiError, FieldError};

/// The key serde_json's `arbitrary_precision` numbers travel under.
pub const NUMBER_KEY: &str = "$serde_json::private::Number";
/// The key serde_json's `raw_value` values travel under.
pub const RAW_VALUE_KEY: &str = "$serde_json::private::RawValue";

/// What the checking pass found wrong beyond syntax.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Problem {
    RepeatedKey,
    ReservedKey,
}

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
    let problem = Cell::new(None);
    let syntax = |error: serde_json::Error| match problem.get() {
        Some(Problem::ReservedKey) => invalid(
            "reserved_key",
            format!(
                "object keys must not be {NUMBER_KEY} or {RAW_VALUE_KEY} (line {} column {})",
                error.line(),
                error.column()
            ),
        ),
        Some(Problem::RepeatedKey) => invalid(
            "syntax",
            format!(
                "repeated object key at line {} column {}",
                error.line(),
                error.column()
            ),
        ),
        None => invalid(
            "syntax",
            format!(
                "not valid JSON at line {} column {}",
                error.line(),
                error.column()
            ),
        ),
    };
    // Two passes over at most 64 KiB: the first only checks keys (repeats,
    // which serde_json's own Value lets the last one win, and reserved
    // names), so the second builds a Value from data that means only itself.
    let mut checker = serde_json::Deserializer::from_str(text);
    Keys { problem: &problem }
        .deserialize(&mut checker)
        .map_err(syntax)?;
    checker.end().map_err(syntax)?;
    match serde_json::from_str::<Value>(text).map_err(syntax)? {
        Value::Object(map) => Ok(map),
        _ => Err(invalid("not_object", "the body must be a JSON object".into())),
    }
}

/// Walks any JSON value and fails on the first object with a repeated or
/// reserved key, noting which in `problem`.
#[derive(Clone, Copy)]
struct Keys<'p> {
    problem: &'p Cell<Option<Problem>>,
}

impl<'de> DeserializeSeed<'de> for Keys<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Keys<'_> {
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
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == NUMBER_KEY || key == RAW_VALUE_KEY {
                // A number arrives as {NUMBER_KEY: its digits}, the digits
                // as an owned String; text in the body arrives as &str.
                self.problem.set(Some(Problem::ReservedKey));
                if key == RAW_VALUE_KEY {
                    return Err(de::Error::custom("reserved object key"));
                }
                map.next_value_seed(NumberDigits)?;
                self.problem.set(None);
                continue;
            }
            if !seen.insert(key) {
                self.problem.set(Some(Problem::RepeatedKey));
                return Err(de::Error::custom("repeated object key"));
            }
            map.next_value_seed(self)?;
        }
        Ok(())
    }
}

/// Accepts only the digits serde_json itself puts under [`NUMBER_KEY`].
struct NumberDigits;

impl<'de> DeserializeSeed<'de> for NumberDigits {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl Visitor<'_> for NumberDigits {
    type Value = ();

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a number")
    }

    fn visit_string<E>(self, _: String) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Err(E::custom("reserved object key"))
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
    fn serde_json_really_gives_these_keys_a_meaning() {
        // If serde_json ever renames its marker, this fails and the check
        // above must follow it.
        let value: Value =
            serde_json::from_str(&format!(r#"{{"a": {{"{NUMBER_KEY}": "42"}}}}"#)).unwrap_or_default();
        assert!(value["a"].is_number(), "{value}");
    }

    #[test]
    fn reserved_keys_are_refused_at_any_depth() {
        for key in [NUMBER_KEY, RAW_VALUE_KEY] {
            // The same key, also with a JSON escape in its spelling.
            let escaped = key.replace('N', "\\u004e").replace('R', "\\u0052");
            for spelled in [key.to_string(), escaped] {
                for body in [
                    format!(r#"{{"{spelled}": "42"}}"#),
                    format!(r#"{{"parameters": {{"{spelled}": "42"}}}}"#),
                    format!(r#"{{"parameters": {{"a": [{{"b": {{"{spelled}": "1"}}}}]}}}}"#),
                    format!(r#"{{"parameters": {{"x": 1, "{spelled}": "{{\"a\":1,\"a\":2}}"}}}}"#),
                    format!(r#"{{"headers": {{"{spelled}": 7}}}}"#),
                    format!(r#"{{"parameters": {{"{spelled}": {{"a": 1, "a": 2}}}}}}"#),
                ] {
                    assert_eq!(code(body.as_bytes()), "reserved_key", "{body}");
                }
            }
        }
        // Near misses are ordinary keys.
        let map = parse_object(br#"{"p": {"$serde_json::private::Numbers": "42", "serde_json": 1}}"#);
        assert_eq!(map.map(|m| m["p"].as_object().map(|o| o.len())), Ok(Some(2)));
        // Numbers themselves still parse, at any depth.
        assert!(parse_object(br#"{"a": [1, {"b": -2.5e-3}], "c": 0e2147483648}"#).is_ok());
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

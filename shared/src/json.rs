//! Strict JSON: the body must be one UTF-8 JSON object whose objects have no
//! repeated keys, and numbers keep their decimal text (serde_json's
//! `arbitrary_precision`) so DynamoDB's 38-digit numbers survive unchanged.
//!
//! Keys are data at every depth. serde_json gives two key names a meaning
//! of their own: with `arbitrary_precision` it hands every number to a
//! visitor as a one-entry object keyed [`NUMBER_KEY`], and with `raw_value`
//! an object keyed [`RAW_VALUE_KEY`] is parsed again from its string. A body
//! that spells either key itself is refused (`reserved_key`), so no object
//! can turn into a number or smuggle keys past the repeat check.
//!
//! The body is read in one pass that builds the value itself: it checks keys
//! as they arrive, sizes every array and object to its content, and stops
//! after [`MAX_BODY_VALUES`] values, so what a body costs in memory stays a
//! small multiple of its length whatever its shape.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use crate::error::{ApiError, FieldError};

/// The key serde_json's `arbitrary_precision` numbers travel under.
pub const NUMBER_KEY: &str = "$serde_json::private::Number";
/// The key serde_json's `raw_value` values travel under.
pub const RAW_VALUE_KEY: &str = "$serde_json::private::RawValue";

/// The most JSON values (objects, arrays, strings, numbers, booleans and
/// nulls, at any depth) one body may hold. The densest valid update, 16 KiB
/// of one-digit numbers in `parameters`, holds about 8 200; a body holding
/// more cannot be valid, so it is refused before it costs more memory.
pub const MAX_BODY_VALUES: usize = 10_000;

/// What the reading pass found wrong beyond syntax.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Problem {
    RepeatedKey,
    ReservedKey,
    TooManyValues,
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
    let reading = Reading {
        problem: Cell::new(None),
        values: Cell::new(0),
    };
    let refuse = |error: serde_json::Error| {
        let (line, column) = (error.line(), error.column());
        match reading.problem.get() {
            Some(Problem::ReservedKey) => invalid(
                "reserved_key",
                format!(
                    "object keys must not be {NUMBER_KEY} or {RAW_VALUE_KEY} (line {line} column {column})"
                ),
            ),
            Some(Problem::RepeatedKey) => invalid(
                "syntax",
                format!("repeated object key at line {line} column {column}"),
            ),
            Some(Problem::TooManyValues) => invalid(
                "too_many_values",
                format!(
                    "the body must hold at most {MAX_BODY_VALUES} JSON values, more than any valid update needs (line {line} column {column})"
                ),
            ),
            None => invalid("syntax", format!("not valid JSON at line {line} column {column}")),
        }
    };
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let value = Build { reading: &reading }
        .deserialize(&mut deserializer)
        .map_err(refuse)?;
    deserializer.end().map_err(refuse)?;
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(invalid("not_object", "the body must be a JSON object".into())),
    }
}

/// The state one read shares between all levels of the value.
struct Reading {
    problem: Cell<Option<Problem>>,
    values: Cell<usize>,
}

impl Reading {
    fn fail<E: de::Error>(&self, problem: Problem) -> E {
        self.problem.set(Some(problem));
        E::custom("refused")
    }
}

/// Builds one JSON value, and everything inside it.
#[derive(Clone, Copy)]
struct Build<'r> {
    reading: &'r Reading,
}

impl<'de> DeserializeSeed<'de> for Build<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        // Counted before it is read, so a body stops costing memory at the limit.
        let values = self.reading.values.get() + 1;
        if values > MAX_BODY_VALUES {
            return Err(self.reading.fail(Problem::TooManyValues));
        }
        self.reading.values.set(values);
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Build<'_> {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }
    // With `arbitrary_precision` numbers arrive through `visit_map`; these
    // keep the visitor whole should that feature ever be turned off.
    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::from(value))
    }
    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::from(value))
    }
    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        Ok(Number::from_f64(value).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_owned()))
    }
    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self)? {
            items.push(item);
        }
        // Growth leaves up to half the vector empty; a finished array
        // keeps only what it holds.
        items.shrink_to_fit();
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == NUMBER_KEY {
                // serde_json's own number: its digits come as an owned
                // String, while text from the body arrives as &str.
                let digits = map.next_value_seed(NumberDigits {
                    reading: self.reading,
                })?;
                return digits.parse().map(Value::Number).map_err(de::Error::custom);
            }
            if key == RAW_VALUE_KEY {
                return Err(self.reading.fail(Problem::ReservedKey));
            }
            // Checked before the value is read, so the error points at the key.
            if object.contains_key(&key) {
                return Err(self.reading.fail(Problem::RepeatedKey));
            }
            let value = map.next_value_seed(self)?;
            object.insert(key, value);
        }
        // Collecting again sizes the map to its entries, not to its growth.
        Ok(Value::Object(object.into_iter().collect()))
    }
}

/// Accepts only the digits serde_json itself puts under [`NUMBER_KEY`].
struct NumberDigits<'r> {
    reading: &'r Reading,
}

impl<'de> DeserializeSeed<'de> for NumberDigits<'_> {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<String, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for NumberDigits<'_> {
    type Value = String;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a number")
    }

    fn visit_string<E>(self, digits: String) -> Result<String, E> {
        Ok(digits)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<String, E> {
        Err(self.reading.fail(Problem::ReservedKey))
    }

    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<String, A::Error> {
        Err(self.reading.fail(Problem::ReservedKey))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<String, A::Error> {
        Err(self.reading.fail(Problem::ReservedKey))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<String, E> {
        Err(self.reading.fail(Problem::ReservedKey))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<String, E> {
        Err(self.reading.fail(Problem::ReservedKey))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<String, E> {
        Err(self.reading.fail(Problem::ReservedKey))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<String, E> {
        Err(self.reading.fail(Problem::ReservedKey))
    }

    fn visit_unit<E: de::Error>(self) -> Result<String, E> {
        Err(self.reading.fail(Problem::ReservedKey))
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

    /// `{"a": [0, 0, …]}` holding `values` JSON values in all.
    fn zeros(values: usize) -> String {
        format!(r#"{{"a": [{}]}}"#, vec!["0"; values - 2].join(","))
    }

    #[test]
    fn the_body_holds_at_most_max_values() {
        assert!(parse_object(zeros(MAX_BODY_VALUES).as_bytes()).is_ok());
        assert_eq!(code(zeros(MAX_BODY_VALUES + 1).as_bytes()), "too_many_values");
        // Every kind of value counts, and nesting does not hide any.
        let objects = format!(
            "{{\"a\": [{}]}}",
            vec!["{\"b\": [null]}"; MAX_BODY_VALUES / 3].join(",")
        );
        assert_eq!(code(objects.as_bytes()), "too_many_values");
        let strings = format!("{{\"a\": [{}]}}", vec!["\"\""; MAX_BODY_VALUES].join(","));
        assert_eq!(code(strings.as_bytes()), "too_many_values");
    }

    #[test]
    fn the_densest_valid_parameters_fit_under_the_value_limit() {
        use crate::rules::{MAX_PARAMETERS_BYTES, Rule, testing::problems};
        // One-digit numbers, two bytes each: the most values parameters can hold.
        let count = (MAX_PARAMETERS_BYTES - r#"{"a":[]}"#.len()).div_ceil(2);
        let parameters = format!(r#"{{"a":[{}]}}"#, vec!["0"; count].join(","));
        assert_eq!(parameters.len(), MAX_PARAMETERS_BYTES - 1);
        let body =
            format!(r#"{{"name": "n", "model_id": "m", "enabled": true, "parameters": {parameters}}}"#);
        let map = parse_object(body.as_bytes()).unwrap_or_default();
        assert!(problems(Rule::Parameters, map["parameters"].clone()).is_empty());
        assert!(count + 10 < MAX_BODY_VALUES, "{count}");
    }

    #[test]
    fn containers_keep_no_growth_room() {
        let map = parse_object(zeros(1000).as_bytes()).unwrap_or_default();
        let items = map["a"].as_array().map_or(0, Vec::capacity);
        assert_eq!(items, 998);
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

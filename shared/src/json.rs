//! Strict JSON: the body must be one UTF-8 JSON object whose objects have no
//! repeated keys, and numbers keep their decimal text (serde_json's
//! `arbitrary_precision`) so DynamoDB's 38-digit numbers survive unchanged.
//! One pass builds the value; keys are data at every depth ([`NUMBER_KEY`]
//! and [`RAW_VALUE_KEY`] included), and it stops after [`MAX_BODY_VALUES`]
//! values or [`MAX_BODY_DEPTH`] levels. See docs/api.md, Field rules.

use std::cell::{Cell, RefCell};
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

/// The deepest a body may nest, the body object being level 1: well above
/// the deepest valid update (`parameters` 16 levels deep, so 17), and below
/// serde_json's own limit of 128, past which it would call the body invalid
/// JSON.
pub const MAX_BODY_DEPTH: usize = 64;

/// What the reading pass found wrong beyond syntax.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Problem {
    RepeatedKey,
    TooManyValues,
    TooDeep,
}

/// Parses a request body into a JSON object, or says why it is not one.
///
/// Error messages carry only positions and the kind of problem, never a
/// piece of the body, so they cannot echo a secret.
pub fn parse_object(bytes: &[u8]) -> Result<Map<String, Value>, ApiError> {
    let invalid = |code, message: String| ApiError::InvalidJson(FieldError::new("body", code, message));
    // JSON's whitespace: space, tab, line feed, carriage return.
    if bytes.iter().all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r')) {
        return Err(invalid("empty", "a JSON object is required".into()));
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|_| invalid("invalid_utf8", "the body is not valid UTF-8".into()))?;
    let reading = Reading {
        problem: Cell::new(None),
        values: Cell::new(0),
        depth: Cell::new(0),
        field: RefCell::new(None),
    };
    let refuse = |error: serde_json::Error| {
        // The line, never the column: a column inside or after a secret's
        // string would measure it, and no secret holds a line break.
        let line = error.line();
        // Valid JSON that no update looks like: the field it is in is refused.
        let field = |code, message: String| match reading.field.take() {
            Some(field) => ApiError::Validation(vec![FieldError::new(&field, code, message)]),
            None => invalid("not_object", "the body must be a JSON object".into()),
        };
        // The reading stopped at a limit; a body that is not JSON at all is that first.
        let at_limit = matches!(
            reading.problem.get(),
            Some(Problem::TooManyValues | Problem::TooDeep)
        );
        if let Some(line) = at_limit.then(|| syntax_error(text)).flatten() {
            return invalid("syntax", format!("not valid JSON at line {line}"));
        }
        match reading.problem.get() {
            Some(Problem::RepeatedKey) => invalid("syntax", format!("repeated object key at line {line}")),
            Some(Problem::TooManyValues) => field(
                "too_many_values",
                format!(
                    "a body holds at most {MAX_BODY_VALUES} JSON values, more than any valid update needs"
                ),
            ),
            Some(Problem::TooDeep) => field(
                "too_deep",
                format!("a body nests at most {MAX_BODY_DEPTH} levels deep, deeper than any valid update"),
            ),
            None => invalid("syntax", format!("not valid JSON at line {line}")),
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

/// The line where `text` stops being one JSON text (RFC 8259, as serde_json reads it: no lone
/// surrogate in an escape), or `None` if it is one. Read with a stack, not by recursion: it judges
/// the bodies the building pass stopped reading at a limit, however deep they nest.
fn syntax_error(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut at = 0;
    // The arrays (`[`) and objects (`{`) open around the value being read.
    let mut open = Vec::new();
    let line = |at: usize| {
        1 + bytes[..at.min(bytes.len())]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
    };
    loop {
        // A value, then whatever closes or continues the containers around it.
        skip_space(bytes, &mut at);
        let read = match bytes.get(at) {
            Some(b'[' | b'{') => {
                let container = bytes[at];
                at += 1;
                skip_space(bytes, &mut at);
                let empty = if container == b'[' { b']' } else { b'}' };
                if bytes.get(at) == Some(&empty) {
                    at += 1;
                    true
                } else {
                    open.push(container);
                    if container == b'{' && !member_key(bytes, &mut at) {
                        return Some(line(at));
                    }
                    continue;
                }
            }
            Some(b'"') => string(bytes, &mut at),
            Some(b't') => literal(bytes, &mut at, b"true"),
            Some(b'f') => literal(bytes, &mut at, b"false"),
            Some(b'n') => literal(bytes, &mut at, b"null"),
            Some(_) => number(bytes, &mut at),
            None => false,
        };
        if !read {
            return Some(line(at));
        }
        loop {
            skip_space(bytes, &mut at);
            let Some(&container) = open.last() else {
                return (at != bytes.len()).then(|| line(at));
            };
            match (container, bytes.get(at)) {
                (_, Some(b',')) => {
                    at += 1;
                    if container == b'{' && !member_key(bytes, &mut at) {
                        return Some(line(at));
                    }
                    break;
                }
                (b'[', Some(b']')) | (b'{', Some(b'}')) => {
                    at += 1;
                    open.pop();
                }
                _ => return Some(line(at)),
            }
        }
    }
}

fn skip_space(bytes: &[u8], at: &mut usize) {
    while matches!(bytes.get(*at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        *at += 1;
    }
}

/// An object member's key and its colon.
fn member_key(bytes: &[u8], at: &mut usize) -> bool {
    skip_space(bytes, at);
    if !string(bytes, at) {
        return false;
    }
    skip_space(bytes, at);
    let colon = bytes.get(*at) == Some(&b':');
    *at += usize::from(colon);
    colon
}

fn literal(bytes: &[u8], at: &mut usize, word: &[u8]) -> bool {
    let matched = bytes.get(*at..*at + word.len()) == Some(word);
    *at += if matched { word.len() } else { 0 };
    matched
}

/// `-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?`
fn number(bytes: &[u8], at: &mut usize) -> bool {
    let digits = |at: &mut usize| {
        let start = *at;
        while bytes.get(*at).is_some_and(u8::is_ascii_digit) {
            *at += 1;
        }
        *at - start
    };
    *at += usize::from(bytes.get(*at) == Some(&b'-'));
    match bytes.get(*at) {
        Some(b'0') => *at += 1,
        Some(b'1'..=b'9') => {
            digits(at);
        }
        _ => return false,
    }
    if bytes.get(*at) == Some(&b'.') {
        *at += 1;
        if digits(at) == 0 {
            return false;
        }
    }
    if matches!(bytes.get(*at), Some(b'e' | b'E')) {
        *at += 1;
        *at += usize::from(matches!(bytes.get(*at), Some(b'+' | b'-')));
        if digits(at) == 0 {
            return false;
        }
    }
    true
}

/// A string: no control character, only JSON's escapes, a surrogate escape only in a pair.
fn string(bytes: &[u8], at: &mut usize) -> bool {
    if bytes.get(*at) != Some(&b'"') {
        return false;
    }
    *at += 1;
    let hex = |at: &mut usize| {
        let code = bytes
            .get(*at..*at + 4)
            .and_then(|digits| std::str::from_utf8(digits).ok())
            .filter(|digits| digits.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|digits| u16::from_str_radix(digits, 16).ok());
        *at += if code.is_some() { 4 } else { 0 };
        code
    };
    loop {
        match bytes.get(*at) {
            Some(b'"') => {
                *at += 1;
                return true;
            }
            Some(b'\\') => {
                *at += 1;
                match bytes.get(*at) {
                    Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => *at += 1,
                    Some(b'u') => {
                        *at += 1;
                        match hex(at) {
                            Some(0xD800..=0xDBFF) => {
                                if bytes.get(*at..*at + 2) != Some(b"\\u".as_slice()) {
                                    return false;
                                }
                                *at += 2;
                                if !matches!(hex(at), Some(0xDC00..=0xDFFF)) {
                                    return false;
                                }
                            }
                            Some(0xDC00..=0xDFFF) | None => return false,
                            Some(_) => {}
                        }
                    }
                    _ => return false,
                }
            }
            Some(&byte) if byte >= 0x20 => *at += 1,
            _ => return false,
        }
    }
}

/// The state one read shares between all levels of the value.
struct Reading {
    problem: Cell<Option<Problem>>,
    values: Cell<usize>,
    depth: Cell<usize>,
    /// The body's field being read (a key of the body object).
    field: RefCell<Option<String>>,
}

impl Reading {
    fn fail<E: de::Error>(&self, problem: Problem) -> E {
        self.problem.set(Some(problem));
        E::custom("refused")
    }

    /// Counts one more value; fails past [`MAX_BODY_VALUES`].
    fn count<E: de::Error>(&self) -> Result<(), E> {
        let values = self.values.get() + 1;
        if values > MAX_BODY_VALUES {
            return Err(self.fail(Problem::TooManyValues));
        }
        self.values.set(values);
        Ok(())
    }

    /// Enters an array or object; fails past [`MAX_BODY_DEPTH`].
    fn enter<E: de::Error>(&self) -> Result<usize, E> {
        let depth = self.depth.get() + 1;
        if depth > MAX_BODY_DEPTH {
            return Err(self.fail(Problem::TooDeep));
        }
        self.depth.set(depth);
        Ok(depth)
    }

    fn leave(&self) {
        self.depth.set(self.depth.get().saturating_sub(1));
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
        self.reading.count()?;
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
    // Integers that fit 64 bits arrive here; other numbers through
    // `visit_map` (see `NUMBER_KEY`). The text is the same either way.
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
        self.reading.enter()?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self)? {
            items.push(item);
        }
        self.reading.leave();
        // Growth leaves up to half the vector empty; a finished array
        // keeps only what it holds.
        items.shrink_to_fit();
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        let mut depth = None;
        while let Some(key) = map.next_key::<String>()? {
            let value = if key == NUMBER_KEY && depth.is_none() {
                // The first key: serde_json's own number, or a body that
                // spells the key, which is then an ordinary key. Only its
                // value tells which, so the object is entered once that is
                // known: before an array or object value is read (see
                // `NumberOrValue`), after a scalar one.
                if self.reading.depth.get() == 0 {
                    self.reading.field.replace(Some(key.clone()));
                }
                match map.next_value_seed(NumberOrValue { build: self })? {
                    Read::Number(digits) => {
                        return digits.parse().map(Value::Number).map_err(de::Error::custom);
                    }
                    Read::Scalar(value) => {
                        depth = Some(self.reading.enter()?);
                        value
                    }
                    Read::Container(value, level) => {
                        depth = Some(level);
                        value
                    }
                }
            } else {
                let level = match depth {
                    Some(level) => level,
                    None => *depth.insert(self.reading.enter()?),
                };
                // Checked before the value is read, so the error points at the key.
                if object.contains_key(&key) {
                    return Err(self.reading.fail(Problem::RepeatedKey));
                }
                if level == 1 {
                    self.reading.field.replace(Some(key.clone()));
                }
                map.next_value_seed(self)?
            };
            object.insert(key, value);
        }
        if depth.is_some() {
            self.reading.leave();
        }
        // Collecting again sizes the map to its entries, not to its growth.
        Ok(Value::Object(object.into_iter().collect()))
    }
}

/// What came under a [`NUMBER_KEY`] key: serde_json's digits, or a value
/// of the body's own: a scalar, or an array or object, read after the
/// object holding the key was entered at the given level.
enum Read {
    Number(String),
    Scalar(Value),
    Container(Value, usize),
}

/// Reads the value under a [`NUMBER_KEY`] key: an owned string is a
/// number's digits (serde_json's; text from the body is never owned), and
/// anything else is built like any value.
struct NumberOrValue<'r> {
    build: Build<'r>,
}

impl<'de> DeserializeSeed<'de> for NumberOrValue<'_> {
    type Value = Read;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Read, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl NumberOrValue<'_> {
    /// A value of the body's own, counted like every other.
    fn value<E: de::Error>(&self, value: Result<Value, E>) -> Result<Read, E> {
        self.build.reading.count()?;
        value.map(Read::Scalar)
    }

    /// An array or object of the body's own: the object holding the key
    /// is entered first, so the depth limit holds below it as anywhere.
    fn container<E: de::Error>(&self, read: impl FnOnce() -> Result<Value, E>) -> Result<Read, E> {
        self.build.reading.count()?;
        let level = self.build.reading.enter()?;
        read().map(|value| Read::Container(value, level))
    }
}

impl<'de> Visitor<'de> for NumberOrValue<'_> {
    type Value = Read;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_string<E>(self, digits: String) -> Result<Read, E> {
        Ok(Read::Number(digits))
    }
    fn visit_str<E: de::Error>(self, value: &str) -> Result<Read, E> {
        self.value(self.build.visit_str(value))
    }
    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Read, E> {
        self.value(self.build.visit_bool(value))
    }
    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Read, E> {
        self.value(self.build.visit_i64(value))
    }
    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Read, E> {
        self.value(self.build.visit_u64(value))
    }
    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Read, E> {
        self.value(self.build.visit_f64(value))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Read, E> {
        self.value(self.build.visit_unit())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Read, A::Error> {
        self.container(|| self.build.visit_seq(seq))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Read, A::Error> {
        self.container(|| self.build.visit_map(map))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn code(bytes: &[u8]) -> &'static str {
        match parse_object(bytes) {
            Err(ApiError::InvalidJson(field)) => field.code,
            other => panic!("expected invalid_json, got {other:?}"),
        }
    }

    /// The one field problem of a body that is JSON but no valid update.
    fn refused(bytes: &[u8]) -> (String, &'static str) {
        match parse_object(bytes) {
            Err(ApiError::Validation(fields)) if fields.len() == 1 => {
                (fields[0].field.clone(), fields[0].code)
            }
            other => panic!("expected validation_failed, got {other:?}"),
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
    fn a_syntax_error_does_not_measure_the_value_before_it() {
        // The same mistake after secrets of two lengths, as a repeat, a raw
        // control character inside the value, or a missing comma after it:
        // one message each, naming the line.
        let message = |body: String| match parse_object(body.as_bytes()) {
            Err(ApiError::InvalidJson(field)) => field.message,
            other => panic!("expected invalid_json, got {other:?}"),
        };
        for secret in ["sk-short", "sk-a-much-longer-secret-value-0123456789"] {
            for (body, expected) in [
                (
                    format!(r#"{{"api_key": "{secret}", "api_key": "x"}}"#),
                    "repeated object key at line 1",
                ),
                (
                    format!("{{\"api_key\": \"{secret}\u{1}\"}}"),
                    "not valid JSON at line 1",
                ),
                (
                    format!(r#"{{"headers": {{"A": "{secret}" "B": "c"}}}}"#),
                    "not valid JSON at line 1",
                ),
            ] {
                assert_eq!(message(body), expected);
            }
        }
        assert_eq!(message("{\n\"a\": 1,\n}".into()), "not valid JSON at line 3");
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
    fn reserved_keys_are_ordinary_keys_at_any_depth() {
        for key in [NUMBER_KEY, RAW_VALUE_KEY] {
            // The same key, also with a JSON escape in its spelling.
            let escaped = key.replace('N', "\\u004e").replace('R', "\\u0052");
            for spelled in [key.to_string(), escaped] {
                for (body, pointer, kept) in [
                    (
                        format!(r#"{{"{spelled}": "42"}}"#),
                        format!("/{key}"),
                        json!("42"),
                    ),
                    (
                        format!(r#"{{"parameters": {{"{spelled}": "42"}}}}"#),
                        format!("/parameters/{key}"),
                        json!("42"),
                    ),
                    (
                        format!(r#"{{"p": {{"a": [{{"b": {{"{spelled}": 1}}}}]}}}}"#),
                        format!("/p/a/0/b/{key}"),
                        json!(1),
                    ),
                    (
                        format!(r#"{{"p": {{"{spelled}": {{"x": [true]}}, "y": null}}}}"#),
                        format!("/p/{key}"),
                        json!({"x": [true]}),
                    ),
                    (
                        format!(r#"{{"p": {{"x": 1, "{spelled}": "{{\"a\":1,\"a\":2}}"}}}}"#),
                        format!("/p/{key}"),
                        json!("{\"a\":1,\"a\":2}"),
                    ),
                ] {
                    let map = parse_object(body.as_bytes());
                    let map = map.unwrap_or_else(|e| panic!("{body}: {e:?}"));
                    let value = Value::Object(map);
                    // pointer() reads "~1" as "/"; the keys hold ':' only.
                    assert_eq!(value.pointer(&pointer), Some(&kept), "{body}");
                }
                // The repeat check sees inside such an object, first key or not.
                for body in [
                    format!(r#"{{"p": {{"{spelled}": {{"a": 1, "a": 2}}}}}}"#),
                    format!(r#"{{"p": {{"{spelled}": 1, "{spelled}": 2}}}}"#),
                    format!(r#"{{"p": {{"x": 1, "{spelled}": 1, "x": 2}}}}"#),
                ] {
                    assert_eq!(code(body.as_bytes()), "syntax", "{body}");
                }
            }
        }
        // Numbers themselves still parse, at any depth, as numbers.
        let map = parse_object(br#"{"a": [1, {"b": -2.5e-3}], "c": 0e2147483648, "d": 1e400}"#);
        let map = map.unwrap_or_default();
        assert!(map["a"][1]["b"].is_number() && map["c"].is_number() && map["d"].is_number());
        assert_eq!(map["d"].to_string(), "1e+400");
    }

    #[test]
    fn a_body_nests_at_most_max_depth() {
        let nested = |depth: usize| {
            format!(
                r#"{{"parameters": {}0{}}}"#,
                "[".repeat(depth - 1),
                "]".repeat(depth - 1)
            )
        };
        assert!(parse_object(nested(MAX_BODY_DEPTH).as_bytes()).is_ok());
        for depth in [MAX_BODY_DEPTH + 1, 127, 128, 129, 5_000] {
            assert_eq!(
                refused(nested(depth).as_bytes()),
                ("parameters".to_string(), "too_deep"),
                "{depth}"
            );
        }
        // Objects keyed by the reserved keys count their level like any
        // other, in every shape: objects of objects, of arrays, mixed.
        for key in [NUMBER_KEY, RAW_VALUE_KEY, "a"] {
            let shapes: [(&str, &str, &str); 3] = [
                ("{\"K\":", "\"1\"", "}"),
                ("{\"K\":[", "1", "]}"),
                ("[{\"K\":", "null", "}]"),
            ];
            for (open, inner, close) in shapes {
                let open = open.replace('K', key);
                // `levels` nestings of the shape, each one or two levels.
                let body = |levels: usize| {
                    format!(
                        r#"{{"parameters": {}{inner}{}}}"#,
                        open.repeat(levels),
                        close.repeat(levels)
                    )
                };
                let per = if open.contains('[') { 2 } else { 1 };
                let fits = (MAX_BODY_DEPTH - 1) / per;
                assert!(
                    parse_object(body(fits).as_bytes()).is_ok(),
                    "{key} {open} x{fits}"
                );
                for levels in [fits + 1, 126, 127, 128, 200, 3_000] {
                    assert_eq!(
                        refused(body(levels).as_bytes()),
                        ("parameters".to_string(), "too_deep"),
                        "{key} {open} x{levels}"
                    );
                }
            }
        }
        // Not an object at the top: not_object, however deep.
        let array = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(code(array.as_bytes()), "not_object");
        // Only JSON's four whitespace characters make a body empty.
        assert_eq!(code(b" \t\r\n"), "empty");
        assert_eq!(code(b"\x0c"), "syntax");
    }

    #[test]
    fn a_body_past_a_limit_that_is_not_json_is_invalid_json() {
        let deep = |tail: &str| format!(r#"{{"parameters": {{"a": {}{tail}"#, "[".repeat(70));
        for body in [
            deep("}}}"),
            deep(""),
            deep(&format!("{}}}}} x", "]".repeat(70))),
            deep(&format!("1,{}}}}}", "]".repeat(70))),
            deep(&format!("\"\\ud800\"{}}}}}", "]".repeat(70))),
            format!(r#"{{"a": [{}]]}}"#, vec!["0"; MAX_BODY_VALUES].join(",")),
            format!(r#"{{"a": [{}, 01]}}"#, vec!["0"; MAX_BODY_VALUES].join(",")),
        ] {
            assert_eq!(code(body.as_bytes()), "syntax", "{}", &body[body.len() - 20..]);
        }
        // Valid JSON past a limit is still refused for the limit.
        assert_eq!(
            refused(deep(&format!("{}}}}}", "]".repeat(70))).as_bytes()),
            ("parameters".to_string(), "too_deep")
        );
    }

    /// `syntax_error` agrees with serde_json on texts shallow enough for both.
    #[test]
    fn syntax_error_agrees_with_serde_json() {
        let texts = [
            "{}",
            "[]",
            " [1, 2.5, -0, 1e5, 1E+2, -3.25e-7] ",
            r#"{"a": {"b": [true, false, null]}}"#,
            r#""\u00e9\ud83d\ude00\n\t\/\\\"""#,
            "0",
            "-0.0e0",
            "\"é\"",
            "[[], {}, [{}]]",
            "",
            " ",
            "{",
            "}",
            "[1,]",
            "[,1]",
            "{\"a\"}",
            "{\"a\":}",
            "{\"a\":1,}",
            "{1:2}",
            "01",
            "1.",
            ".5",
            "1e",
            "1e+",
            "+1",
            "-",
            "tru",
            "nul",
            "True",
            "[1 2]",
            "{\"a\":1 \"b\":2}",
            "\"\\x\"",
            "\"\\u12\"",
            "\"\\ud800\"",
            "\"\\udc00\"",
            "\"\\ud800\\u0041\"",
            "\"a\u{1}b\"",
            "[1]x",
            "1 2",
            "[1]]",
            "{\"a\":[}",
            "\u{c}1",
        ];
        for text in texts {
            let serde = serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
                && serde_json::from_str::<Value>(text).is_ok();
            assert_eq!(syntax_error(text).is_none(), serde, "{text:?}");
        }
        assert_eq!(syntax_error("[\n1,\n\n x]"), Some(4));
    }

    /// `{"a": [0, 0, …]}` holding `values` JSON values in all.
    fn zeros(values: usize) -> String {
        format!(r#"{{"a": [{}]}}"#, vec!["0"; values - 2].join(","))
    }

    #[test]
    fn the_body_holds_at_most_max_values() {
        assert!(parse_object(zeros(MAX_BODY_VALUES).as_bytes()).is_ok());
        let too_many = ("a".to_string(), "too_many_values");
        assert_eq!(refused(zeros(MAX_BODY_VALUES + 1).as_bytes()), too_many);
        // Every kind of value counts, and nesting does not hide any.
        let objects = format!(
            "{{\"a\": [{}]}}",
            vec!["{\"b\": [null]}"; MAX_BODY_VALUES / 3].join(",")
        );
        assert_eq!(refused(objects.as_bytes()), too_many);
        let strings = format!("{{\"a\": [{}]}}", vec!["\"\""; MAX_BODY_VALUES].join(","));
        assert_eq!(refused(strings.as_bytes()), too_many);
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

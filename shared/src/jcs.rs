//! RFC 8785, the JSON Canonicalization Scheme: one JSON text's canonical
//! bytes, read from the text itself (member by member as raw text, never as
//! a tree), so numbers keep the digits they were sent with until they are
//! read as the IEEE doubles the scheme requires. What the MCP tool pins
//! hash ([`crate::mcp::pin`]).

use std::borrow::Cow;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

/// How deep a canonicalized text may nest: each level is read once more
/// (as raw text) than the one above it, so the depth bounds the work.
pub const MAX_DEPTH: usize = 64;
/// The most object members a canonicalized text may hold, all its objects
/// together: members are sorted, so each is held until its object is
/// written (an array's elements are written as they are read, unbounded).
pub const MAX_MEMBERS: usize = 10_000;

/// Why a text has no canonical form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum JcsError {
    /// Not JSON.
    #[error("not JSON")]
    NotJson,
    /// An object names a member twice (I-JSON, which RFC 8785 requires,
    /// forbids it: readers disagree on which one counts).
    #[error("an object names a member twice")]
    DuplicateMember,
    /// A number no IEEE double holds (`1e400`).
    #[error("a number out of an IEEE double's range")]
    NumberOutOfRange,
    /// Nested deeper than [`MAX_DEPTH`].
    #[error("nested deeper than {MAX_DEPTH} levels")]
    TooDeep,
    /// More than [`MAX_MEMBERS`] object members.
    #[error("more than {MAX_MEMBERS} object members")]
    TooManyMembers,
}

/// Where canonical bytes go: a buffer, or a digest that never holds them.
pub trait Sink {
    /// Takes the next bytes.
    fn put(&mut self, bytes: &[u8]);
}

impl Sink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// The canonical form of the JSON text `text`, written to `out`.
pub fn write(text: &str, out: &mut dyn Sink) -> Result<(), JcsError> {
    // JSON as a whole first: the parts are then read as what they are
    // (Rust's own number parse would take `01` and `1.`).
    serde_json::from_str::<&RawValue>(text).map_err(|_| JcsError::NotJson)?;
    Writer {
        out,
        members_left: MAX_MEMBERS,
    }
    .value(text, 0)
}

/// An object's members, as names and raw values, in canonical order (by
/// their names' UTF-16 code units, RFC 8785 §3.2.3, not by UTF-8 bytes,
/// which put U+E000..U+FFFF after the astral planes). A name is borrowed
/// from the text where it needs no unescaping.
pub struct Members<'a>(pub Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'a> Members<'a> {
    /// The members of the object `text` (at most [`MAX_MEMBERS`]),
    /// refusing a name given twice.
    pub fn of(text: &'a str) -> Result<Self, JcsError> {
        Self::at_most(text, MAX_MEMBERS)
    }

    fn at_most(text: &'a str, most: usize) -> Result<Self, JcsError> {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let mut members = deserializer
            .deserialize_map(Read { most })
            .and_then(|members| deserializer.end().map(|()| members))
            .map_err(
                |error| match error.is_data() && error.to_string().starts_with(TOO_MANY) {
                    true => JcsError::TooManyMembers,
                    false => JcsError::NotJson,
                },
            )?;
        members.sort_unstable_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
        if members.windows(2).any(|pair| pair[0].0 == pair[1].0) {
            return Err(JcsError::DuplicateMember);
        }
        Ok(Members(members))
    }

    /// The canonical form of the object holding these members, written to
    /// `out`; what they hold counts against the same [`MAX_MEMBERS`].
    pub fn write(&self, out: &mut dyn Sink) -> Result<(), JcsError> {
        Writer {
            out,
            members_left: MAX_MEMBERS.saturating_sub(self.0.len()),
        }
        .object(self, 0)
    }
}

/// The error a [`Read`] ends with past its members' limit.
const TOO_MANY: &str = "too many members";

/// Reads an object's members, at most `most` of them.
struct Read {
    most: usize,
}

impl<'de> Visitor<'de> for Read {
    type Value = Vec<(Cow<'de, str>, &'de RawValue)>;
    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut members = Vec::new();
        while let Some((Name(name), value)) = map.next_entry::<Name<'de>, &'de RawValue>()? {
            if members.len() == self.most {
                return Err(de::Error::custom(TOO_MANY));
            }
            members.push((name, value));
        }
        Ok(members)
    }
}

/// A member's name: borrowed from the text when it has no escape.
struct Name<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Name<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Text;
        impl<'de> Visitor<'de> for Text {
            type Value = Name<'de>;
            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, name: &'de str) -> Result<Self::Value, E> {
                Ok(Name(Cow::Borrowed(name)))
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<Self::Value, E> {
                Ok(Name(Cow::Owned(name.to_owned())))
            }
        }
        deserializer.deserialize_str(Text)
    }
}

/// Writes one text's canonical form, counting the members it may still
/// hold.
struct Writer<'o> {
    out: &'o mut dyn Sink,
    members_left: usize,
}

impl Writer<'_> {
    fn value(&mut self, text: &str, depth: usize) -> Result<(), JcsError> {
        if depth > MAX_DEPTH {
            return Err(JcsError::TooDeep);
        }
        match text.trim_start().as_bytes().first() {
            Some(b'{') => {
                let members = Members::at_most(text, self.members_left)?;
                self.members_left -= members.0.len();
                self.object(&members, depth)
            }
            Some(b'[') => {
                let mut elements = Elements {
                    depth,
                    writer: self,
                    failed: None,
                };
                let mut deserializer = serde_json::Deserializer::from_str(text);
                match deserializer.deserialize_seq(&mut elements) {
                    Ok(()) => Ok(()),
                    Err(_) => Err(elements.failed.unwrap_or(JcsError::NotJson)),
                }
            }
            Some(b'"') => {
                let text: String = serde_json::from_str(text).map_err(|_| JcsError::NotJson)?;
                string(&text, self.out);
                Ok(())
            }
            Some(b'-' | b'0'..=b'9') => number(text.trim(), self.out),
            Some(b't' | b'f' | b'n') => {
                // The literal as serde_json reads it (so `tru` is refused).
                let literal: Option<bool> = serde_json::from_str(text).map_err(|_| JcsError::NotJson)?;
                self.out.put(match literal {
                    Some(true) => b"true",
                    Some(false) => b"false",
                    None => b"null",
                });
                Ok(())
            }
            _ => Err(JcsError::NotJson),
        }
    }

    fn object(&mut self, members: &Members<'_>, depth: usize) -> Result<(), JcsError> {
        self.out.put(b"{");
        for (index, (name, value)) in members.0.iter().enumerate() {
            if index > 0 {
                self.out.put(b",");
            }
            string(name, self.out);
            self.out.put(b":");
            self.value(value.get(), depth + 1)?;
        }
        self.out.put(b"}");
        Ok(())
    }
}

/// Writes an array's elements as they are read, one at a time: an array
/// of a million numbers is never a million of anything in memory.
struct Elements<'w, 'o> {
    depth: usize,
    writer: &'w mut Writer<'o>,
    /// Why an element has no canonical form (a deserializer's error
    /// carries only text).
    failed: Option<JcsError>,
}

impl<'de> Visitor<'de> for &mut Elements<'_, '_> {
    type Value = ();
    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("a JSON array")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.writer.out.put(b"[");
        let mut first = true;
        while let Some(element) = seq.next_element::<&'de RawValue>()? {
            if !first {
                self.writer.out.put(b",");
            }
            first = false;
            if let Err(error) = self.writer.value(element.get(), self.depth + 1) {
                self.failed = Some(error);
                return Err(de::Error::custom("no canonical form"));
            }
        }
        self.writer.out.put(b"]");
        Ok(())
    }
}

/// A string as ECMAScript's `JSON.stringify` writes it, which is how
/// serde_json writes one: `"` and `\` escaped, the C0 controls as `\b`,
/// `\t`, `\n`, `\f`, `\r` or `\u00xx` (lower-case hex), everything else
/// (U+2028, DEL, non-ASCII) as its UTF-8.
pub fn string(text: &str, out: &mut dyn Sink) {
    // A str always serializes.
    out.put(serde_json::to_string(text).unwrap_or_default().as_bytes());
}

/// A JSON number read as the IEEE double nearest it, written as
/// ECMAScript's `Number::toString` writes it (`-0` as `0`, `1e3` as `1000`,
/// `1e21` as `1e+21`).
fn number(text: &str, out: &mut dyn Sink) -> Result<(), JcsError> {
    // The text was read as a JSON number; Rust's parse rounds correctly.
    let value: f64 = text.parse().map_err(|_| JcsError::NotJson)?;
    if !value.is_finite() {
        return Err(JcsError::NumberOutOfRange);
    }
    let mut buffer = ryu_js::Buffer::new();
    out.put(buffer.format_finite(value).as_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(text: &str) -> Result<String, JcsError> {
        let mut out = Vec::new();
        write(text, &mut out)?;
        Ok(String::from_utf8(out).unwrap_or_default())
    }

    #[test]
    fn the_rfcs_own_example_is_canonicalized_as_it_states() {
        // RFC 8785 §3.2.2 (input) and §3.2.3 (output).
        let input = r#"{
          "numbers": [333333333.33333329, 1E30, 4.50,
                      2e-3, 0.000000000000000000000000001],
          "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
          "literals": [null, true, false]
        }"#;
        assert_eq!(
            canonical(input),
            Ok(r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#.to_string())
        );
    }

    #[test]
    fn members_sort_by_utf16_code_units() {
        // RFC 8785 §3.2.3's sorting example: U+FB33 after U+1F600, which
        // UTF-8's order would put first.
        let input = r#"{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}"#;
        let expected = "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u{80}\":\"Control\",\"\u{f6}\":\"Latin Small Letter O With Diaeresis\",\"\u{20ac}\":\"Euro Sign\",\"\u{1f600}\":\"Emoji: Grinning Face\",\"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}";
        assert_eq!(canonical(input).as_deref(), Ok(expected));
    }

    #[test]
    fn numbers_are_written_as_ecmascript_writes_their_doubles() {
        // RFC 8785 Appendix B, by the IEEE bits each line gives.
        let cases: [(u64, &str); 24] = [
            (0x0000000000000000, "0"),
            (0x8000000000000000, "0"),
            (0x0000000000000001, "5e-324"),
            (0x8000000000000001, "-5e-324"),
            (0x7fefffffffffffff, "1.7976931348623157e+308"),
            (0xffefffffffffffff, "-1.7976931348623157e+308"),
            (0x4340000000000000, "9007199254740992"),
            (0xc340000000000000, "-9007199254740992"),
            (0x4430000000000000, "295147905179352830000"),
            (0x44b52d02c7e14af5, "9.999999999999997e+22"),
            (0x44b52d02c7e14af6, "1e+23"),
            (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
            (0x444b1ae4d6e2ef4e, "999999999999999700000"),
            (0x444b1ae4d6e2ef4f, "999999999999999900000"),
            (0x444b1ae4d6e2ef50, "1e+21"),
            (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
            (0x3eb0c6f7a0b5ed8d, "0.000001"),
            (0x41b3de4355555553, "333333333.3333332"),
            (0x41b3de4355555554, "333333333.33333325"),
            (0x41b3de4355555555, "333333333.3333333"),
            (0x41b3de4355555556, "333333333.3333334"),
            (0x41b3de4355555557, "333333333.33333343"),
            (0xbecbf647612f3696, "-0.0000033333333333333333"),
            (0x43143ff3c1cb0959, "1424953923781206.2"),
        ];
        for (bits, expected) in cases {
            // The shortest text that reads back as the double: Rust's own.
            let sent = format!("{:e}", f64::from_bits(bits));
            assert_eq!(
                canonical(&sent).as_deref(),
                Ok(expected),
                "{bits:#x} sent as {sent}"
            );
        }
        assert_eq!(
            canonical("[1e3, 0.1, -0, 1E-7, 100e-2]").as_deref(),
            Ok("[1000,0.1,0,1e-7,1]")
        );
        // Integers beyond 2^53 as the doubles nearest them, as JavaScript
        // prints `18446744073709551615` and `9007199254740993`.
        assert_eq!(
            canonical("[18446744073709551615, 9007199254740993, -9223372036854775808]").as_deref(),
            Ok("[18446744073709552000,9007199254740992,-9223372036854776000]")
        );
        assert_eq!(canonical("1e400"), Err(JcsError::NumberOutOfRange));
        assert_eq!(canonical("-1e400"), Err(JcsError::NumberOutOfRange));
    }

    #[test]
    fn strings_escape_what_json_stringify_escapes_and_nothing_else() {
        assert_eq!(
            canonical(r#""\u2028\u007f\u0000\u001f\b\t\n\f\r\/\u00e9""#).as_deref(),
            Ok("\"\u{2028}\u{7f}\\u0000\\u001f\\b\\t\\n\\f\\r/\u{e9}\"")
        );
        // A lone surrogate is no Unicode text: I-JSON refuses it.
        assert_eq!(canonical(r#""\ud800""#), Err(JcsError::NotJson));
    }

    #[test]
    fn a_repeated_name_an_excess_depth_and_bad_text_are_refused() {
        assert_eq!(
            canonical(r#"{"a":1,"b":{"c":1,"c":2}}"#),
            Err(JcsError::DuplicateMember)
        );
        let deep = format!("{}1{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert_eq!(canonical(&deep), Err(JcsError::TooDeep));
        let fits = format!("{}1{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert_eq!(canonical(&fits), Ok(fits.clone()));
        // Members, all objects together: the last one past the limit.
        let members = |n: usize| {
            (0..n)
                .map(|i| format!(r#""m{i}":{{}}"#))
                .collect::<Vec<_>>()
                .join(",")
        };
        assert!(canonical(&format!("{{{}}}", members(MAX_MEMBERS))).is_ok());
        let nested = |n| format!(r#"{{"a":[{{{}}}],"b":{{"c":1}}}}"#, members(n));
        assert!(canonical(&nested(MAX_MEMBERS - 3)).is_ok());
        assert!(canonical(&nested(MAX_MEMBERS - 2)) == Err(JcsError::TooManyMembers));
        for bad in ["", "tru", "{", "[1,]", "01", "1.", "\"a"] {
            assert_eq!(canonical(bad), Err(JcsError::NotJson), "{bad:?}");
        }
    }

    #[test]
    fn a_name_that_serde_json_gives_a_meaning_is_plain_data_here() {
        // With arbitrary_precision, serde_json reads this object as the
        // number 1; a digest must tell the two apart.
        assert_eq!(
            canonical(r#"{"$serde_json::private::Number":"1"}"#).as_deref(),
            Ok(r#"{"$serde_json::private::Number":"1"}"#)
        );
    }
}

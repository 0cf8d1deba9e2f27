//! The model's `parameters`: any JSON object that DynamoDB can store as a
//! native map, within a size and depth that keep items and responses small.
//!
//! Also the DynamoDB number rule: at most 38 significant digits and a
//! magnitude from 1e-130 up to (not including) 1e126, or zero. Numbers are
//! read by value, not by spelling (`0e2147483648` is zero), and [`Decimal`]
//! writes each in one canonical spelling that DynamoDB parses, whatever
//! exponent the request wrote.

use std::cmp::Ordering;
use std::fmt::Write as _;
use std::io;

use serde_json::Value;

use super::wrong_type;
use crate::error::{FieldError, FieldErrors};
use crate::json::{NUMBER_KEY, RAW_VALUE_KEY};

/// Largest `parameters`, as compact JSON.
pub const MAX_PARAMETERS_BYTES: usize = 16 * 1024;
/// Deepest `parameters`; the `parameters` object itself is depth 1.
pub const MAX_PARAMETERS_DEPTH: usize = 16;
/// Most significant digits in a DynamoDB number.
pub const MAX_NUMBER_DIGITS: usize = 38;
/// Smallest scientific exponent of a non-zero DynamoDB number (1e-130).
pub const MIN_NUMBER_EXPONENT: i64 = -130;
/// Largest scientific exponent of a DynamoDB number (9.99…e125).
pub const MAX_NUMBER_EXPONENT: i64 = 125;

pub(super) fn parameters(path: &str, value: &Value, errors: &mut FieldErrors) {
    if !value.is_object() {
        return errors.push(wrong_type(path, "an object", value));
    }
    if compact_len_exceeds(value, MAX_PARAMETERS_BYTES) {
        errors.push(FieldError::new(
            path,
            "too_large",
            format!("must be at most {MAX_PARAMETERS_BYTES} bytes as compact JSON"),
        ));
    }
    walk(&mut path.to_string(), value, 1, errors);
}

/// Whether `value` as compact JSON is longer than `limit` bytes, counted
/// without building the text and given up as soon as the limit is passed.
fn compact_len_exceeds(value: &Value, limit: usize) -> bool {
    struct Counter {
        left: usize,
    }
    impl io::Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.left = self
                .left
                .checked_sub(bytes.len())
                .ok_or_else(|| io::Error::other("over the limit"))?;
            Ok(bytes.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    serde_json::to_writer(Counter { left: limit }, value).is_err()
}

/// Checks every nested value. `path` is one buffer, extended and cut back
/// around each child; the walk stops once the error list is full.
fn walk(path: &mut String, value: &Value, depth: usize, errors: &mut FieldErrors) {
    if errors.is_full() {
        return;
    }
    let nested = matches!(value, Value::Object(_) | Value::Array(_));
    if nested && depth > MAX_PARAMETERS_DEPTH {
        return errors.push(FieldError::new(
            path,
            "too_deep",
            format!("must nest at most {MAX_PARAMETERS_DEPTH} levels deep"),
        ));
    }
    let parent = path.len();
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by_key(|(key, _)| *key);
            for (key, child) in entries {
                if key.is_empty() {
                    errors.push(FieldError::new(
                        path,
                        "empty_key",
                        "object keys must not be empty",
                    ));
                    continue;
                }
                path.push('.');
                path.push_str(key);
                // Data only: no key a JSON library reads as an instruction,
                // however a later reader of the stored parameters parses them.
                if key == NUMBER_KEY || key == RAW_VALUE_KEY {
                    errors.push(FieldError::new(
                        path,
                        "reserved_key",
                        format!("object keys must not be {NUMBER_KEY} or {RAW_VALUE_KEY}"),
                    ));
                    path.truncate(parent);
                    continue;
                }
                walk(path, child, depth + 1, errors);
                path.truncate(parent);
            }
        }
        Value::Array(items) => {
            for (index, child) in items.iter().enumerate() {
                // Writing to a String cannot fail.
                let _ = write!(path, "[{index}]");
                walk(path, child, depth + 1, errors);
                path.truncate(parent);
            }
        }
        Value::Number(number) => {
            if !Decimal::parse(number.as_str()).is_some_and(|decimal| decimal.fits_dynamodb()) {
                errors.push(FieldError::new(
                    path,
                    "invalid_number",
                    format!(
                        "numbers must be zero or have at most {MAX_NUMBER_DIGITS} significant digits \
                         and a magnitude between 1e{MIN_NUMBER_EXPONENT} and 9.99e{MAX_NUMBER_EXPONENT}"
                    ),
                ));
            }
        }
        Value::Null | Value::Bool(_) | Value::String(_) => {}
    }
}

/// A JSON number read by value: its sign, its significant digits (no
/// leading or trailing zeros) and its scientific exponent, so `1.50e3` and
/// `1500` are equal and zero has no digits whatever its spelling. Borrows
/// the text it was read from.
#[derive(Debug, Clone, Copy)]
pub struct Decimal<'a> {
    negative: bool,
    integer: &'a str,
    fraction: &'a str,
    /// Leading zeros to skip in `integer` followed by `fraction`.
    skip: usize,
    /// Significant digits after those.
    len: usize,
    /// value = ±d.ddd × 10^exponent (saturated for absurd exponents).
    exponent: i64,
}

impl<'a> Decimal<'a> {
    /// Reads a JSON number's text; `None` if it is not one.
    pub fn parse(text: &'a str) -> Option<Self> {
        let (negative, unsigned) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (mantissa, exponent) = unsigned.split_once(['e', 'E']).unwrap_or((unsigned, "0"));
        let (integer, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let all_digits = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
        if integer.is_empty() || !all_digits(integer) || !all_digits(fraction) {
            return None;
        }
        let exponent_digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
        if exponent_digits.is_empty() || !all_digits(exponent_digits) {
            return None;
        }
        let digits = || integer.bytes().chain(fraction.bytes());
        let total = integer.len() + fraction.len();
        let skip = digits().take_while(|&b| b == b'0').count();
        if skip == total {
            return Some(Self {
                negative: false,
                integer,
                fraction,
                skip,
                len: 0,
                exponent: 0,
            });
        }
        let trailing = digits().rev().take_while(|&b| b == b'0').count();
        // An exponent too long for i64 saturates: far outside any range anyway.
        let written = exponent.parse::<i64>().unwrap_or(if exponent.starts_with('-') {
            i64::MIN
        } else {
            i64::MAX
        });
        let whole = i64::try_from(integer.len()).unwrap_or(i64::MAX);
        let skipped = i64::try_from(skip).unwrap_or(i64::MAX);
        Some(Self {
            negative,
            integer,
            fraction,
            skip,
            len: total - skip - trailing,
            exponent: written.saturating_add(whole - skipped - 1),
        })
    }

    /// Whether the value is zero.
    pub fn is_zero(&self) -> bool {
        self.len == 0
    }

    /// Whether the value is below zero.
    pub fn is_negative(&self) -> bool {
        self.negative && !self.is_zero()
    }

    /// Compares absolute values: digits are trimmed of zeros at both ends,
    /// so the scientific exponent decides, then the digits in order.
    fn cmp_magnitude(&self, other: &Self) -> Ordering {
        match (self.is_zero(), other.is_zero()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
            (false, false) => self
                .exponent
                .cmp(&other.exponent)
                .then_with(|| self.digits().cmp(other.digits())),
        }
    }

    /// Whether DynamoDB can store the value as a number (N).
    pub fn fits_dynamodb(&self) -> bool {
        self.is_zero()
            || (self.len <= MAX_NUMBER_DIGITS
                && (MIN_NUMBER_EXPONENT..=MAX_NUMBER_EXPONENT).contains(&self.exponent))
    }

    fn digits(&self) -> impl Iterator<Item = char> + '_ {
        self.integer
            .chars()
            .chain(self.fraction.chars())
            .skip(self.skip)
            .take(self.len)
    }

    /// The one spelling this value is stored in: `0` for zero; plain
    /// decimal digits for magnitudes from 1e-6 to below 1e38 (`1500`,
    /// `0.0012`), scientific notation beyond (`1.5E+40`, `-2E-9`). Meant
    /// for values that [`Decimal::fits_dynamodb`]; the text stays short.
    pub fn canonical(&self) -> String {
        if self.is_zero() {
            return "0".into();
        }
        let mut text = String::with_capacity(self.len + 8);
        if self.negative {
            text.push('-');
        }
        let exponent = self.exponent;
        if (0..MAX_NUMBER_DIGITS as i64).contains(&exponent) {
            let whole = usize::try_from(exponent).unwrap_or(0) + 1;
            text.extend(self.digits().take(whole));
            text.extend(std::iter::repeat_n('0', whole.saturating_sub(self.len)));
            if self.len > whole {
                text.push('.');
                text.extend(self.digits().skip(whole));
            }
        } else if (-6..0).contains(&exponent) {
            text.push_str("0.");
            text.extend(std::iter::repeat_n(
                '0',
                usize::try_from(-exponent - 1).unwrap_or(0),
            ));
            text.extend(self.digits());
        } else {
            let mut digits = self.digits();
            text.extend(digits.next());
            if self.len > 1 {
                text.push('.');
                text.extend(digits);
            }
            // Writing to a String cannot fail.
            let _ = write!(
                text,
                "E{}{}",
                if exponent > 0 { "+" } else { "-" },
                exponent.unsigned_abs()
            );
        }
        text
    }
}

impl PartialEq for Decimal<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Decimal<'_> {}

impl PartialOrd for Decimal<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Decimal<'_> {
    /// Numeric order, whatever the spelling.
    fn cmp(&self, other: &Self) -> Ordering {
        match (self.is_negative(), other.is_negative()) {
            (false, false) => self.cmp_magnitude(other),
            (true, true) => other.cmp_magnitude(self),
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Rule;
    use super::super::testing::{codes, errors, problems};
    use super::*;
    use serde_json::json;

    fn nested(depth: usize) -> Value {
        (1..depth).fold(json!({}), |inner, _| json!({ "a": inner }))
    }

    #[test]
    fn parameter_depth_and_size() {
        assert!(codes(Rule::Parameters, nested(16)).is_empty());
        assert_eq!(codes(Rule::Parameters, nested(17)), ["too_deep"]);
        assert_eq!(
            problems(Rule::Parameters, json!({"a": [[{"b": nested(12)}]]})),
            Vec::<(String, &str)>::new()
        );
        assert_eq!(
            codes(Rule::Parameters, json!({"a": [[{"b": nested(13)}]]})),
            ["too_deep"]
        );

        // {"k":"..."} is 8 bytes of punctuation and key around the string.
        let fits = json!({"k": "x".repeat(MAX_PARAMETERS_BYTES - 8)});
        assert_eq!(fits.to_string().len(), MAX_PARAMETERS_BYTES);
        assert!(codes(Rule::Parameters, fits).is_empty());
        let over = json!({"k": "x".repeat(MAX_PARAMETERS_BYTES - 7)});
        assert_eq!(codes(Rule::Parameters, over), ["too_large"]);
    }

    #[test]
    fn keys_a_json_library_reserves_are_refused_at_any_depth() {
        use crate::json::{NUMBER_KEY, RAW_VALUE_KEY};
        for key in [NUMBER_KEY, RAW_VALUE_KEY] {
            let mut top = serde_json::Map::new();
            top.insert(key.to_string(), json!("42"));
            assert_eq!(
                problems(Rule::Parameters, Value::Object(top.clone())),
                [(format!("parameters.{key}"), "reserved_key")]
            );
            let deep = json!({"a": [{"b": Value::Object(top)}]});
            assert_eq!(
                problems(Rule::Parameters, deep),
                [(format!("parameters.a[0].b.{key}"), "reserved_key")]
            );
        }
        // Near misses are ordinary keys.
        assert!(
            codes(
                Rule::Parameters,
                json!({"$serde_json::private::Numbers": 1, "serde_json": 2})
            )
            .is_empty()
        );
    }

    #[test]
    fn parameter_keys_and_paths() {
        assert_eq!(
            problems(Rule::Parameters, json!({"reasoning": {"": 1}})),
            [("parameters.reasoning".to_string(), "empty_key")]
        );
        assert_eq!(
            problems(Rule::Parameters, json!({"stop": [1, {"": 2}]})),
            [("parameters.stop[1]".to_string(), "empty_key")]
        );
        let bad_number: Value =
            serde_json::from_str(r#"{"reasoning": {"effort": 1e126}}"#).unwrap_or_default();
        assert_eq!(
            problems(Rule::Parameters, bad_number),
            [("parameters.reasoning.effort".to_string(), "invalid_number")]
        );
        assert!(
            codes(
                Rule::Parameters,
                json!({"a": null, "b": [true, "s", 1, 2.5, {}], "c": ""})
            )
            .is_empty()
        );
    }

    #[test]
    fn the_walk_stops_at_the_error_limit_and_paths_stay_short() {
        let key = "k".repeat(40_000);
        let numbers = vec!["1e999"; 5_000].join(",");
        let body: Value = serde_json::from_str(&format!(r#"{{"{key}": [{numbers}]}}"#)).unwrap_or_default();
        let found = errors(Rule::Parameters, "parameters", body.clone());
        // too_large first, then the numbers until the list is full: by size
        // here, as each path is cut long.
        assert!(found.len() > 50 && found.len() < crate::error::MAX_FIELD_ERRORS);
        let written = serde_json::to_string(&found).map_or(usize::MAX, |json| json.len());
        assert!(written <= crate::error::MAX_FIELD_ERRORS_BYTES, "{written}");
        assert!(
            found
                .iter()
                .all(|error| error.field.len() <= crate::error::MAX_FIELD_PATH_BYTES)
        );
        // Short paths: the count stops the list.
        let numbers = vec!["1e999"; 5_000].join(",");
        let body: Value = serde_json::from_str(&format!(r#"{{"k": [{numbers}]}}"#)).unwrap_or_default();
        assert_eq!(
            problems(Rule::Parameters, body).len(),
            crate::error::MAX_FIELD_ERRORS
        );
    }

    fn decimal(text: &str) -> Decimal<'_> {
        Decimal::parse(text).unwrap_or_else(|| panic!("{text} is a JSON number"))
    }

    #[test]
    fn decimals_compare_by_value() {
        assert_eq!(decimal("1.50e3"), decimal("1500"));
        assert_eq!(decimal("-0.00120"), decimal("-1.2e-3"));
        assert_eq!(decimal("-0.0"), decimal("0"));
        assert_eq!(decimal("0e2147483648"), decimal("0"));
        assert_ne!(decimal("1"), decimal("-1"));
        assert_ne!(decimal("1"), decimal("10"));
        assert!(decimal("-0") == decimal("0") && decimal("-1") < decimal("-0.5"));
        assert!(decimal("1.5") < decimal("2") && decimal("2") < decimal("2.0001"));
        assert!(decimal("9e2") < decimal("1e3") && decimal("1e-130") > decimal("0"));
        assert!(decimal("18446744073709551614") < decimal("18446744073709551615"));
        for bad in ["x", "", "-", "1e", "1.e5x", ".5", "1e+"] {
            assert!(Decimal::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn dynamodb_number_range() {
        for ok in [
            "0",
            "-0",
            "0.0",
            "0e999999999999999999999",
            "0e2147483648",
            "-0E-2147483649",
            "0.000e+99999999999999999999999999999",
            "1",
            "-1",
            "1e125",
            "9.99e125",
            "9.9999999999999999999999999999999999999E+125",
            "1e-130",
            "-1E-130",
            "1.5",
            "12345678901234567890123456789012345678",
            "0.00012345678901234567890123456789012345678",
            "1234567890123456789012345678901234567800000",
            "100e-2",
            "0.001e-127",
            "1e0000000000000000000000000000000000000000125",
        ] {
            assert!(decimal(ok).fits_dynamodb(), "{ok}");
        }
        for bad in [
            "1e126",
            "10e125",
            "-1e126",
            "1e-131",
            "0.1e-130",
            "0.001e-128",
            "123456789012345678901234567890123456789",
            "1.00000000000000000000000000000000000001",
            "1e99999999999999999999",
            "1e-99999999999999999999",
        ] {
            assert!(!decimal(bad).fits_dynamodb(), "{bad}");
        }
    }

    #[test]
    fn canonical_spellings_are_short_and_keep_the_value() {
        for (text, canonical) in [
            ("0e2147483648", "0"),
            ("-0.000", "0"),
            ("1500", "1500"),
            ("1.50e3", "1500"),
            ("-2.5", "-2.5"),
            ("100e-2", "1"),
            ("0.0012", "0.0012"),
            ("1.2e-6", "0.0000012"),
            ("1.2e-7", "1.2E-7"),
            ("1e20", "100000000000000000000"),
            ("1e21", "1000000000000000000000"),
            ("1e37", "10000000000000000000000000000000000000"),
            ("1e38", "1E+38"),
            ("-9.99e125", "-9.99E+125"),
            ("1e-130", "1E-130"),
            ("1e0000000000000000000000000000000000000000125", "1E+125"),
            (
                "12345678901234567890123456789012345678",
                "12345678901234567890123456789012345678",
            ),
        ] {
            let written = decimal(text).canonical();
            assert_eq!(written, canonical, "{text}");
            assert_eq!(decimal(&written), decimal(text), "{text}");
            assert!(
                serde_json::from_str::<serde_json::Number>(&written).is_ok(),
                "{written}"
            );
        }
    }
}

//! The model's `parameters`: any JSON object that DynamoDB can store as a
//! native map, within a size and depth that keep items and responses small.
//!
//! Also the DynamoDB number rule: at most 38 significant digits and a
//! magnitude from 1e-130 up to (not including) 1e126, or zero, judged by
//! [`crate::number::Decimal`], which storage shares.

use std::fmt::Write as _;

use serde_json::Value;

use super::wrong_type;
use crate::error::{FieldError, FieldErrors};
use crate::json::{NUMBER_KEY, RAW_VALUE_KEY};

/// Largest `parameters`, as compact JSON.
pub const MAX_PARAMETERS_BYTES: usize = 16 * 1024;
/// Deepest `parameters`; the `parameters` object itself is depth 1.
pub const MAX_PARAMETERS_DEPTH: usize = 16;
pub use crate::number::{Decimal, MAX_NUMBER_DIGITS, MAX_NUMBER_EXPONENT, MIN_NUMBER_EXPONENT};

pub(super) fn parameters(path: &str, value: &Value, errors: &mut FieldErrors) {
    if !value.is_object() {
        return errors.push(wrong_type(path, "an object", value));
    }
    if super::compact_len_exceeds(value, MAX_PARAMETERS_BYTES) {
        errors.push(FieldError::new(
            path,
            "too_large",
            format!("must be at most {MAX_PARAMETERS_BYTES} bytes as compact JSON"),
        ));
    }
    walk(&mut path.to_string(), value, 1, errors);
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

//! DynamoDB items: how JSON values become attributes and back.
//!
//! Strings are S, booleans BOOL, numbers N (their exact decimal text),
//! null NULL, arrays L and objects M, so `parameters` is stored natively
//! and can be read by any other DynamoDB client.

use std::collections::HashMap;
use std::str::FromStr;

use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{Map, Number, Value};

/// One DynamoDB item.
pub type Item = HashMap<String, AttributeValue>;

/// A stored attribute that does not have the type its record field needs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("stored attribute `{attribute}` is not {expected}")]
pub struct ItemError {
    /// The attribute's name (never its value).
    pub attribute: String,
    /// The type it should have.
    pub expected: &'static str,
}

/// The attribute for a JSON value.
pub fn to_attribute(value: &Value) -> AttributeValue {
    match value {
        Value::Null => AttributeValue::Null(true),
        Value::Bool(flag) => AttributeValue::Bool(*flag),
        Value::Number(number) => AttributeValue::N(number.to_string()),
        Value::String(text) => AttributeValue::S(text.clone()),
        Value::Array(items) => AttributeValue::L(items.iter().map(to_attribute).collect()),
        Value::Object(map) => AttributeValue::M(
            map.iter()
                .map(|(key, value)| (key.clone(), to_attribute(value)))
                .collect(),
        ),
    }
}

/// The JSON value for an attribute, as [`to_attribute`] would have written it.
pub fn to_json(name: &str, attribute: &AttributeValue) -> Result<Value, ItemError> {
    let invalid = |expected| ItemError {
        attribute: name.to_string(),
        expected,
    };
    Ok(match attribute {
        AttributeValue::Null(_) => Value::Null,
        AttributeValue::Bool(flag) => Value::Bool(*flag),
        AttributeValue::N(text) => {
            Value::Number(Number::from_str(text).map_err(|_| invalid("a JSON-compatible number"))?)
        }
        AttributeValue::S(text) => Value::String(text.clone()),
        AttributeValue::L(items) => Value::Array(
            items
                .iter()
                .map(|item| to_json(name, item))
                .collect::<Result<_, _>>()?,
        ),
        AttributeValue::M(map) => Value::Object(
            map.iter()
                .map(|(key, value)| Ok((key.clone(), to_json(name, value)?)))
                .collect::<Result<Map<_, _>, _>>()?,
        ),
        _ => return Err(invalid("a JSON-compatible attribute")),
    })
}

/// A string attribute; absent is `None`.
pub fn string(item: &Item, name: &str) -> Result<Option<String>, ItemError> {
    match item.get(name) {
        None | Some(AttributeValue::Null(_)) => Ok(None),
        Some(AttributeValue::S(text)) => Ok(Some(text.clone())),
        Some(_) => Err(ItemError {
            attribute: name.into(),
            expected: "a string (S)",
        }),
    }
}

/// A boolean attribute; absent is `None`.
pub fn boolean(item: &Item, name: &str) -> Result<Option<bool>, ItemError> {
    match item.get(name) {
        None | Some(AttributeValue::Null(_)) => Ok(None),
        Some(AttributeValue::Bool(flag)) => Ok(Some(*flag)),
        Some(_) => Err(ItemError {
            attribute: name.into(),
            expected: "a boolean (BOOL)",
        }),
    }
}

/// A map attribute as a JSON object; absent is `None`.
pub fn object(item: &Item, name: &str) -> Result<Option<Map<String, Value>>, ItemError> {
    match item.get(name) {
        None | Some(AttributeValue::Null(_)) => Ok(None),
        Some(attribute @ AttributeValue::M(_)) => match to_json(name, attribute)? {
            Value::Object(map) => Ok(Some(map)),
            _ => Err(ItemError {
                attribute: name.into(),
                expected: "a map (M)",
            }),
        },
        Some(_) => Err(ItemError {
            attribute: name.into(),
            expected: "a map (M)",
        }),
    }
}

/// The item's `version`; an item written before versioning counts as 0.
pub fn version(item: &Item) -> Result<u64, ItemError> {
    match item.get("version") {
        None => Ok(0),
        Some(AttributeValue::N(text)) => text.parse().map_err(|_| ItemError {
            attribute: "version".into(),
            expected: "a non-negative integer (N)",
        }),
        Some(_) => Err(ItemError {
            attribute: "version".into(),
            expected: "a number (N)",
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_json_type_round_trips() {
        let value: Value = serde_json::from_str(
            r#"{"s": "text", "n": 12345678901234567890123456789012345678, "f": -0.5,
                "b": false, "z": null, "l": [1, "two", [3], {"four": 4}], "m": {"nested": {}}}"#,
        )
        .unwrap_or_default();
        let attribute = to_attribute(&value);
        assert!(
            matches!(&attribute, AttributeValue::M(map) if map["n"] == AttributeValue::N("12345678901234567890123456789012345678".into()))
        );
        assert_eq!(to_json("parameters", &attribute), Ok(value));
    }

    #[test]
    fn typed_getters_refuse_other_types() {
        let item: Item = [
            ("name".to_string(), AttributeValue::N("1".into())),
            ("enabled".to_string(), AttributeValue::S("true".into())),
            ("version".to_string(), AttributeValue::S("3".into())),
        ]
        .into();
        assert!(string(&item, "name").is_err());
        assert!(boolean(&item, "enabled").is_err());
        assert!(version(&item).is_err());
        assert_eq!(string(&item, "missing"), Ok(None));
        assert_eq!(version(&Item::new()), Ok(0));
    }
}

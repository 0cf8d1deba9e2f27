//! DynamoDB items: how JSON values become attributes and back.
//!
//! Strings are S, booleans BOOL, numbers N (their exact decimal text),
//! null NULL, arrays L and objects M, so `parameters` is stored natively
//! and can be read by any other DynamoDB client.

use std::collections::HashMap;
use std::str::FromStr;

use aws_sdk_dynamodb::types::AttributeValue;
use aws_smithy_types::base64;
use serde_json::{Map, Number, Value};

use crate::number::Decimal;

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

/// Attributes a write sets, by field name, in order: secrets among them
/// only sealed ([`crate::patch::into_attributes`]). Its `Debug` shows the
/// names only all the same: a value may be a record's text as read.
#[derive(Clone, Default, PartialEq)]
pub struct Attributes(Vec<(&'static str, AttributeValue)>);

impl Attributes {
    /// No attributes.
    pub fn new() -> Self {
        Self::default()
    }

    /// No attributes, with room for `capacity`.
    pub fn with_capacity(capacity: usize) -> Self {
        Self(Vec::with_capacity(capacity))
    }
}

impl std::fmt::Debug for Attributes {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_map()
            .entries(self.0.iter().map(|(name, _)| (name, "…")))
            .finish()
    }
}

impl std::ops::Deref for Attributes {
    type Target = Vec<(&'static str, AttributeValue)>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Attributes {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl From<Vec<(&'static str, AttributeValue)>> for Attributes {
    fn from(attributes: Vec<(&'static str, AttributeValue)>) -> Self {
        Self(attributes)
    }
}

impl FromIterator<(&'static str, AttributeValue)> for Attributes {
    fn from_iter<I: IntoIterator<Item = (&'static str, AttributeValue)>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

impl IntoIterator for Attributes {
    type Item = (&'static str, AttributeValue);
    type IntoIter = std::vec::IntoIter<(&'static str, AttributeValue)>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a Attributes {
    type Item = &'a (&'static str, AttributeValue);
    type IntoIter = std::slice::Iter<'a, (&'static str, AttributeValue)>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// The attribute for a JSON value.
pub fn to_attribute(value: &Value) -> AttributeValue {
    match value {
        Value::Null => AttributeValue::Null(true),
        Value::Bool(flag) => AttributeValue::Bool(*flag),
        // One canonical spelling, so an exponent DynamoDB cannot parse
        // (`0e2147483648`) never reaches it; validation has checked the value.
        Value::Number(number) => AttributeValue::N(
            Decimal::parse(number.as_str()).map_or_else(|| number.to_string(), |decimal| decimal.canonical()),
        ),
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
        AttributeValue::M(map) => {
            // DynamoDB's map has no order; keys sorted, so a record reads
            // the same every time.
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_unstable_by_key(|(key, _)| *key);
            Value::Object(
                entries
                    .into_iter()
                    .map(|(key, value)| Ok((key.clone(), to_json(name, value)?)))
                    .collect::<Result<Map<_, _>, _>>()?,
            )
        }
        // Types this service never writes, but another writer might: sets
        // read as arrays and binary as base64 text, so a stored record can
        // always be returned.
        AttributeValue::Ss(texts) => Value::Array(texts.iter().cloned().map(Value::String).collect()),
        AttributeValue::Ns(numbers) => Value::Array(
            numbers
                .iter()
                .map(|text| Number::from_str(text).map(Value::Number))
                .collect::<Result<_, _>>()
                .map_err(|_| invalid("a JSON-compatible number"))?,
        ),
        AttributeValue::B(blob) => Value::String(base64::encode(blob.as_ref())),
        AttributeValue::Bs(blobs) => Value::Array(
            blobs
                .iter()
                .map(|blob| Value::String(base64::encode(blob.as_ref())))
                .collect(),
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

/// A type a record field is stored as: its DynamoDB type, and how a
/// stored item's attribute is read back as it.
pub trait Attribute: Sized {
    /// The stored type.
    const KIND: Kind;
    /// The attribute `name` of `item`; absent is `None`.
    fn read(item: &Item, name: &str) -> Result<Option<Self>, ItemError>;
}

impl Attribute for String {
    const KIND: Kind = Kind::String;
    fn read(item: &Item, name: &str) -> Result<Option<Self>, ItemError> {
        string(item, name)
    }
}

impl Attribute for bool {
    const KIND: Kind = Kind::Boolean;
    fn read(item: &Item, name: &str) -> Result<Option<Self>, ItemError> {
        boolean(item, name)
    }
}

impl Attribute for Map<String, Value> {
    const KIND: Kind = Kind::Map;
    fn read(item: &Item, name: &str) -> Result<Option<Self>, ItemError> {
        object(item, name)
    }
}

/// A sealed secret as stored: the ciphertext KMS `Encrypt` returned (B).
/// No record shows it; it is declared so the stored type is stated once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed(pub Vec<u8>);

impl Attribute for Sealed {
    const KIND: Kind = Kind::Binary;
    fn read(item: &Item, name: &str) -> Result<Option<Self>, ItemError> {
        match item.get(name) {
            None | Some(AttributeValue::Null(_)) => Ok(None),
            Some(AttributeValue::B(blob)) => Ok(Some(Self(blob.as_ref().to_vec()))),
            Some(_) => Err(ItemError {
                attribute: name.into(),
                expected: "binary (B)",
            }),
        }
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

/// The largest stored `version` an update may start from, so the version
/// it writes still fits a `u64`.
pub const MAX_VERSION: u64 = u64::MAX - 1;

/// The item's `version` as its `ETag` text: its canonical decimal
/// spelling. Versions this service writes are whole numbers; one written
/// by something else may not be, and DynamoDB cannot refuse that in a
/// condition, so it is reported as it is rather than written and then
/// refused.
pub fn version_tag(item: &Item) -> Result<String, ItemError> {
    let invalid = || ItemError {
        attribute: "version".into(),
        expected: "a non-negative number (N)",
    };
    match item.get("version") {
        None => Ok("0".into()),
        Some(AttributeValue::N(text)) => match Decimal::parse(text) {
            Some(decimal) if !decimal.is_negative() => Ok(decimal.canonical()),
            _ => Err(invalid()),
        },
        Some(_) => Err(invalid()),
    }
}

/// The DynamoDB type a record attribute must have for this service to
/// return it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A string (S).
    String,
    /// A boolean (BOOL).
    Boolean,
    /// A map (M).
    Map,
    /// Binary (B): a sealed secret's ciphertext.
    Binary,
}

impl Kind {
    /// DynamoDB's name of the type, as `attribute_type` takes it.
    pub fn type_name(self) -> &'static str {
        match self {
            Self::String => "S",
            Self::Boolean => "BOOL",
            Self::Map => "M",
            Self::Binary => "B",
        }
    }

    fn holds(self, attribute: &AttributeValue) -> bool {
        matches!(
            (self, attribute),
            (_, AttributeValue::Null(_))
                | (Self::String, AttributeValue::S(_))
                | (Self::Boolean, AttributeValue::Bool(_))
                | (Self::Map, AttributeValue::M(_))
                | (Self::Binary, AttributeValue::B(_))
        )
    }
}

/// Whether this service may update a stored item: each attribute in
/// `readable` is absent, NULL or of its kind, and `version` is absent or a
/// number from 0 to [`MAX_VERSION`]. The DynamoDB store states the same
/// rule as a condition expression, so nothing is written that the service
/// could not then return.
pub fn updatable(item: &Item, readable: &[(&'static str, Kind)]) -> Result<(), ItemError> {
    for (name, kind) in readable {
        if item.get(*name).is_some_and(|attribute| !kind.holds(attribute)) {
            return Err(ItemError {
                attribute: (*name).into(),
                expected: kind.type_name(),
            });
        }
    }
    let version_ok = match item.get("version") {
        None => true,
        Some(AttributeValue::N(text)) => {
            let max = MAX_VERSION.to_string();
            let max = Decimal::parse(&max);
            Decimal::parse(text).is_some_and(|version| !version.is_negative() && Some(version) <= max)
        }
        Some(_) => false,
    };
    if version_ok {
        Ok(())
    } else {
        Err(ItemError {
            attribute: "version".into(),
            expected: "a number from 0 to 2^64 - 2 (N)",
        })
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
    fn sets_and_binary_written_by_others_read_as_json() {
        use aws_sdk_dynamodb::primitives::Blob;
        let attribute = AttributeValue::M(
            [
                ("ss".to_string(), AttributeValue::Ss(vec!["a".into()])),
                ("ns".to_string(), AttributeValue::Ns(vec!["1.5".into()])),
                ("b".to_string(), AttributeValue::B(Blob::new(*b"hi"))),
                ("bs".to_string(), AttributeValue::Bs(vec![Blob::new(*b"hi")])),
            ]
            .into(),
        );
        // Compared as values: the map's key order depends on whether a
        // workspace build has turned on serde_json's preserve_order.
        let expected: Value =
            serde_json::from_str(r#"{"b":"aGk=","bs":["aGk="],"ns":[1.5],"ss":["a"]}"#).unwrap_or_default();
        assert_eq!(to_json("parameters", &attribute).ok(), Some(expected));
    }

    #[test]
    fn updatable_items_have_readable_attributes_and_a_version_in_range() {
        let readable = [
            ("name", Kind::String),
            ("enabled", Kind::Boolean),
            ("headers", Kind::Map),
        ];
        let with = |name: &str, value: AttributeValue| -> Item { [(name.to_string(), value)].into() };
        let n = |text: &str| AttributeValue::N(text.into());
        for ok in [
            Item::new(),
            with("name", AttributeValue::S("x".into())),
            with("name", AttributeValue::Null(true)),
            with("enabled", AttributeValue::Bool(true)),
            with("headers", AttributeValue::M(HashMap::new())),
            with("other", n("1")),
            with("version", n("0")),
            with("version", n("1.5")),
            with("version", n("18446744073709551614")),
        ] {
            assert_eq!(updatable(&ok, &readable), Ok(()), "{ok:?}");
        }
        for (bad, attribute) in [
            (with("name", n("1")), "name"),
            (with("enabled", AttributeValue::S("true".into())), "enabled"),
            (with("headers", AttributeValue::S("{}".into())), "headers"),
            (with("version", n("-7")), "version"),
            (with("version", n("18446744073709551615")), "version"),
            (with("version", n("1e30")), "version"),
            (with("version", AttributeValue::S("3".into())), "version"),
        ] {
            assert_eq!(
                updatable(&bad, &readable).map_err(|e| e.attribute),
                Err(attribute.to_string())
            );
        }
        assert_eq!(version_tag(&with("version", n("2.50"))), Ok("2.5".into()));
        assert_eq!(version_tag(&Item::new()), Ok("0".into()));
        assert!(version_tag(&with("version", n("-1"))).is_err());
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

//! Stored items in the project's own terms ([`Attr`]), how JSON values
//! become attributes and back, and the one crossing to and from the SDK's
//! `AttributeValue` (for `store::dynamo` alone).
//!
//! Strings are S, booleans BOOL, numbers N (their exact decimal text),
//! null NULL, arrays L and objects M, so `parameters` is stored natively
//! and can be read by any other DynamoDB client.

use std::collections::HashMap;
use std::str::FromStr;

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_smithy_types::base64;
use serde_json::{Map, Number, Value};

use crate::number::Decimal;

/// One stored item, by attribute name.
pub type Item = HashMap<String, Attr>;

/// A stored attribute's value: DynamoDB's ten types, held by the project
/// rather than the SDK, so merge, patch and verify never name a storage
/// client's type. Every type is kept, so a merge carries what another
/// writer stored (a set, binary) through unchanged.
#[derive(Debug, Clone, PartialEq)]
pub enum Attr {
    /// A string (S).
    S(String),
    /// A number (N), as its decimal text.
    N(String),
    /// Binary (B).
    B(Vec<u8>),
    /// A string set (SS).
    Ss(Vec<String>),
    /// A number set (NS).
    Ns(Vec<String>),
    /// A binary set (BS).
    Bs(Vec<Vec<u8>>),
    /// A map (M).
    M(HashMap<String, Attr>),
    /// A list (L).
    L(Vec<Attr>),
    /// A boolean (BOOL).
    Bool(bool),
    /// NULL.
    Null,
}

impl Attr {
    /// The text of a string (S).
    pub fn as_s(&self) -> Option<&str> {
        match self {
            Self::S(text) => Some(text),
            _ => None,
        }
    }

    /// The members of a map (M).
    pub fn as_m(&self) -> Option<&HashMap<String, Attr>> {
        match self {
            Self::M(members) => Some(members),
            _ => None,
        }
    }

    /// The decimal text of a number (N).
    pub fn as_n(&self) -> Option<&str> {
        match self {
            Self::N(text) => Some(text),
            _ => None,
        }
    }
}

impl From<Attr> for AttributeValue {
    fn from(attr: Attr) -> Self {
        match attr {
            Attr::S(text) => Self::S(text),
            Attr::N(text) => Self::N(text),
            Attr::B(bytes) => Self::B(Blob::new(bytes)),
            Attr::Ss(texts) => Self::Ss(texts),
            Attr::Ns(numbers) => Self::Ns(numbers),
            Attr::Bs(blobs) => Self::Bs(blobs.into_iter().map(Blob::new).collect()),
            Attr::M(members) => Self::M(to_sdk(members)),
            Attr::L(items) => Self::L(items.into_iter().map(Self::from).collect()),
            Attr::Bool(flag) => Self::Bool(flag),
            Attr::Null => Self::Null(true),
        }
    }
}

/// An item for the SDK.
pub fn to_sdk(item: Item) -> HashMap<String, AttributeValue> {
    item.into_iter().map(|(name, attr)| (name, attr.into())).collect()
}

/// An item from the SDK. A type DynamoDB does not have (the SDK's
/// `Unknown`, from a newer service) is refused by name.
pub fn from_sdk(item: HashMap<String, AttributeValue>) -> Result<Item, ItemError> {
    item.into_iter()
        .map(|(name, value)| {
            let attr = from_sdk_value(&name, value)?;
            Ok((name, attr))
        })
        .collect()
}

fn from_sdk_value(name: &str, value: AttributeValue) -> Result<Attr, ItemError> {
    Ok(match value {
        AttributeValue::S(text) => Attr::S(text),
        AttributeValue::N(text) => Attr::N(text),
        AttributeValue::B(blob) => Attr::B(blob.into_inner()),
        AttributeValue::Ss(texts) => Attr::Ss(texts),
        AttributeValue::Ns(numbers) => Attr::Ns(numbers),
        AttributeValue::Bs(blobs) => Attr::Bs(blobs.into_iter().map(Blob::into_inner).collect()),
        AttributeValue::M(members) => Attr::M(
            members
                .into_iter()
                .map(|(member, value)| Ok((member, from_sdk_value(name, value)?)))
                .collect::<Result<_, ItemError>>()?,
        ),
        AttributeValue::L(items) => Attr::L(
            items
                .into_iter()
                .map(|value| from_sdk_value(name, value))
                .collect::<Result<_, _>>()?,
        ),
        AttributeValue::Bool(flag) => Attr::Bool(flag),
        AttributeValue::Null(_) => Attr::Null,
        _ => {
            return Err(ItemError {
                attribute: name.to_string(),
                expected: "one of DynamoDB's attribute types",
            });
        }
    })
}

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
pub struct Attributes(Vec<(&'static str, Attr)>);

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
    type Target = Vec<(&'static str, Attr)>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Attributes {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl From<Vec<(&'static str, Attr)>> for Attributes {
    fn from(attributes: Vec<(&'static str, Attr)>) -> Self {
        Self(attributes)
    }
}

impl FromIterator<(&'static str, Attr)> for Attributes {
    fn from_iter<I: IntoIterator<Item = (&'static str, Attr)>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

impl IntoIterator for Attributes {
    type Item = (&'static str, Attr);
    type IntoIter = std::vec::IntoIter<(&'static str, Attr)>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a Attributes {
    type Item = &'a (&'static str, Attr);
    type IntoIter = std::slice::Iter<'a, (&'static str, Attr)>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// The attribute for a JSON value.
pub fn to_attribute(value: &Value) -> Attr {
    match value {
        Value::Null => Attr::Null,
        Value::Bool(flag) => Attr::Bool(*flag),
        // One canonical spelling, so an exponent DynamoDB cannot parse
        // (`0e2147483648`) never reaches it; validation has checked the value.
        Value::Number(number) => Attr::N(
            Decimal::parse(number.as_str()).map_or_else(|| number.to_string(), |decimal| decimal.canonical()),
        ),
        Value::String(text) => Attr::S(text.clone()),
        Value::Array(items) => Attr::L(items.iter().map(to_attribute).collect()),
        Value::Object(map) => Attr::M(
            map.iter()
                .map(|(key, value)| (key.clone(), to_attribute(value)))
                .collect(),
        ),
    }
}

/// The JSON value for an attribute, as [`to_attribute`] would have written it.
pub fn to_json(name: &str, attribute: &Attr) -> Result<Value, ItemError> {
    let invalid = |expected| ItemError {
        attribute: name.to_string(),
        expected,
    };
    Ok(match attribute {
        Attr::Null => Value::Null,
        Attr::Bool(flag) => Value::Bool(*flag),
        Attr::N(text) => {
            Value::Number(Number::from_str(text).map_err(|_| invalid("a JSON-compatible number"))?)
        }
        Attr::S(text) => Value::String(text.clone()),
        Attr::L(items) => Value::Array(
            items
                .iter()
                .map(|item| to_json(name, item))
                .collect::<Result<_, _>>()?,
        ),
        Attr::M(map) => {
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
        Attr::Ss(texts) => Value::Array(texts.iter().cloned().map(Value::String).collect()),
        Attr::Ns(numbers) => Value::Array(
            numbers
                .iter()
                .map(|text| Number::from_str(text).map(Value::Number))
                .collect::<Result<_, _>>()
                .map_err(|_| invalid("a JSON-compatible number"))?,
        ),
        Attr::B(bytes) => Value::String(base64::encode(bytes)),
        Attr::Bs(blobs) => Value::Array(
            blobs
                .iter()
                .map(|bytes| Value::String(base64::encode(bytes)))
                .collect(),
        ),
    })
}

/// A string attribute; absent is `None`.
pub fn string(item: &Item, name: &str) -> Result<Option<String>, ItemError> {
    match item.get(name) {
        None | Some(Attr::Null) => Ok(None),
        Some(Attr::S(text)) => Ok(Some(text.clone())),
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
            None | Some(Attr::Null) => Ok(None),
            Some(Attr::B(bytes)) => Ok(Some(Self(bytes.clone()))),
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
        None | Some(Attr::Null) => Ok(None),
        Some(Attr::Bool(flag)) => Ok(Some(*flag)),
        Some(_) => Err(ItemError {
            attribute: name.into(),
            expected: "a boolean (BOOL)",
        }),
    }
}

/// A map attribute as a JSON object; absent is `None`.
pub fn object(item: &Item, name: &str) -> Result<Option<Map<String, Value>>, ItemError> {
    match item.get(name) {
        None | Some(Attr::Null) => Ok(None),
        Some(attribute @ Attr::M(_)) => match to_json(name, attribute)? {
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
        Some(Attr::N(text)) => text.parse().map_err(|_| ItemError {
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
        Some(Attr::N(text)) => match Decimal::parse(text) {
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

    fn holds(self, attribute: &Attr) -> bool {
        matches!(
            (self, attribute),
            (_, Attr::Null)
                | (Self::String, Attr::S(_))
                | (Self::Boolean, Attr::Bool(_))
                | (Self::Map, Attr::M(_))
                | (Self::Binary, Attr::B(_))
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
        Some(Attr::N(text)) => {
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
            matches!(&attribute, Attr::M(map) if map["n"] == Attr::N("12345678901234567890123456789012345678".into()))
        );
        assert_eq!(to_json("parameters", &attribute), Ok(value));
    }

    #[test]
    fn sets_and_binary_written_by_others_read_as_json() {
        let attribute = Attr::M(
            [
                ("ss".to_string(), Attr::Ss(vec!["a".into()])),
                ("ns".to_string(), Attr::Ns(vec!["1.5".into()])),
                ("b".to_string(), Attr::B(b"hi".to_vec())),
                ("bs".to_string(), Attr::Bs(vec![b"hi".to_vec()])),
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
    fn every_stored_type_crosses_to_the_sdk_and_back_unchanged() {
        let item: Item = [
            ("s", Attr::S("text".into())),
            ("n", Attr::N("-1.50".into())),
            ("b", Attr::B(vec![0, 255])),
            ("ss", Attr::Ss(vec!["a".into(), "b".into()])),
            ("ns", Attr::Ns(vec!["1".into(), "2e3".into()])),
            ("bs", Attr::Bs(vec![vec![1], vec![]])),
            ("l", Attr::L(vec![Attr::Null, Attr::Bool(false)])),
            (
                "m",
                Attr::M([("nested".to_string(), Attr::M(HashMap::new()))].into()),
            ),
            ("bool", Attr::Bool(true)),
            ("null", Attr::Null),
        ]
        .into_iter()
        .map(|(name, attr)| (name.to_string(), attr))
        .collect();
        // Each type to its own SDK type, compared with values written
        // without the conversion, so a mistake made both ways is seen.
        let expected: HashMap<String, AttributeValue> = [
            ("s", AttributeValue::S("text".into())),
            ("n", AttributeValue::N("-1.50".into())),
            ("b", AttributeValue::B(Blob::new(vec![0, 255]))),
            ("ss", AttributeValue::Ss(vec!["a".into(), "b".into()])),
            ("ns", AttributeValue::Ns(vec!["1".into(), "2e3".into()])),
            (
                "bs",
                AttributeValue::Bs(vec![Blob::new(vec![1]), Blob::new(vec![])]),
            ),
            (
                "l",
                AttributeValue::L(vec![AttributeValue::Null(true), AttributeValue::Bool(false)]),
            ),
            (
                "m",
                AttributeValue::M([("nested".to_string(), AttributeValue::M(HashMap::new()))].into()),
            ),
            ("bool", AttributeValue::Bool(true)),
            ("null", AttributeValue::Null(true)),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_string(), value))
        .collect();
        assert_eq!(to_sdk(item.clone()), expected);
        assert_eq!(from_sdk(expected), Ok(item));
    }

    #[test]
    fn updatable_items_have_readable_attributes_and_a_version_in_range() {
        let readable = [
            ("name", Kind::String),
            ("enabled", Kind::Boolean),
            ("headers", Kind::Map),
        ];
        let with = |name: &str, value: Attr| -> Item { [(name.to_string(), value)].into() };
        let n = |text: &str| Attr::N(text.into());
        for ok in [
            Item::new(),
            with("name", Attr::S("x".into())),
            with("name", Attr::Null),
            with("enabled", Attr::Bool(true)),
            with("headers", Attr::M(HashMap::new())),
            with("other", n("1")),
            with("version", n("0")),
            with("version", n("1.5")),
            with("version", n("18446744073709551614")),
        ] {
            assert_eq!(updatable(&ok, &readable), Ok(()), "{ok:?}");
        }
        for (bad, attribute) in [
            (with("name", n("1")), "name"),
            (with("enabled", Attr::S("true".into())), "enabled"),
            (with("headers", Attr::S("{}".into())), "headers"),
            (with("version", n("-7")), "version"),
            (with("version", n("18446744073709551615")), "version"),
            (with("version", n("1e30")), "version"),
            (with("version", Attr::S("3".into())), "version"),
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
            ("name".to_string(), Attr::N("1".into())),
            ("enabled".to_string(), Attr::S("true".into())),
            ("version".to_string(), Attr::S("3".into())),
        ]
        .into();
        assert!(string(&item, "name").is_err());
        assert!(boolean(&item, "enabled").is_err());
        assert!(version(&item).is_err());
        assert_eq!(string(&item, "missing"), Ok(None));
        assert_eq!(version(&Item::new()), Ok(0));
    }
}

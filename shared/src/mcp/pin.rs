//! Tool pins: each tool a server's `tools/list` offers, as the SHA-256 of
//! its RFC 8785 form without `_meta` ([`crate::jcs`]), and the set's own
//! digest; what a verification keeps, and how a pin moved since the last.
//! The digest, exactly, and why these bounds: docs/api.md, Tool pins.

use std::collections::BTreeMap;

use aws_lc_rs::digest::{Context, Digest, SHA256};
use serde::{Deserialize, Serialize};

use crate::jcs::{self, JcsError, Members, Sink};

/// The most tools a pin holds: a server offering more is not verified.
pub const MAX_PINNED_TOOLS: usize = 256;
/// The most bytes (UTF-8) a pin's tool names take together. With
/// [`MAX_PINNED_TOOLS`] digests and a change list naming each tool at most
/// twice, a verification stays within a few tens of KiB of the item's
/// 400 KB.
pub const MAX_PINNED_NAME_BYTES: usize = 8 * 1024;

/// What each tool's digest is taken without: data about the tool for
/// clients, which may change without the tool changing.
const META: &str = "_meta";

/// The tools a server offered, by name, each with its digest (lowercase
/// hex SHA-256), in name order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolPin {
    digests: BTreeMap<String, String>,
    name_bytes: usize,
}

/// Why a tool cannot be pinned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PinError {
    /// The tool is not an object, or has no canonical form.
    #[error("a tool has no canonical form: {0}")]
    Canonical(JcsError),
    /// The tool's `name` is missing or not a string.
    #[error("a tool has no name")]
    Unnamed,
    /// Two tools share a name.
    #[error("two tools share a name")]
    Repeated,
    /// Past [`MAX_PINNED_TOOLS`] or [`MAX_PINNED_NAME_BYTES`].
    #[error("more tools than a pin holds")]
    TooMany,
}

impl From<JcsError> for PinError {
    fn from(error: JcsError) -> Self {
        Self::Canonical(error)
    }
}

impl ToolPin {
    /// Adds the tool `tool` (a `tools/list` entry, as JSON text): its name,
    /// to be held to the text rules by the caller.
    pub fn add(&mut self, tool: &str) -> Result<String, PinError> {
        let mut members = Members::of(tool)?;
        members.0.retain(|(name, _)| name != META);
        let name = members
            .0
            .iter()
            .find(|(member, _)| member == "name")
            .and_then(|(_, value)| serde_json::from_str::<String>(value.get()).ok())
            .ok_or(PinError::Unnamed)?;
        // Straight into the digest: a tool's canonical form is never held.
        let mut digest = Digests(Context::new(&SHA256));
        members.write(&mut digest)?;
        self.insert(name.clone(), hex(&digest.0.finish()))?;
        Ok(name)
    }

    /// Adds the tools of `page` (the pin of a later `tools/list` page).
    pub fn absorb(&mut self, page: ToolPin) -> Result<(), PinError> {
        page.digests
            .into_iter()
            .try_for_each(|(name, digest)| self.insert(name, digest))
    }

    fn insert(&mut self, name: String, digest: String) -> Result<(), PinError> {
        if self.digests.contains_key(&name) {
            return Err(PinError::Repeated);
        }
        self.name_bytes += name.len();
        if self.digests.len() >= MAX_PINNED_TOOLS || self.name_bytes > MAX_PINNED_NAME_BYTES {
            return Err(PinError::TooMany);
        }
        self.digests.insert(name, digest);
        Ok(())
    }

    /// How many tools it holds.
    pub fn len(&self) -> usize {
        self.digests.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.digests.is_empty()
    }

    /// Each tool's digest, by name.
    pub fn digests(&self) -> &BTreeMap<String, String> {
        &self.digests
    }

    /// The set's digest (`tools_digest`): SHA-256 of the RFC 8785 form of
    /// the object mapping each name to its digest.
    pub fn digest(&self) -> String {
        let mut names: Vec<&String> = self.digests.keys().collect();
        names.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
        let mut digest = Digests(Context::new(&SHA256));
        digest.put(b"{");
        for (index, name) in names.into_iter().enumerate() {
            if index > 0 {
                digest.put(b",");
            }
            jcs::string(name, &mut digest);
            digest.put(b":");
            jcs::string(&self.digests[name], &mut digest);
        }
        digest.put(b"}");
        hex(&digest.0.finish())
    }

    /// How this pin differs from `earlier` (a record's `tool_digests`;
    /// `None` when it held no pin, so every tool is added).
    pub fn changes_since(&self, earlier: Option<&BTreeMap<String, String>>) -> Changes {
        let empty = BTreeMap::new();
        let earlier = earlier.unwrap_or(&empty);
        let names = |map: &BTreeMap<String, String>, keep: &dyn Fn(&String, &String) -> bool| {
            map.iter()
                .filter(|(name, digest)| keep(name, digest))
                .map(|(name, _)| name.clone())
                .collect()
        };
        Changes {
            added: names(&self.digests, &|name, _| !earlier.contains_key(name)),
            removed: names(earlier, &|name, _| !self.digests.contains_key(name)),
            changed: names(&self.digests, &|name, digest| {
                earlier.get(name).is_some_and(|before| before != digest)
            }),
        }
    }
}

/// How a server's tools moved against a pin: names, sorted (by code
/// point), never what the tools hold.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Changes {
    /// Offered now, not pinned.
    pub added: Vec<String>,
    /// Pinned, not offered now.
    pub removed: Vec<String>,
    /// Pinned and offered, with another digest.
    pub changed: Vec<String>,
}

impl Changes {
    /// Whether nothing moved.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

/// A SHA-256 digest fed as canonical bytes are written.
struct Digests(Context);

impl Sink for Digests {
    fn put(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

/// A digest in lowercase hex.
fn hex(digest: &Digest) -> String {
    use std::fmt::Write as _;
    let mut hex = String::with_capacity(64);
    for byte in digest.as_ref() {
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pin(tools: &[&str]) -> Result<ToolPin, PinError> {
        let mut pin = ToolPin::default();
        for tool in tools {
            pin.add(tool)?;
        }
        Ok(pin)
    }

    #[test]
    fn a_tools_digest_ignores_meta_member_order_and_spelling() {
        let a = pin(&[r#"{"name":"echo","inputSchema":{"type":"object","maximum":1e3}}"#]);
        let b = pin(&[
            r#"{ "inputSchema" : { "maximum" : 1000.0, "type" : "object" }, "name" : "\u0065cho",
                       "_meta": {"ui": "x"} }"#,
        ]);
        assert_eq!(a, b);
        let poisoned = pin(&[r#"{"name":"echo","inputSchema":{"type":"object","maximum":1001}}"#]);
        assert_ne!(a.map(|pin| pin.digest()), poisoned.map(|pin| pin.digest()));
    }

    #[test]
    fn a_digest_is_sha256_of_the_canonical_form_in_lowercase_hex() {
        let tool = pin(&[r#"{"name":"a"}"#]).unwrap_or_default();
        // printf '{"name":"a"}' | sha256sum
        let digest = &tool.digests()["a"];
        assert_eq!(
            digest,
            "d9d719b27480b55cd4918020e7473e716ed3569c8adafe926cf9b10b4f8ef064"
        );
        // printf '{"a":"<that digest>"}' | sha256sum
        assert_eq!(
            tool.digest(),
            "a6025edf3f9ba5b61373a8ca095e4cd05234fae187c3f702cb514f8d48ab4332"
        );
    }

    #[test]
    fn the_worked_example_in_the_api_docs_holds() {
        // docs/api.md, "Tool pins": the digests PyPI's rfc8785 gave.
        let pin = pin(&[
            r#"{"name": "get_weather", "description": "Current weather for a city.", "_meta": {"ui/icon": "sun"},
                "inputSchema": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 1E2}}, "required": ["city"]}}"#,
            r#"{"name": "echo", "inputSchema": {"type": "object"}}"#,
        ])
        .unwrap_or_default();
        assert_eq!(
            pin.digests()["get_weather"],
            "922abc4685a9686453230d86f26d6ed408e3c6f5a341dbe7a85c991d58a8414c"
        );
        assert_eq!(
            pin.digests()["echo"],
            "a85008edb2a361a39358ef9a40ccff45a3a4938fd90bb7d55450a050284e4723"
        );
        assert_eq!(
            pin.digest(),
            "581adbc9ecd3be93a7e52a2757c0bae517df83599b351f3b2b8592f0c9e5ed39"
        );
    }

    #[test]
    fn changes_name_what_was_added_removed_and_changed_sorted() {
        let before =
            pin(&[r#"{"name":"b"}"#, r#"{"name":"a"}"#, r#"{"name":"c","x":1}"#]).unwrap_or_default();
        let after = pin(&[r#"{"name":"d"}"#, r#"{"name":"c","x":2}"#, r#"{"name":"a"}"#]).unwrap_or_default();
        assert_eq!(
            after.changes_since(Some(before.digests())),
            Changes {
                added: vec!["d".into()],
                removed: vec!["b".into()],
                changed: vec!["c".into()],
            }
        );
        assert!(after.changes_since(Some(after.digests())).is_empty());
        assert_eq!(after.changes_since(None).added, ["a", "c", "d"]);
    }

    #[test]
    fn unnamed_repeated_and_excess_tools_are_refused() {
        assert_eq!(pin(&[r#"{"title":"x"}"#]), Err(PinError::Unnamed));
        assert_eq!(pin(&[r#"{"name":1}"#]), Err(PinError::Unnamed));
        assert_eq!(pin(&["[1]"]), Err(PinError::Canonical(JcsError::NotJson)));
        assert_eq!(
            pin(&[r#"{"name":"a","name":"b"}"#]),
            Err(PinError::Canonical(JcsError::DuplicateMember))
        );
        assert_eq!(
            pin(&[r#"{"name":"a"}"#, r#"{"name":"a","x":1}"#]),
            Err(PinError::Repeated)
        );
        // Across pages too.
        let mut first = pin(&[r#"{"name":"a"}"#]).unwrap_or_default();
        let second = pin(&[r#"{"name":"b"}"#, r#"{"name":"a","x":1}"#]);
        assert_eq!(second.map(|page| first.absorb(page)), Ok(Err(PinError::Repeated)));
        let second = pin(&[r#"{"name":"b"}"#]).unwrap_or_default();
        assert_eq!(first.absorb(second), Ok(()));
        assert_eq!(first.len(), 2);
        let many: Vec<String> = (0..=MAX_PINNED_TOOLS)
            .map(|n| format!(r#"{{"name":"t{n}"}}"#))
            .collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(pin(&many[..MAX_PINNED_TOOLS]).is_ok());
        assert_eq!(pin(&many), Err(PinError::TooMany));
        // A tool's members, its own and nested ones together.
        let members = |n: usize| {
            (0..n)
                .map(|i| format!(r#""m{i}":1"#))
                .collect::<Vec<_>>()
                .join(",")
        };
        let wide = |n| format!(r#"{{"name":"w",{},"nested":{{"a":1,"b":2}}}}"#, members(n));
        assert!(pin(&[&wide(jcs::MAX_MEMBERS - 4)]).is_ok());
        assert_eq!(
            pin(&[&wide(jcs::MAX_MEMBERS - 3)]),
            Err(PinError::Canonical(JcsError::TooManyMembers))
        );
        let long = "n".repeat(MAX_PINNED_NAME_BYTES / 2 + 1);
        let long: Vec<String> = (0..2).map(|n| format!(r#"{{"name":"{n}{long}"}}"#)).collect();
        assert_eq!(pin(&[&long[0], &long[1]]), Err(PinError::TooMany));
    }
}

//! `PATCH`: a JSON Merge Patch (RFC 7396) applied to a record. `null`
//! removes only the maps ([`removable`]); an object merges into `headers`
//! by header name and into `parameters` by RFC 7396 (the `json-patch`
//! crate). Checked twice: [`parse`] before any read, [`apply`] on the merged
//! record, which holds to every rule or nothing is written.
//! See docs/api.md, PATCH: change one member with a JSON Merge Patch.

use serde_json::{Map, Value};

use crate::error::{ApiError, FieldError, FieldErrors};
use crate::item::{self, Attr, Item};
use crate::patch::{self, Patch, Written};
use crate::records::Resource;
use crate::rules::headers::{reading, same_header};
use crate::rules::{Policy, Rule};
use crate::secret::Secret;

/// A checked merge patch: each field it names, sorted by name, with what
/// the patch does to it.
#[derive(Debug, Clone, PartialEq)]
pub struct MergePatch {
    changes: Vec<(&'static str, Rule, Change)>,
}

/// What a merge patch does to one field.
#[derive(Debug, Clone, PartialEq)]
enum Change {
    /// `null`: removes the field.
    Remove,
    /// Replaces the field's value.
    Set(Written),
    /// Merges an object into `parameters`, RFC 7396 exactly.
    Parameters(Map<String, Value>),
    /// Merges headers by name: a value sets one, `None` removes each of
    /// that name.
    Headers(Vec<(String, Option<Secret>)>),
}

impl MergePatch {
    /// Whether the patch changes nothing (`{}`): RFC 7396 leaves the target
    /// as it is, and the record is answered as it is.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// The fields the patch names.
    pub fn fields(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.changes.iter().map(|(name, _, _)| *name)
    }

    /// The partial update this patch is when it merges no object into a
    /// field: the attributes to set, and the fields its `null`s remove.
    /// `None` when it merges one, which takes the stored record.
    pub fn as_update(&self) -> Option<(Patch, Vec<&'static str>)> {
        let mut set = Patch::new();
        let mut remove = Vec::new();
        for (name, _, change) in &self.changes {
            match change {
                Change::Remove => remove.push(*name),
                Change::Set(written) => set.push((*name, written.clone())),
                Change::Parameters(_) | Change::Headers(_) => return None,
            }
        }
        Some((set, remove))
    }
}

/// Whether a record may lack a field under `rule`, so a patch's `null`
/// removes it: the maps (`headers`, `parameters`), which a record created
/// without them lacks too. Every other field a record always has.
pub fn removable(rule: Rule) -> bool {
    matches!(rule, Rule::Headers | Rule::Parameters)
}

/// Checks a merge patch `body` for record kind `R` before anything is read:
/// `{}` is a patch that changes nothing ([`MergePatch::is_empty`]); unknown
/// and read-only fields, a `null`
/// on a field a record always has, and values that break their rule are one
/// [`ApiError::Validation`] listing them all. For `headers` and `parameters`
/// what the patch would write (its members that are not `null`) is held to
/// the field's rule here; the merged result is held to it again by
/// [`apply`].
pub fn parse<R: Resource>(body: &Map<String, Value>, policy: Policy) -> Result<MergePatch, ApiError> {
    let mut errors = FieldErrors::new();
    let mut changes = Vec::with_capacity(body.len());
    if body.is_empty() {
        return Ok(MergePatch { changes });
    }
    for (name, value) in patch::sorted(body)? {
        if errors.is_full() {
            break;
        }
        let Some((field, rule)) = R::settable(name) else {
            errors.push(patch::not_settable::<R>(name));
            continue;
        };
        let change = match value {
            Value::Null if removable(rule) => Change::Remove,
            Value::Null => {
                errors.push(FieldError::new(
                    field,
                    "invalid_type",
                    "must not be null: a record always has this field",
                ));
                continue;
            }
            // The headers being set are held to the rules; a `null` removes
            // a stored name whatever it is (one stored before a rule
            // refused it, too), but two members naming one header are
            // ambiguous whatever their values. The count is the merged
            // headers': 64 removals and one header set land one.
            Value::Object(members) if rule == Rule::Headers => {
                rule.check(field, &Value::Object(landing(members)), policy, &mut errors);
                if let Some(name) = repeated_name(members) {
                    errors.push(FieldError::new(
                        &format!("{field}.{name}"),
                        "duplicate_name",
                        "header names must be unique regardless of letter case, with _ read as -",
                    ));
                }
                Change::Headers(
                    members
                        .iter()
                        .map(|(name, value)| (name.clone(), value.as_str().map(Secret::from)))
                        .collect(),
                )
            }
            Value::Object(members) if removable(rule) => {
                rule.check(field, &Value::Object(landing(members)), policy, &mut errors);
                Change::Parameters(members.clone())
            }
            value => {
                rule.check(field, value, policy, &mut errors);
                Change::Set(patch::written::<R>(field, value))
            }
        };
        changes.push((field, rule, change));
    }
    if errors.is_empty() {
        Ok(MergePatch { changes })
    } else {
        Err(ApiError::Validation(errors.into_vec()))
    }
}

/// The first member of a headers patch, in name order, whose name an
/// earlier member names too (compared as header names are) where one of the
/// two is a `null` (two members being set are the header rule's to report).
fn repeated_name(members: &Map<String, Value>) -> Option<&str> {
    let mut entries: Vec<(&str, bool)> = members
        .iter()
        .map(|(name, value)| (name.as_str(), value.is_null()))
        .collect();
    entries.sort_unstable();
    // Each reading, and whether any member of that reading so far removes.
    let mut seen: std::collections::HashMap<String, bool> = std::collections::HashMap::new();
    entries
        .into_iter()
        .find_map(|(name, removes)| match seen.entry(reading(name)) {
            std::collections::hash_map::Entry::Occupied(earlier) if removes || *earlier.get() => Some(name),
            std::collections::hash_map::Entry::Occupied(mut earlier) => {
                earlier.insert(removes);
                None
            }
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(removes);
                None
            }
        })
}

/// What of an object patch lands in the record whatever it is merged into:
/// its members without the `null`s, which only remove.
fn landing(members: &Map<String, Value>) -> Map<String, Value> {
    members
        .iter()
        .filter(|(_, value)| !value.is_null())
        .map(|(name, value)| match value {
            Value::Object(inner) => (name.clone(), Value::Object(landing(inner))),
            other => (name.clone(), other.clone()),
        })
        .collect()
}

/// What a patch does to the stored record: the attributes to set and the
/// fields to remove.
#[derive(Default)]
pub struct Merged {
    /// The attributes to write, each field's merged value.
    pub set: Patch,
    /// The fields the patch removes.
    pub remove: Vec<&'static str>,
}

/// Applies `patch` to `stored`, a record of kind `R` as it is now (its
/// sealed values opened), and checks the merged result: every field rule
/// and limit must hold on it, or nothing is written
/// ([`ApiError::Validation`], every problem listed).
pub fn apply<R: Resource>(patch: &MergePatch, stored: &Item, policy: Policy) -> Result<Merged, ApiError> {
    let mut merged = Merged::default();
    let mut errors = FieldErrors::new();
    for (field, rule, change) in &patch.changes {
        match change {
            Change::Remove => merged.remove.push(field),
            // Checked as parse found it: the merged value is the patch's.
            Change::Set(written) => merged.set.push((field, written.clone())),
            Change::Parameters(members) => {
                // Checked as JSON; written member by member, so what the
                // patch does not touch keeps its stored DynamoDB type.
                let patch = Value::Object(members.clone());
                let mut target = Value::Object(stored_map(stored, field)?);
                json_patch::merge(&mut target, &patch);
                rule.check(field, &target, policy, &mut errors);
                merged
                    .set
                    .push((field, Written::Plain(merge_attribute(stored.get(*field), &patch))));
            }
            Change::Headers(members) => {
                let headers = merge_headers(stored_map(stored, field)?, members);
                rule.check(field, &Value::Object(headers.clone()), policy, &mut errors);
                merged
                    .set
                    .push((field, patch::written::<R>(field, &Value::Object(headers))));
            }
        }
    }
    if errors.is_empty() {
        Ok(merged)
    } else {
        Err(ApiError::Validation(errors.into_vec()))
    }
}

/// The stored map `field` (empty where the record lacks it).
fn stored_map(stored: &Item, field: &str) -> Result<Map<String, Value>, ApiError> {
    item::object(stored, field)
        .map(Option::unwrap_or_default)
        .map_err(|error| {
            tracing::error!(%error, "stored item is malformed");
            ApiError::Internal
        })
}

/// RFC 7396 on a stored attribute: an object `patch` merges into a stored
/// map member by member (`null` removes, anything else merges or
/// replaces), and every member it does not name stays as stored, of the
/// type it was stored as; anything else replaces the target.
fn merge_attribute(target: Option<&Attr>, patch: &Value) -> Attr {
    let Value::Object(members) = patch else {
        return item::to_attribute(patch);
    };
    let mut merged = match target {
        Some(Attr::M(stored)) => stored.clone(),
        _ => std::collections::HashMap::new(),
    };
    for (name, value) in members {
        if value.is_null() {
            merged.remove(name);
        } else {
            let member = merge_attribute(merged.get(name), value);
            merged.insert(name.clone(), member);
        }
    }
    Attr::M(merged)
}

/// `stored` headers with `patch`'s members merged in: each patch member
/// replaces (or with `null` removes) every stored header of the same name,
/// and is stored as the patch spells it.
fn merge_headers(mut stored: Map<String, Value>, patch: &[(String, Option<Secret>)]) -> Map<String, Value> {
    for (name, value) in patch {
        stored.retain(|existing, _| !same_header(existing, name));
        if let Some(value) = value {
            stored.insert(name.clone(), Value::String(value.expose().to_owned()));
        }
    }
    stored
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::Attr;
    use crate::records::{McpServer, Model};
    use serde_json::json;

    fn object(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    fn stored(value: Value) -> Item {
        match item::to_attribute(&value) {
            Attr::M(map) => map,
            _ => Item::new(),
        }
    }

    fn merged_json<R: Resource>(record: Value, patch: Value) -> Result<Value, ApiError> {
        let patch = parse::<R>(&object(patch), Policy::default())?;
        let merged = apply::<R>(&patch, &stored(record.clone()), Policy::default())?;
        let mut result = object(record);
        for (name, value) in merged.set {
            let value = match value {
                Written::Plain(attribute) => item::to_json(name, &attribute).unwrap_or_default(),
                Written::Secret(secret) => Value::String(secret.expose().to_owned()),
                Written::Secrets(members) => members
                    .iter()
                    .map(|(name, secret)| (name.clone(), Value::String(secret.expose().to_owned())))
                    .collect(),
            };
            result.insert(name.into(), value);
        }
        for name in merged.remove {
            result.remove(name);
        }
        Ok(Value::Object(result))
    }

    /// RFC 7396, Appendix A: each example applied to a model's parameters.
    #[test]
    fn the_rfc_examples_hold_on_parameters() {
        let cases = [
            (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
            (json!({"a": "b"}), json!({"b": "c"}), json!({"a": "b", "b": "c"})),
            (json!({"a": "b"}), json!({"a": null}), json!({})),
            (json!({"a": "b", "b": "c"}), json!({"a": null}), json!({"b": "c"})),
            (json!({"a": ["b"]}), json!({"a": "c"}), json!({"a": "c"})),
            (json!({"a": "c"}), json!({"a": ["b"]}), json!({"a": ["b"]})),
            (
                json!({"a": {"b": "c"}}),
                json!({"a": {"b": "d", "c": null}}),
                json!({"a": {"b": "d"}}),
            ),
            (json!({"a": [{"b": "c"}]}), json!({"a": [1]}), json!({"a": [1]})),
            (json!({"e": null}), json!({"a": 1}), json!({"e": null, "a": 1})),
            (
                json!({}),
                json!({"a": {"bb": {"ccc": null}}}),
                json!({"a": {"bb": {}}}),
            ),
        ];
        for (original, patch, expected) in cases {
            let merged = merged_json::<Model>(json!({"parameters": original}), json!({"parameters": patch}));
            assert_eq!(merged.ok(), Some(json!({"parameters": expected})), "{patch}");
        }
        // The examples whose patch is not an object replace the target: on
        // a record, the field's rule decides (parameters must be an object).
        for patch in [json!(["c"]), json!("bar"), json!([1, 2])] {
            let refused =
                merged_json::<Model>(json!({"parameters": {"a": "b"}}), json!({"parameters": patch}));
            assert!(matches!(refused, Err(ApiError::Validation(_))), "{patch}");
        }
        // null at the top removes the field.
        let removed = merged_json::<Model>(
            json!({"parameters": {"a": 1}, "name": "n"}),
            json!({"parameters": null}),
        );
        assert_eq!(removed.ok(), Some(json!({"name": "n"})));
    }

    #[test]
    fn header_names_merge_as_header_names_and_the_patch_spelling_is_kept() {
        let record = json!({"headers": {"Authorization": "old", "X-Api-Key": "k", "Accept": "a"}});
        let merged = merged_json::<McpServer>(
            record.clone(),
            json!({"headers": {"authorization": "new", "x_api_key": null}}),
        );
        assert_eq!(
            merged.ok(),
            Some(json!({"headers": {"Accept": "a", "authorization": "new"}}))
        );
        let unchanged = merged_json::<McpServer>(record, json!({"headers": {"X-Other": null}}));
        assert_eq!(
            unchanged.ok().map(|r| r["headers"].as_object().map(Map::len)),
            Some(Some(3))
        );
    }

    #[test]
    fn untouched_parameters_keep_their_stored_types() {
        let stored_members = std::collections::HashMap::from([
            ("bin".to_string(), Attr::B(b"raw".to_vec())),
            ("set".to_string(), Attr::Ss(vec!["a".into(), "b".into()])),
            ("nums".to_string(), Attr::Ns(vec!["1".into()])),
            (
                "nested".to_string(),
                Attr::M(std::collections::HashMap::from([
                    ("keep".to_string(), Attr::Bs(vec![b"x".to_vec()])),
                    ("t".to_string(), Attr::N("1".into())),
                ])),
            ),
            ("gone".to_string(), Attr::S("x".into())),
        ]);
        let mut record = Item::new();
        record.insert("parameters".into(), Attr::M(stored_members.clone()));
        let patch = parse::<Model>(
            &object(json!({"parameters": {"nested": {"t": 2}, "gone": null, "new": [1]}})),
            Policy::default(),
        )
        .unwrap();
        let merged = apply::<Model>(&patch, &record, Policy::default()).unwrap();
        let Some((_, Written::Plain(Attr::M(members)))) = merged.set.first() else {
            panic!("no parameters written");
        };
        for kept in ["bin", "set", "nums"] {
            assert_eq!(members.get(kept), stored_members.get(kept), "{kept}");
        }
        let Some(Attr::M(nested)) = members.get("nested") else {
            panic!("nested lost");
        };
        assert_eq!(nested.get("keep"), Some(&Attr::Bs(vec![b"x".to_vec()])));
        assert_eq!(nested.get("t"), Some(&Attr::N("2".into())));
        assert!(!members.contains_key("gone"));
        assert_eq!(members.get("new"), Some(&Attr::L(vec![Attr::N("1".into())])));
    }

    #[test]
    fn limits_hold_on_the_merged_result() {
        let full: Map<String, Value> = (0..64).map(|i| (format!("H{i}"), json!("v"))).collect();
        let record = json!({"headers": full});
        let one_more = merged_json::<McpServer>(record.clone(), json!({"headers": {"H64": "v"}}));
        let Err(ApiError::Validation(errors)) = one_more else {
            panic!("65 headers after the merge: {one_more:?}");
        };
        assert_eq!(
            (errors[0].field.as_str(), errors[0].code),
            ("headers", "too_many_entries")
        );
        // Replacing one, or removing one and adding one, stays at 64.
        assert!(merged_json::<McpServer>(record.clone(), json!({"headers": {"h0": "w"}})).is_ok());
        assert!(
            merged_json::<McpServer>(record.clone(), json!({"headers": {"H0": null, "H64": "v"}})).is_ok()
        );
        // A patch naming more than 64 is held to what lands: 64 removed and one set land one.
        let mut swap: Map<String, Value> = (0..64).map(|i| (format!("H{i}"), Value::Null)).collect();
        swap.insert("Authorization".into(), json!("Bearer new"));
        let swapped = merged_json::<McpServer>(record.clone(), json!({"headers": swap}));
        assert!(swapped.is_ok(), "{swapped:?}");
        // Setting 65 at once is refused whatever they replace.
        let all: Map<String, Value> = (0..65).map(|i| (format!("N{i}"), json!("v"))).collect();
        let Err(ApiError::Validation(errors)) = merged_json::<McpServer>(record, json!({"headers": all}))
        else {
            panic!("65 headers set by one patch");
        };
        assert_eq!(errors[0].code, "too_many_entries");
        // Depth: a stored nesting of 16 plus a patch one deeper.
        let mut deep = json!(1);
        for _ in 0..15 {
            deep = json!({"d": deep});
        }
        let record = json!({"parameters": {"d": deep}});
        let mut deeper = json!({"x": 1});
        for _ in 0..16 {
            deeper = json!({"d": deeper});
        }
        let refused = merged_json::<Model>(record, json!({"parameters": deeper}));
        assert!(matches!(refused, Err(ApiError::Validation(_))), "{refused:?}");
    }

    #[test]
    fn the_patch_itself_is_checked_before_anything_is_read() {
        let codes = |body: Value| match parse::<Model>(&object(body), Policy::default()) {
            Err(ApiError::Validation(errors)) => errors.into_iter().map(|e| (e.field, e.code)).collect(),
            Err(other) => vec![(other.code().to_string(), "")],
            Ok(_) => Vec::new(),
        };
        assert!(codes(json!({})).is_empty(), "{{}} changes nothing");
        assert!(parse::<Model>(&Map::new(), Policy::default()).is_ok_and(|patch| patch.is_empty()));
        assert_eq!(
            codes(
                json!({"name": null, "id": "x", "nope": 1, "provider_type": "openai", "parameters": {"": 1}})
            ),
            [
                ("id".to_string(), "read_only"),
                ("name".to_string(), "invalid_type"),
                ("nope".to_string(), "unknown_field"),
                ("parameters".to_string(), "empty_key"),
                ("provider_type".to_string(), "invalid_enum"),
            ]
        );
        assert!(codes(json!({"parameters": null, "name": "n"})).is_empty());
        assert!(codes(json!({"parameters": {"gone": null}})).is_empty());
        let mcp = |body: Value| parse::<McpServer>(&object(body), Policy::default()).err();
        assert!(mcp(json!({"headers": {"Host": "h"}})).is_some());
        assert!(mcp(json!({"headers": {"A": 1}})).is_some());
        assert!(mcp(json!({"headers": {"A": null}})).is_none());
        // A null removes any stored name, even one the rules refuse now.
        for name in [
            "Host",
            "Proxy-Authorization",
            "x_aws_ec2_metadata_token",
            "bad name",
            "\u{7f}",
        ] {
            assert!(mcp(json!({"headers": {name: null}})).is_none(), "{name}");
        }
        assert!(mcp(json!({"headers": {"Host": null, "X-Ok": "v"}})).is_none());
        assert!(mcp(json!({"headers": {"Host": "h", "X-Ok": null}})).is_some());
        // Two members naming one header are ambiguous, whatever their values.
        assert!(mcp(json!({"headers": {"X-A": null, "x_a": "v"}})).is_some());
        assert!(mcp(json!({"headers": {"Host": null, "host": null}})).is_some());
        // Removals do not count toward the 64 (the merged headers do); 65 set do.
        let nulls: Map<String, Value> = (0..65).map(|i| (format!("H{i}"), Value::Null)).collect();
        assert!(mcp(json!({"headers": nulls})).is_none());
        let set: Map<String, Value> = (0..65).map(|i| (format!("H{i}"), json!("v"))).collect();
        assert!(mcp(json!({"headers": set})).is_some());
        assert!(mcp(json!({"endpoint": null})).is_some());
    }

    #[test]
    fn a_patch_never_shows_its_values() {
        let patch = parse::<McpServer>(
            &object(json!({"headers": {"Authorization": "Bearer SENTINEL"}, "name": "n"})),
            Policy::default(),
        );
        let shown = format!("{patch:?}");
        assert!(!shown.contains("SENTINEL"), "{shown}");
        assert!(shown.contains("headers"), "{shown}");
    }
}

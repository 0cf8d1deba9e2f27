//! Turns a request body into what a write sets, checking every field
//! against its record's rules and reporting every problem at once. Secrets
//! leave the body here as [`Secret`]s, which only the seal opens.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value};

use crate::error::{ApiError, FieldError, FieldErrors};
use crate::item::{self, Attr, Attributes};
use crate::records::{Resource, Sealing};
use crate::rules::Policy;
use crate::secret::Secret;

/// What a write sets on one field.
#[derive(Debug, Clone, PartialEq)]
pub enum Written {
    /// An attribute, as it is stored.
    Plain(Attr),
    /// A secret stored sealed whole (`api_key`).
    Secret(Secret),
    /// A map whose values are stored sealed (`headers`), by name.
    Secrets(BTreeMap<String, Secret>),
}

/// What a valid body sets, by field name, in order.
pub type Patch = Vec<(&'static str, Written)>;

/// What a write sets on `R`'s field `name` from its valid JSON `value`:
/// a sealed field's text as secrets, anything else as its attribute.
pub fn written<R: Resource>(name: &str, value: &Value) -> Written {
    let sealing = R::FIELDS
        .iter()
        .find(|field| field.name == name)
        .and_then(|field| field.sealing());
    match (sealing, value) {
        (Some(Sealing::Whole), Value::String(text)) => Written::Secret(Secret::from(text.as_str())),
        (Some(Sealing::Values { .. }), Value::Object(members)) => Written::Secrets(
            members
                .iter()
                .filter_map(|(name, value)| Some((name.clone(), Secret::from(value.as_str()?))))
                .collect(),
        ),
        _ => Written::Plain(item::to_attribute(value)),
    }
}

/// A secret the seal left open: a write that holds one must not happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("field `{0}` holds a secret that was not sealed")]
pub struct Unsealed(pub &'static str);

/// The attributes `patch` sets, once every secret in it is sealed.
pub fn into_attributes(patch: Patch) -> Result<Attributes, Unsealed> {
    patch
        .into_iter()
        .map(|(name, written)| match written {
            Written::Plain(attribute) => Ok((name, attribute)),
            // An empty map holds nothing to seal.
            Written::Secrets(members) if members.is_empty() => Ok((name, Attr::M(HashMap::new()))),
            Written::Secret(_) | Written::Secrets(_) => Err(Unsealed(name)),
        })
        .collect()
}

/// Validates `body` for record kind `R`.
///
/// `{}` is [`ApiError::EmptyUpdate`]; unknown and read-only fields, and
/// fields that break their rule, are one [`ApiError::Validation`] listing
/// them all.
pub fn parse<R: Resource>(body: &Map<String, Value>, policy: Policy) -> Result<Patch, ApiError> {
    let mut errors = FieldErrors::new();
    let mut patch = Patch::with_capacity(body.len());
    for (name, value) in sorted(body)? {
        if errors.is_full() {
            break;
        }
        let Some((field, rule)) = R::settable(name) else {
            errors.push(not_settable::<R>(name));
            continue;
        };
        let before = errors.len();
        rule.check(field, value, policy, &mut errors);
        if errors.len() == before {
            patch.push((field, written::<R>(field, value)));
        }
    }
    if errors.is_empty() {
        Ok(patch)
    } else {
        Err(ApiError::Validation(errors.into_vec()))
    }
}

/// The fields a body (of a `PUT` or a merge patch) names, sorted by name:
/// problems are listed in that order whatever the map's. `{}` is
/// [`ApiError::EmptyUpdate`].
pub fn sorted(body: &Map<String, Value>) -> Result<Vec<(&str, &Value)>, ApiError> {
    if body.is_empty() {
        return Err(ApiError::EmptyUpdate);
    }
    // Sorted explicitly: serde_json's map order depends on a cargo feature
    // that other crates may switch on, and the error list must not.
    let mut fields: Vec<(&str, &Value)> = body.iter().map(|(name, value)| (name.as_str(), value)).collect();
    fields.sort_unstable_by_key(|(name, _)| *name);
    Ok(fields)
}

/// The problem with a field `name` no request may set on `R`: read-only,
/// or not a field of it at all.
pub fn not_settable<R: Resource>(name: &str) -> FieldError {
    if R::read_only().contains(&name) {
        FieldError::new(name, "read_only", "is read-only")
    } else {
        FieldError::new(name, "unknown_field", "is not a field of this record")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::MAX_FIELD_ERRORS;
    use crate::item::Attr;
    use crate::records::{ApiKey, McpServer, Model};
    use serde_json::json;

    fn object(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    fn fields(result: Result<Patch, ApiError>) -> Vec<(String, &'static str)> {
        match result {
            Err(ApiError::Validation(errors)) => errors.into_iter().map(|e| (e.field, e.code)).collect(),
            other => panic!("expected validation_failed, got {other:?}"),
        }
    }

    #[test]
    fn empty_body_is_empty_update() {
        assert_eq!(
            parse::<Model>(&Map::new(), Policy::default()),
            Err(ApiError::EmptyUpdate)
        );
    }

    #[test]
    fn valid_fields_become_attributes() {
        let body = object(json!({"name": "n", "api_key": "sk-1", "enabled": false}));
        let patch = parse::<ApiKey>(&body, Policy::default()).unwrap_or_default();
        assert_eq!(patch.len(), 3);
        assert!(patch.contains(&("enabled", Written::Plain(Attr::Bool(false)))));
        assert!(patch.contains(&("api_key", Written::Secret(Secret::from("sk-1")))));
        assert_eq!(into_attributes(patch), Err(Unsealed("api_key")));
    }

    #[test]
    fn read_only_and_unknown_fields_are_named() {
        let body =
            object(json!({"provider_type": "OpenAI", "id": "x", "version": 1, "endpoint": "https://a.b"}));
        assert_eq!(
            fields(parse::<ApiKey>(&body, Policy::default())),
            [
                ("endpoint".to_string(), "unknown_field"),
                ("id".to_string(), "read_only"),
                ("provider_type".to_string(), "read_only"),
                ("version".to_string(), "unknown_field"),
            ]
        );
        let body = object(json!({"created_at": "x", "updated_at": "y", "project_id": "z", "api_key": "k"}));
        assert_eq!(
            fields(parse::<McpServer>(&body, Policy::default())),
            [
                ("api_key".to_string(), "unknown_field"),
                ("created_at".to_string(), "read_only"),
                ("project_id".to_string(), "read_only"),
                ("updated_at".to_string(), "read_only"),
            ]
        );
    }

    #[test]
    fn every_problem_is_reported() {
        let body = object(json!({"name": "", "model_id": null, "provider_type": "openai", "parameters": []}));
        assert_eq!(
            fields(parse::<Model>(&body, Policy::default())),
            [
                ("model_id".to_string(), "invalid_type"),
                ("name".to_string(), "too_short"),
                ("parameters".to_string(), "invalid_type"),
                ("provider_type".to_string(), "invalid_enum"),
            ]
        );
    }

    #[test]
    fn the_list_is_bounded() {
        let many: Map<String, Value> = (0..500).map(|i| (format!("f{i}"), json!(1))).collect();
        assert_eq!(
            fields(parse::<Model>(&many, Policy::default())).len(),
            MAX_FIELD_ERRORS
        );
    }
}

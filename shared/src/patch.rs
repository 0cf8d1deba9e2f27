//! Turns a request body into the attributes to write, checking every field
//! against its record's rules and reporting every problem at once.

use serde_json::{Map, Value};

use crate::error::{ApiError, FieldError, FieldErrors};
use crate::item;
use crate::records::Resource;
use crate::rules::Policy;

/// The attributes a valid body sets, ordered by field name (their `Debug`
/// shows names only: [`item::Attributes`]).
pub type Patch = item::Attributes;

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
            patch.push((field, item::to_attribute(value)));
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
    use crate::records::{ApiKey, McpServer, Model};
    use aws_sdk_dynamodb::types::AttributeValue;
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
        assert!(patch.contains(&("enabled", AttributeValue::Bool(false))));
        assert!(patch.contains(&("api_key", AttributeValue::S("sk-1".into()))));
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

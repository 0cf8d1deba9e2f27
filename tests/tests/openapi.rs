//! Keeps openapi.yaml in step with the code: the provider enum, each
//! route's updatable and read-only fields, the record fields in response
//! order, and the statuses and error codes each route can return.

use std::collections::BTreeSet;

use agent_server_shared::error::{ApiError, FieldError};
use agent_server_shared::records::{ApiKey, McpServer, Model, ProviderType, Resource};
use integration_tests::repo_root;
use serde_json::Value;

fn document() -> Value {
    let path = repo_root().join("openapi.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_norway::from_str(&text).unwrap_or_else(|e| panic!("openapi.yaml: {e}"))
}

/// Follows a local `$ref`.
fn resolve<'a>(doc: &'a Value, node: &'a Value) -> &'a Value {
    match node.get("$ref").and_then(Value::as_str) {
        Some(reference) => {
            let pointer = reference.trim_start_matches('#');
            resolve(
                doc,
                doc.pointer(pointer)
                    .unwrap_or_else(|| panic!("dangling $ref {reference}")),
            )
        }
        None => node,
    }
}

fn schema<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc.pointer(&format!("/components/schemas/{name}"))
        .unwrap_or_else(|| panic!("no schema {name}"))
}

fn keys(value: &Value) -> BTreeSet<String> {
    value
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default()
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect())
        .unwrap_or_default()
}

struct Route {
    path: &'static str,
    update: &'static str,
    record: &'static str,
    fields: Vec<&'static str>,
    read_only: Vec<&'static str>,
    scoped: bool,
    /// Field names of the record as the service serialises it, in order.
    record_fields: Vec<String>,
}

fn record_fields<R: Resource>() -> Vec<String> {
    let record = R::from_item(&Default::default()).unwrap_or_else(|e| panic!("{e}"));
    let json = serde_json::to_string(&record).unwrap_or_default();
    let value: Value = serde_json::from_str(&json).unwrap_or_default();
    let mut names: Vec<String> = keys(&value).into_iter().collect();
    names.sort_by_key(|name| json.find(&format!("\"{name}\":")));
    names
}

fn route<R: Resource>(update: &'static str, record: &'static str) -> Route {
    Route {
        path: R::ROUTE,
        update,
        record,
        fields: R::FIELDS.iter().map(|(name, _)| *name).collect(),
        read_only: R::READ_ONLY.to_vec(),
        scoped: R::TABLE.scoped_by_project(),
        record_fields: record_fields::<R>(),
    }
}

fn routes() -> Vec<Route> {
    vec![
        route::<ApiKey>("ApiKeyUpdate", "ApiKey"),
        route::<McpServer>("McpServerUpdate", "McpServer"),
        route::<Model>("ModelUpdate", "Model"),
    ]
}

#[test]
fn the_provider_enum_is_the_codes() {
    let doc = document();
    assert_eq!(
        strings(&schema(&doc, "ProviderType")["enum"]),
        ProviderType::SPELLINGS.to_vec()
    );
}

#[test]
fn update_bodies_name_exactly_the_writable_fields() {
    let doc = document();
    for route in routes() {
        let body = schema(&doc, route.update);
        let documented = keys(&body["properties"]);
        let expected: BTreeSet<String> = route.fields.iter().map(|f| f.to_string()).collect();
        assert_eq!(documented, expected, "{}", route.update);
        assert_eq!(
            body["additionalProperties"],
            Value::Bool(false),
            "{}",
            route.update
        );
        assert_eq!(body["minProperties"], 1, "{}: {{}} is empty_update", route.update);
        for read_only in &route.read_only {
            assert!(
                !documented.contains(*read_only),
                "{}: {read_only} is read-only",
                route.update
            );
        }
    }
}

#[test]
fn records_list_their_fields_in_response_order() {
    let doc = document();
    for route in routes() {
        let record = schema(&doc, route.record);
        assert_eq!(
            strings(&record["required"]),
            route.record_fields,
            "{}",
            route.record
        );
        assert_eq!(keys(&record["properties"]).len(), route.record_fields.len());
        assert!(!route.record_fields.contains(&"api_key".to_string()));
    }
}

#[test]
fn each_route_documents_the_statuses_and_codes_it_can_return() {
    let doc = document();
    let field = || FieldError::new("x", "x", "x");
    let errors = [
        ApiError::InvalidId(field()),
        ApiError::InvalidProjectId(field()),
        ApiError::InvalidIfMatch(field()),
        ApiError::InvalidJson(field()),
        ApiError::Validation(vec![field()]),
        ApiError::EmptyUpdate,
        ApiError::NotFound("x"),
        ApiError::PreconditionFailed { current_version: 1 },
        ApiError::PayloadTooLarge,
        ApiError::UnsupportedMediaType,
        ApiError::Unavailable,
        ApiError::Internal,
    ];
    for route in routes() {
        let operation = &doc["paths"][route.path]["put"];
        assert!(operation.is_object(), "{} is not documented", route.path);
        let returned: Vec<&ApiError> = errors
            .iter()
            .filter(|e| route.scoped || !matches!(e, ApiError::InvalidProjectId(_)))
            .collect();
        let mut expected: BTreeSet<String> = returned.iter().map(|e| e.status().to_string()).collect();
        expected.insert("200".into());
        assert_eq!(keys(&operation["responses"]), expected, "{}", route.path);
        for error in returned {
            let response = resolve(&doc, &operation["responses"][error.status().to_string()]);
            let envelope = resolve(&doc, &response["content"]["application/json"]["schema"]);
            let specific = &envelope["allOf"][1]["properties"];
            assert_eq!(specific["status"]["const"], error.status(), "{}", route.path);
            let code = &specific["errorDetails"]["properties"]["code"];
            let documented = match code.get("const").and_then(Value::as_str) {
                Some(one) => vec![one.to_string()],
                None => strings(&code["enum"]),
            };
            assert!(
                documented.contains(&error.code().to_string()),
                "{} {}: {} missing",
                route.path,
                error.status(),
                error.code()
            );
        }
        let parameters: Vec<String> = operation["parameters"]
            .as_array()
            .map(|p| {
                p.iter()
                    .filter_map(|p| resolve(&doc, p)["name"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        let mut expected = vec!["id".to_string()];
        if route.scoped {
            expected.push("project_id".into());
        }
        expected.push("If-Match".into());
        assert_eq!(parameters, expected, "{}", route.path);
        let etag = &operation["responses"]["200"]["headers"]["ETag"];
        assert!(etag.is_object(), "{}: 200 must document ETag", route.path);
    }
}

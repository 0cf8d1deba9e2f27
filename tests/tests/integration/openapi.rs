//! Keeps openapi.yaml in step with the code: the provider enum, each
//! route's updatable and read-only fields, the record fields in response
//! order, the statuses and error codes each route can return, and the flat
//! envelope shape that lets code generators type every response.

use std::collections::BTreeSet;

use agent_server_shared::error::{ApiError, FieldError};
use agent_server_shared::records::{ProviderType, Resource, Table, Verify};
use agent_server_shared::with_resource;
use integration_tests::{length_limits, repo_root, rule_codes};
use serde_json::Value;

fn document() -> Value {
    let path = repo_root().join("openapi.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_norway::from_str(&text).expect("openapi.yaml")
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

#[derive(Clone)]
struct Route {
    path: &'static str,
    update: String,
    record: &'static str,
    /// The success message, which the 200 envelope states as a const.
    updated: &'static str,
    fields: Vec<&'static str>,
    read_only: Vec<&'static str>,
    scoped: bool,
    /// The fields a merge patch's `null` removes.
    removable: Vec<&'static str>,
    /// Field names of the record as the service serialises it, in order.
    record_fields: Vec<String>,
    /// Whether it takes `verify=true`.
    verifies: bool,
    /// What a failed verification answers: `mcp_unverified` or
    /// `key_unverified` (none where the route verifies nothing).
    unverified: Option<&'static str>,
    /// The values its `verify` takes (`true`, `pinned`).
    modes: Vec<&'static str>,
}

fn record_fields<R: Resource>() -> Vec<String> {
    let record = R::from_item(&Default::default()).unwrap();
    let json = serde_json::to_string(&record).unwrap_or_default();
    let value: Value = serde_json::from_str(&json).unwrap_or_default();
    let mut names: Vec<String> = keys(&value).into_iter().collect();
    names.sort_by_key(|name| json.find(&format!("\"{name}\":")));
    names
}

fn route<R: Resource>(update: String, record: &'static str) -> Route {
    Route {
        path: R::ROUTE,
        update,
        record,
        updated: R::UPDATED,
        fields: R::FIELDS
            .iter()
            .filter(|field| field.rule().is_some())
            .map(|field| field.name)
            .collect(),
        read_only: R::read_only(),
        scoped: R::TABLE.scoped_by_project(),
        removable: R::FIELDS
            .iter()
            .filter(|field| field.rule().is_some_and(agent_server_shared::merge::removable))
            .map(|field| field.name)
            .collect(),
        record_fields: record_fields::<R>(),
        verifies: R::VERIFIES,
        unverified: match R::VERIFY {
            Verify::Nothing => None,
            Verify::Mcp(_) => Some("mcp_unverified"),
            Verify::Key(_) => Some("key_unverified"),
        },
        modes: R::VERIFY_MODES.iter().map(|mode| mode.as_str()).collect(),
    }
}

/// The schema openapi.yaml names for a record kind: its type's name
/// (`McpServer`).
fn schema_name<R>() -> &'static str {
    let path = std::any::type_name::<R>();
    path.rsplit("::").next().unwrap_or(path)
}

/// Every route, from the record kinds' list: its update schema is the
/// record's name and `Update`.
fn routes() -> Vec<Route> {
    Table::ALL
        .into_iter()
        .map(|table| {
            with_resource!(table, R => {
                let record = schema_name::<R>();
                route::<R>(format!("{record}Update"), record)
            })
        })
        .collect()
}

#[test]
fn the_provider_enum_is_the_codes() {
    let doc = document();
    assert_eq!(
        strings(&schema(&doc, "ProviderType")["enum"]),
        ProviderType::SPELLINGS.to_vec()
    );
}

/// Each PATCH body is a merge patch of exactly the writable fields, sent
/// as `application/merge-patch+json`, and `null` is allowed exactly on the
/// fields a record may lack.
#[test]
fn merge_patch_bodies_name_the_writable_fields_and_the_removable_ones() {
    let doc = document();
    for route in routes() {
        let name = route.update.replace("Update", "MergePatch");
        let body = schema(&doc, &name);
        let expected: BTreeSet<String> = route.fields.iter().map(|f| f.to_string()).collect();
        assert_eq!(keys(&body["properties"]), expected, "{name}");
        assert_eq!(body["additionalProperties"], Value::Bool(false), "{name}");
        for field in &route.fields {
            let property = &body["properties"][*field];
            let nullable = property["anyOf"]
                .as_array()
                .is_some_and(|options| options.iter().any(|o| o["type"] == "null"));
            assert_eq!(nullable, route.removable.contains(field), "{name}.{field}");
        }
        let request = resolve(&doc, &doc["paths"][route.path]["patch"]["requestBody"]);
        assert_eq!(
            keys(&request["content"]),
            BTreeSet::from(["application/merge-patch+json".to_string()]),
            "{name}"
        );
    }
}

#[test]
fn update_bodies_name_exactly_the_writable_fields() {
    let doc = document();
    for route in routes() {
        let body = schema(&doc, &route.update);
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
        // Every shown field is a property: the required ones, and the
        // verification, shown only when there is one.
        let optional = usize::from(route.verifies);
        assert_eq!(
            keys(&record["properties"]).len(),
            route.record_fields.len() + optional
        );
        assert!(!route.record_fields.contains(&"api_key".to_string()));
    }
}

#[test]
fn each_route_documents_the_statuses_and_codes_it_can_return() {
    let doc = document();
    let field = || FieldError::new("x", "required", "x");
    let errors = [
        ApiError::InvalidId(vec![field()]),
        ApiError::InvalidProjectId(field()),
        ApiError::InvalidIfMatch(field()),
        ApiError::InvalidJson(field()),
        ApiError::Validation(vec![field()]),
        ApiError::EmptyUpdate,
        ApiError::Forbidden,
        ApiError::NotFound("x"),
        ApiError::PreconditionFailed {
            current_version: "1".into(),
        },
        ApiError::Conflict,
        ApiError::PayloadTooLarge {
            limit: agent_server_shared::request::MAX_BODY_BYTES,
        },
        ApiError::UnsupportedMediaType(agent_server_shared::error::Unsupported::NotJson),
        ApiError::InvalidIfNoneMatch(FieldError::new("If-None-Match", "invalid_if_none_match", "m")),
        ApiError::InvalidIdempotencyKey(FieldError::new("Idempotency-Key", "invalid_idempotency_key", "m")),
        ApiError::IdempotencyKeyReused,
        ApiError::InvalidVerify(FieldError::new("verify", "invalid_value", "m")),
        ApiError::McpUnverified {
            stage: "dns",
            http_status: None,
        },
        ApiError::KeyUnverified {
            stage: "refused",
            http_status: None,
        },
        ApiError::McpToolsChanged {
            added: Vec::new(),
            removed: Vec::new(),
            changed: Vec::new(),
        },
        ApiError::Unavailable,
        ApiError::Internal,
    ];
    for (route, method) in routes()
        .into_iter()
        .flat_map(|route| [(route.clone(), "put"), (route, "patch")])
    {
        let operation = &doc["paths"][route.path][method];
        assert!(operation.is_object(), "{method} {} is not documented", route.path);
        // Every route may answer 409: a keyed write is conditioned on the
        // record as read, and tried again while it keeps changing.
        let returned: Vec<&ApiError> = errors
            .iter()
            .filter(|e| route.scoped || !matches!(e, ApiError::InvalidProjectId(_)))
            // Every route answers a `verify` it cannot take with 400; a
            // failed verification is the kind's own 422.
            .filter(|e| {
                !matches!(e, ApiError::McpUnverified { .. } | ApiError::KeyUnverified { .. })
                    || route.unverified == Some(e.code())
            })
            // A pin that moved: only where `verify` takes `pinned`.
            .filter(|e| !matches!(e, ApiError::McpToolsChanged { .. }) || route.modes.contains(&"pinned"))
            .collect();
        let mut expected: BTreeSet<String> = returned.iter().map(|e| e.status().to_string()).collect();
        expected.insert("200".into());
        // API Gateway's own answer to a bad credential (the local API's too).
        expected.insert("401".into());
        // API Gateway's own answer when its throttling limits are hit.
        expected.insert("429".into());
        assert_eq!(keys(&operation["responses"]), expected, "{method} {}", route.path);
        for error in returned {
            let response = resolve(&doc, &operation["responses"][error.status().to_string()]);
            let envelope = resolve(&doc, &response["content"]["application/json"]["schema"]);
            let specific = &envelope["properties"];
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
        if route.verifies {
            expected.push("verify".into());
            // Exactly the values the record kind's verifier takes.
            let verify = operation["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| resolve(&doc, p))
                .find(|p| p["name"] == "verify")
                .cloned()
                .unwrap_or_default();
            assert_eq!(strings(&verify["schema"]["enum"]), route.modes, "{}", route.path);
        }
        // The preconditions the service reads (request::preconditions).
        expected.extend(
            [
                "If-Match",
                "If-None-Match",
                "If-Unmodified-Since",
                "Idempotency-Key",
            ]
            .map(String::from),
        );
        assert_eq!(parameters, expected, "{}", route.path);
        for header in ["ETag", "Last-Modified", "Idempotent-Replayed"] {
            let documented = &operation["responses"]["200"]["headers"][header];
            assert!(
                documented.is_object(),
                "{}: 200 must document {header}",
                route.path
            );
        }
    }
}

/// The five envelope keys, in the order the service writes them.
const ENVELOPE_KEYS: [&str; 5] = ["error", "message", "data", "status", "errorDetails"];

/// Every response of every operation is one flat object schema (no
/// `allOf`, which generators cannot merge with `const` overrides) with
/// exactly the five envelope keys, `error` and `status` pinned to what the
/// response's status says, and `errorDetails` closed.
#[test]
fn every_response_is_a_flat_envelope_pinned_to_its_status() {
    let doc = document();
    let mut seen = 0;
    for (route, method) in routes()
        .into_iter()
        .flat_map(|route| [(route.clone(), "put"), (route, "patch")])
    {
        let responses = doc["paths"][route.path][method]["responses"]
            .as_object()
            .unwrap_or_else(|| panic!("{method} {} has no responses", route.path));
        for (status, response) in responses {
            let at = format!("{} {status}", route.path);
            let response = resolve(&doc, response);
            let envelope = resolve(&doc, &response["content"]["application/json"]["schema"]);
            // Not the envelope: API Gateway's bodies, `{"message":"Unauthorized"}` and
            // `{"message":"Too Many Requests"}`.
            let gateway = match status.as_str() {
                "401" => Some("Unauthorized"),
                "429" => Some("Too Many Requests"),
                _ => None,
            };
            if let Some(message) = gateway {
                assert_eq!(strings(&envelope["required"]), ["message"], "{at}");
                assert_eq!(envelope["properties"]["message"]["const"], message, "{at}");
                assert_eq!(envelope["additionalProperties"], false, "{at}");
                continue;
            }
            for combinator in ["allOf", "anyOf", "oneOf"] {
                assert!(envelope.get(combinator).is_none(), "{at}: {combinator}");
            }
            assert_eq!(envelope["type"], "object", "{at}");
            assert_eq!(envelope["additionalProperties"], false, "{at}");
            assert_eq!(strings(&envelope["required"]), ENVELOPE_KEYS, "{at}");
            let properties = &envelope["properties"];
            let expected: BTreeSet<String> = ENVELOPE_KEYS.iter().map(|k| k.to_string()).collect();
            assert_eq!(keys(properties), expected, "{at}");
            let code: u16 = status.parse().unwrap_or_else(|e| panic!("{at}: {e}"));
            assert_eq!(properties["status"]["const"], code, "{at}");
            assert_eq!(properties["error"]["const"], code != 200, "{at}");
            let details = resolve(&doc, &properties["errorDetails"]);
            assert_eq!(details["type"], "object", "{at}");
            assert_eq!(details["additionalProperties"], false, "{at}");
            if code == 200 {
                assert_eq!(properties["message"]["const"], route.updated, "{at}");
                let record = format!("#/components/schemas/{}", route.record);
                assert_eq!(properties["data"]["$ref"], record.as_str(), "{at}");
                assert!(keys(&details["properties"]).is_empty(), "{at}");
            } else {
                assert_eq!(properties["data"]["type"], "null", "{at}");
                assert_eq!(
                    strings(&details["required"]).first().map(String::as_str),
                    Some("code"),
                    "{at}"
                );
            }
            seen += 1;
        }
    }
    assert!(seen >= 3 * 8, "only {seen} responses checked");
}

/// `parameters` is an open object to code generators, but its value rules
/// must still reach JSON Schema validators (schemathesis) at every depth.
#[test]
fn parameters_state_their_value_rules_at_every_depth() {
    let doc = document();
    let parameters = schema(&doc, "Parameters");
    assert_eq!(parameters["type"], "object");
    assert_eq!(parameters["propertyNames"]["minLength"], 1);
    let value = resolve(&doc, &parameters["patternProperties"][""]);
    let kinds = value["anyOf"].as_array().expect("a parameter value is a union");
    let refs: Vec<&str> = kinds.iter().filter_map(|k| k["$ref"].as_str()).collect();
    assert!(refs.contains(&"#/components/schemas/DynamoNumber"));
    assert!(
        refs.contains(&"#/components/schemas/Parameters"),
        "objects recurse"
    );
    let arrays = kinds
        .iter()
        .find(|k| k["type"] == "array")
        .expect("arrays are values");
    // `unevaluatedItems` rather than `items`: the same rule, which TypeScript
    // generators type as `unknown[]` instead of a type that cannot compile.
    let items = resolve(&doc, &arrays["unevaluatedItems"]);
    assert!(std::ptr::eq(items, value), "arrays recurse");
}

/// The header names the HTTP client owns or that unlock a metadata service,
/// spelled as the pattern openapi.yaml excludes from `headers` names (any
/// case, `_` for `-`).
#[test]
fn headers_exclude_the_names_the_client_owns() {
    use agent_server_shared::rules::headers::{FORBIDDEN_PREFIX, refused_names};
    // Any letter case, and `_` wherever the name has `-`: a server reads
    // both as one character.
    let any_case = |name: &str| -> String {
        name.chars()
            .map(|c| match c {
                '-' => "[-_]".to_string(),
                c if c.is_ascii_alphabetic() => {
                    format!("[{}{}]", c.to_ascii_uppercase(), c.to_ascii_lowercase())
                }
                c => c.to_string(),
            })
            .collect()
    };
    let mut names: Vec<String> = refused_names().map(any_case).collect();
    names.push(format!("{}.*", any_case(FORBIDDEN_PREFIX)));
    let doc = document();
    let headers = schema(&doc, "Headers");
    assert_eq!(
        headers["propertyNames"]["$ref"],
        "#/components/schemas/HeaderName"
    );
    // Split into patterns of at most 200 characters, each `^(a|b)$`.
    let excluded: Vec<String> = schema(&doc, "HeaderName")["not"]["anyOf"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|alternative| alternative["pattern"].as_str())
        .filter_map(|pattern| pattern.strip_prefix("^(")?.strip_suffix(")$"))
        .flat_map(|names| names.split('|').map(str::to_string))
        .collect();
    assert_eq!(excluded, names);
}

/// Whether a value fits the string patterns `schema` states: its `pattern`,
/// each of `allOf`, one of `anyOf`, and not `not`.
fn matcher(schema: &Value) -> Box<dyn Fn(&str) -> bool> {
    let own = schema["pattern"].as_str().map(|pattern| {
        assert!(
            !pattern.contains("\\s"),
            "{pattern}: \\s differs between regex dialects"
        );
        regex::Regex::new(pattern).unwrap_or_else(|e| panic!("{pattern}: {e}"))
    });
    let all: Vec<_> = schema["allOf"]
        .as_array()
        .into_iter()
        .flatten()
        .map(matcher)
        .collect();
    let any: Option<Vec<_>> = schema["anyOf"]
        .as_array()
        .map(|any| any.iter().map(matcher).collect());
    let not = schema.get("not").map(matcher);
    Box::new(move |value| {
        own.as_ref().is_none_or(|own| own.is_match(value))
            && all.iter().all(|fits| fits(value))
            && any.as_ref().is_none_or(|any| any.iter().any(|fits| fits(value)))
            && not.as_ref().is_none_or(|not| !not(value))
    })
}

/// Every pattern in the document is short enough to read: a longer rule is
/// split into patterns that each state one part of it.
#[test]
fn no_pattern_is_over_200_characters() {
    fn walk(value: &Value, path: &str, found: &mut Vec<String>) {
        match value {
            Value::Object(members) => {
                for (name, member) in members {
                    match (name.as_str(), member.as_str()) {
                        ("pattern", Some(pattern)) if pattern.chars().count() > 200 => {
                            found.push(path.to_string())
                        }
                        _ => walk(member, &format!("{path}/{name}"), found),
                    }
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    walk(item, &format!("{path}/{i}"), found);
                }
            }
            _ => {}
        }
    }
    let mut found = Vec::new();
    walk(&document(), "", &mut found);
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn every_limit_in_openapi_is_the_code_s() {
    use agent_server_shared::error::{MAX_FIELD_ERRORS, MAX_FIELD_PATH_BYTES};
    use agent_server_shared::rules::endpoint::MAX_URL_CHARS;
    use agent_server_shared::rules::headers::{MAX_HEADER_NAME_CHARS, MAX_HEADER_VALUE_CHARS, MAX_HEADERS};
    let doc = document();
    let number = |pointer: &str| doc.pointer(pointer).and_then(Value::as_u64).map(|n| n as usize);
    let limits = [
        ("/components/schemas/Endpoint/maxLength", MAX_URL_CHARS),
        ("/components/schemas/Headers/maxProperties", MAX_HEADERS),
        (
            "/components/schemas/HeaderValue/maxLength",
            MAX_HEADER_VALUE_CHARS,
        ),
        ("/components/schemas/FieldErrors/maxItems", MAX_FIELD_ERRORS),
        (
            "/components/schemas/FieldError/properties/field/maxLength",
            MAX_FIELD_PATH_BYTES,
        ),
    ];
    for (pointer, limit) in limits {
        assert_eq!(number(pointer), Some(limit), "{pointer}");
    }
    let name_pattern = schema(&doc, "HeaderName")["pattern"].as_str().unwrap_or_default();
    assert!(
        name_pattern.ends_with(&format!("{{1,{MAX_HEADER_NAME_CHARS}}}$")),
        "{name_pattern}"
    );
}

/// The `maxLength` a value under `node` must meet: the smallest one it
/// states itself or through `$ref` and `allOf`.
fn max_length(doc: &Value, node: &Value) -> Option<u64> {
    let node = resolve(doc, node);
    let inherited = node["allOf"].as_array().into_iter().flatten();
    let inherited = inherited.filter_map(|part| max_length(doc, part));
    node["maxLength"].as_u64().into_iter().chain(inherited).min()
}

/// A field whose rule carries its own length limit (`Rule::Text { max }`)
/// states that limit as its schema's `maxLength`, through any `$ref` or
/// `allOf`.
#[test]
fn each_field_s_length_limit_is_its_declaration_s() {
    fn lengths<R: Resource>(update: &str) -> Vec<(String, &'static str, usize)> {
        let limits = length_limits::<R>().into_iter();
        limits
            .map(|(field, max)| (update.to_string(), field, max))
            .collect()
    }
    let doc = document();
    let declared: Vec<_> = Table::ALL
        .into_iter()
        .flat_map(|table| with_resource!(table, R => lengths::<R>(&format!("{}Update", schema_name::<R>()))))
        .collect();
    assert!(declared.len() >= 4, "name x3, model_id, api_key: {declared:?}");
    for (update, field, max) in declared {
        let property = &schema(&doc, &update)["properties"][field];
        let documented = max_length(&doc, property);
        assert_eq!(documented, Some(max as u64), "{update}.{field}: maxLength");
    }
}

#[test]
fn the_field_error_codes_are_the_code_s() {
    use agent_server_shared::error::FIELD_CODES;
    let doc = document();
    let documented: BTreeSet<String> = strings(&schema(&doc, "FieldError")["properties"]["code"]["enum"])
        .into_iter()
        .collect();
    let declared: BTreeSet<String> = FIELD_CODES.iter().map(|c| c.to_string()).collect();
    assert_eq!(documented, declared);
}

/// openapi.yaml's `Endpoint` pattern states the URL's shape, and no more:
/// a client that validates with it must never refuse an endpoint the
/// service accepts (the host rules are the service's), and the refused
/// shapes listed here fail the pattern too. (A URL that fits the pattern
/// may still be `invalid_url`, such as a port out of range.)
#[test]
fn the_endpoint_pattern_admits_every_endpoint_the_service_accepts() {
    use agent_server_shared::rules::Rule;
    let doc = document();
    let fits = matcher(schema(&doc, "Endpoint"));
    let codes = |url: &str| rule_codes(Rule::Endpoint, url);
    for accepted in [
        "https://mcp.example.com/sse",
        "http://localhost:8931/mcp",
        "HTTPS://Example.COM:65535/a?b=c&d=%20e#f",
        "https://8.8.8.8/",
        "http://10.0.0.1:8080",
        "https://[2606:4700:4700::1111]/mcp",
        "https://b\u{fc}cher.example/\u{e9}t\u{e9}",
        "https://xn--nxasmq6b.example/",
        "http://example.com?query",
        "http://example.com#fragment",
        "https://example.com/a\u{feff}b",
    ] {
        assert_eq!(
            codes(accepted),
            Vec::<&str>::new(),
            "the service accepts {accepted}"
        );
        assert!(fits(accepted), "openapi.yaml refuses {accepted}");
    }
    for refused in [
        "ftp://example.com/",
        "https:example.com",
        "http:///example.com",
        "http:////example.com/",
        "http://evil.com\\.169.254.169.254/",
        "https://example.com\u{3000}/",
        "https://exa mple.com",
        "https://example.com/\t",
        "example.com",
        "",
    ] {
        assert_eq!(codes(refused), ["invalid_url"], "{refused:?}");
        assert!(!fits(refused), "openapi.yaml admits {refused:?}");
    }
}

/// The string patterns agree with the rules character by character: a
/// client validating with openapi.yaml refuses what the service refuses
/// and accepts what it accepts. They spell whitespace out instead of `\s`,
/// which means one set in ECMA-262 (JSON Schema's dialect, U+FEFF included)
/// and another in Rust (the rules' `char::is_whitespace`), so the `regex`
/// crate reads them as a JSON Schema validator does.
#[test]
fn the_string_patterns_agree_with_the_rules_on_every_character() {
    use agent_server_shared::rules::{MAX_SECRET_BYTES, MAX_TEXT_CHARS, Rule};
    let doc = document();
    let (text, secret, endpoint) = (
        matcher(schema(&doc, "Text")),
        matcher(schema(&doc, "Secret")),
        matcher(schema(&doc, "Endpoint")),
    );
    let accepts = |rule: Rule, value: &str| rule_codes(rule, value).is_empty();
    let name = Rule::Text { max: MAX_TEXT_CHARS };
    let key = Rule::Secret {
        max: MAX_SECRET_BYTES,
    };
    // Every character up to U+3100 (all of Unicode's whitespace and
    // controls lie below), and a few beyond.
    let beyond = [0x200b, 0x2060, 0xe000, 0xfeff, 0xfffd, 0xffff, 0x1f600, 0x10ffff];
    let characters = (0..=0x3100).chain(beyond).filter_map(char::from_u32);
    let mut checked = 0;
    for c in characters {
        for value in [c.to_string(), format!("a{c}b")] {
            // What no pattern without property classes can state (combining
            // marks, planes beyond the first) may fit the pattern and still
            // be refused, never the reverse.
            let codes = rule_codes(name, &value);
            let unstated = matches!(codes.as_slice(), ["blank"] | ["noncharacter"]);
            if !(unstated && text(&value)) {
                assert_eq!(text(&value), codes.is_empty(), "Text {value:?}");
            }
        }
        let value = format!("k{c}k");
        assert_eq!(secret(&value), accepts(key, &value), "Secret {value:?}");
        let value = format!("https://example.com/a{c}b");
        assert_eq!(
            endpoint(&value),
            accepts(Rule::Endpoint, &value),
            "Endpoint {value:?}"
        );
        // In the host, the service may refuse what fits the pattern, never the reverse.
        let value = format!("https://ex{c}ample.com/");
        if accepts(Rule::Endpoint, &value) {
            assert!(endpoint(&value), "Endpoint {value:?}");
        }
        checked += 1;
    }
    assert!(checked > 12_000, "{checked}");
}

/// The Idempotency-Key parameter's pattern admits exactly the keys the
/// service takes: a client that validates with it sends no key the service
/// refuses, and none it refuses is taken.
#[test]
fn the_idempotency_key_pattern_is_the_service_s() {
    use integration_tests::events::Event;
    let doc = document();
    let parameter = &doc["components"]["parameters"]["IdempotencyKey"];
    let fits = matcher(&parameter["schema"]);
    let taken = |value: &str| {
        let event = Event::put(
            integration_tests::Route::Models,
            "3f1c2a9e-7b4d-4e8a-9c21-5d6e7f8a9b01",
            None,
        )
        .header("Idempotency-Key", value);
        agent_server_shared::request::idempotency_key(&event.request()).is_ok_and(|key| key.is_some())
    };
    let mut values: Vec<String> = (0x21u8..0x7f)
        .flat_map(|c| {
            let c = char::from(c);
            [
                format!("{c}"),
                format!("a{c}b"),
                format!("{c}ab"),
                format!("\"{c}\""),
                format!("\"a{c}\""),
                format!("\"\\{c}\""),
            ]
        })
        .collect();
    values.extend([
        "k".repeat(255),
        "k".repeat(256),
        format!("\"{}\"", "k".repeat(255)),
        format!("\"{}\"", "k".repeat(256)),
    ]);
    values.extend([r#""\\""#, r#""\"x""#, "\"\"", "\"", "a\""].map(String::from));
    for value in &values {
        assert_eq!(fits(value), taken(value), "{value:?}");
    }
}

/// The stages a failed handshake names, and the protocol versions a
/// verification may hold, are the client's own lists.
#[test]
fn the_verification_stages_and_versions_are_the_client_s() {
    use agent_server_shared::mcp::{Failure, PROTOCOL_VERSIONS};
    let doc = document();
    let details = &schema(&doc, "McpServerUnprocessableEnvelope")["properties"]["errorDetails"]["properties"];
    assert_eq!(strings(&details["stage"]["enum"]), Failure::STAGES);
    let verification = &schema(&doc, "Verification")["properties"];
    assert_eq!(
        strings(&verification["protocol_version"]["enum"]),
        PROTOCOL_VERSIONS
    );
    let key = &schema(&doc, "ApiKeyUnprocessableEnvelope")["properties"]["errorDetails"]["properties"];
    assert_eq!(
        strings(&key["stage"]["enum"]),
        agent_server_shared::keycheck::KeyFailure::STAGES
    );
}

//! Fuzzes body parsing and validation for all three record kinds.
//!
//! Beyond "never panics": a field that validation accepts must become an
//! attribute that reads back as the submitted JSON (numbers compared as
//! numbers: DynamoDB keeps one spelling of each), and no error for any body
//! may quote the submitted `api_key`.

#![no_main]

use agent_server_shared::error::ApiError;
use agent_server_shared::records::{ApiKey, McpServer, Model, Resource};
use agent_server_shared::rules::{Decimal, Policy};
use agent_server_shared::{item, json, patch};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};

fn check<R: Resource>(body: &Map<String, Value>, policy: Policy) {
    match patch::parse::<R>(body, policy) {
        Ok(set) => {
            for (name, attribute) in &set {
                let read_back = item::to_json(name, attribute).expect("an accepted value converts back");
                let sent = body.get(*name).unwrap_or(&Value::Null);
                assert!(same(&read_back, sent), "{name} does not round-trip: {read_back} {sent}");
            }
        }
        Err(error) => no_secret_in(&error, body),
    }
}

/// JSON equality with numbers compared by value (`1e125` is `1E+125`).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(a), Value::Number(b)) => {
            let (a, b) = (a.to_string(), b.to_string());
            match (Decimal::parse(&a), Decimal::parse(&b)) {
                (Some(a), Some(b)) => a.canonical() == b.canonical(),
                _ => false,
            }
        }
        (Value::Array(a), Value::Array(b)) => a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same(a, b)),
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len() && a.iter().all(|(k, v)| b.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

fn no_secret_in(error: &ApiError, body: &Map<String, Value>) {
    if let Some(Value::String(secret)) = body.get("api_key") {
        // Field names are echoed by design (an unknown field is named), so a
        // secret that also appears elsewhere in the body proves nothing.
        let mut rest = body.clone();
        rest.remove("api_key");
        let elsewhere = serde_json::to_string(&rest).unwrap_or_default().contains(secret.as_str());
        // Short secrets collide with ordinary words in messages; 8+ chars cannot by chance.
        if secret.chars().count() >= 8 && !elsewhere {
            assert!(!format!("{error:?}").contains(secret.as_str()), "an error quotes the api_key");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let body = match json::parse_object(data) {
        Ok(body) => body,
        Err(error) => {
            assert_eq!(error.status(), 400);
            return;
        }
    };
    for allow_private_endpoints in [false, true] {
        let policy = Policy { allow_private_endpoints };
        check::<ApiKey>(&body, policy);
        check::<McpServer>(&body, policy);
        check::<Model>(&body, policy);
    }
});

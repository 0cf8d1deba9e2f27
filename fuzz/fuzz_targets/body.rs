//! Fuzzes body parsing and validation for all three record kinds.
//!
//! Beyond "never panics": a field that validation accepts must become an
//! attribute (or secret) that reads back as the submitted JSON (numbers compared as
//! numbers: DynamoDB keeps one spelling of each), and no error for any body
//! may depend on the submitted `api_key`'s value: the same body with another
//! key of the same shape must give the same error, to the letter.

#![no_main]

use agent_server_shared::error::ApiError;
use agent_server_shared::records::{Resource, Table};
use agent_server_shared::with_resource;
use agent_server_shared::rules::{Decimal, Policy};
use agent_server_shared::patch::Written;
use agent_server_shared::{item, json, patch};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};

fn check<R: Resource>(body: &Map<String, Value>, policy: Policy) {
    match patch::parse::<R>(body, policy) {
        Ok(set) => {
            for (name, written) in &set {
                let read_back = match written {
                    Written::Plain(attribute) => item::to_json(name, attribute).expect("an accepted value converts back"),
                    Written::Secret(secret) => Value::String(secret.expose().to_owned()),
                    Written::Secrets(members) => members
                        .iter()
                        .map(|(name, secret)| (name.clone(), Value::String(secret.expose().to_owned())))
                        .collect(),
                };
                let sent = body.get(*name).unwrap_or(&Value::Null);
                assert!(same(&read_back, sent), "{name} does not round-trip: {read_back} {sent}");
            }
        }
        Err(error) => same_error_for_another_key::<R>(&error, body, policy),
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

/// Differential: the body with its `api_key` swapped for another value of
/// the same shape (each visible ASCII character replaced, every other
/// character kept, so every rule judges it alike) must fail the same way.
/// An error that quoted the key would differ; a key that also appears as a
/// field name elsewhere in the body (which errors name by design) would not.
fn same_error_for_another_key<R: Resource>(error: &ApiError, body: &Map<String, Value>, policy: Policy) {
    let Some(Value::String(secret)) = body.get("api_key") else {
        return;
    };
    let other: String = secret
        .chars()
        .map(|c| match c {
            'x' => 'y',
            c if c.is_ascii_graphic() => 'x',
            c => c,
        })
        .collect();
    if other == *secret {
        return;
    }
    let mut twin = body.clone();
    twin.insert("api_key".into(), Value::String(other));
    let twin_error = patch::parse::<R>(&twin, policy).err();
    assert_eq!(
        Some(format!("{error:?}")),
        twin_error.map(|error| format!("{error:?}")),
        "an error depends on the api_key's value"
    );
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
        for table in Table::ALL {
            with_resource!(table, R => check::<R>(&body, policy));
        }
    }
});

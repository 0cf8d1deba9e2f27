//! One suite, two stores: every case runs against the in-memory store and
//! against DynamoDB Local, so the fast store used by handler tests cannot
//! drift from the real one.

use agent_server_shared::item::Attr;
use agent_server_shared::item::{self, Item};
use agent_server_shared::store::{
    DynamoStore, Expected, Key, MemoryStore, NoneMatch, Store, StoreError, Update, WRITE_ID,
};
use agent_server_shared::{Table, store::TableNames};
use aws_sdk_dynamodb::Client;
use integration_tests::{Route, client, dynamo_local, get_item, put_item, same_json};
use serde_json::{Value, json};

trait Backend: Store {
    async fn put(&self, table: Table, item: Item);
    async fn get(&self, table: Table, key: &Key) -> Option<Item>;
}

impl Backend for MemoryStore {
    async fn put(&self, table: Table, item: Item) {
        assert!(MemoryStore::put(self, table, item), "fixture item has no key");
    }
    async fn get(&self, table: Table, key: &Key) -> Option<Item> {
        MemoryStore::get(self, table, key)
    }
}

struct Dynamo {
    store: DynamoStore,
    client: Client,
}

impl Store for Dynamo {
    async fn update(&self, update: Update) -> Result<Item, StoreError> {
        self.store.update(update).await
    }

    async fn read(
        &self,
        table: Table,
        key: &Key,
        budget: std::time::Duration,
    ) -> Result<Option<Item>, StoreError> {
        self.store.read(table, key, budget).await
    }
}

impl Backend for Dynamo {
    async fn put(&self, table: Table, item: Item) {
        put_item(&self.client, table, item).await;
    }
    async fn get(&self, table: Table, key: &Key) -> Option<Item> {
        get_item(&self.client, table, key).await
    }
}

fn memory() -> MemoryStore {
    MemoryStore::new()
}

async fn dynamo() -> Dynamo {
    let local = dynamo_local().await;
    Dynamo {
        store: DynamoStore::new(client(&local.endpoint), TableNames::default()),
        client: client(&local.endpoint),
    }
}

fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

fn key(route: Route, project_id: &str, id: &str) -> Key {
    Key {
        project_id: route.scoped().then(|| project_id.to_string()),
        id: id.to_string(),
    }
}

fn update(route: Route, key: Key, set: Vec<(&'static str, Attr)>) -> Update {
    Update {
        table: route.table(),
        key,
        set: set.into(),
        remove: Vec::new(),
        expected_versions: None,
        none_match: None,
        unmodified_before: None,
        now: "2026-11-21T14:55:00.123Z".into(),
        write_id: Update::new_write_id(),
        fields: route.fields(),
        updated_by: Some("store-conformance".into()),
        budget: agent_server_shared::budget::TIME_BUDGET,
        unchanged: Vec::new(),
    }
}

fn field_json(item: &Item, name: &str) -> Value {
    item.get(name)
        .map(|attribute| item::to_json(name, attribute).unwrap())
        .unwrap_or(Value::Null)
}

fn static_name(name: &str) -> &'static str {
    [
        "name",
        "api_key",
        "enabled",
        "endpoint",
        "headers",
        "model_id",
        "provider_type",
        "parameters",
    ]
    .into_iter()
    .find(|known| *known == name)
    .unwrap_or_else(|| panic!("unexpected field {name}"))
}

async fn each_field_updates_alone<B: Backend>(backend: &B) {
    for route in Route::ALL {
        for (name, value) in route.full_body().as_object().cloned().unwrap_or_default() {
            let (project, id) = (new_id(), new_id());
            let original = route.item(&project, &id);
            backend.put(route.table(), original.clone()).await;
            let key = key(route, &project, &id);
            let set = vec![(static_name(&name), item::to_attribute(&value))];
            let returned = backend.update(update(route, key.clone(), set)).await;
            let returned = returned.unwrap_or_else(|e| panic!("{route:?}.{name}: {e}"));
            assert!(
                same_json(&field_json(&returned, &name), &value),
                "{route:?}.{name}"
            );
            for (other, attribute) in &original {
                if other != &name && other != "updated_at" {
                    assert_eq!(returned.get(other), Some(attribute), "{route:?}: {other} changed");
                }
            }
            let stored = backend.get(route.table(), &key).await;
            assert_eq!(
                stored.as_ref(),
                Some(&returned),
                "{route:?}: stored item differs from returned"
            );
        }
    }
}

async fn missing_record_is_not_found_and_nothing_is_created<B: Backend>(backend: &B) {
    for route in Route::ALL {
        let key = key(route, &new_id(), &new_id());
        let set = vec![("name", Attr::S("x".into()))];
        let result = backend.update(update(route, key.clone(), set)).await;
        assert_eq!(result, Err(StoreError::NotFound(route.table())), "{route:?}");
        assert_eq!(
            backend.get(route.table(), &key).await,
            None,
            "{route:?}: upserted"
        );
    }
}

async fn another_projects_record_is_not_found_and_unchanged<B: Backend>(backend: &B) {
    for route in [Route::McpServers, Route::Models] {
        let (owner, intruder, id) = (new_id(), new_id(), new_id());
        let original = route.item(&owner, &id);
        backend.put(route.table(), original.clone()).await;
        let set = vec![("name", Attr::S("hijacked".into()))];
        let result = backend
            .update(update(route, key(route, &intruder, &id), set))
            .await;
        assert_eq!(result, Err(StoreError::NotFound(route.table())), "{route:?}");
        assert_eq!(
            backend.get(route.table(), &key(route, &owner, &id)).await,
            Some(original)
        );
        assert_eq!(
            backend.get(route.table(), &key(route, &intruder, &id)).await,
            None
        );
    }
}

async fn parameters_of_every_json_type_round_trip<B: Backend>(backend: &B) {
    let route = Route::Models;
    let parameters: Value = serde_json::from_str(
        r#"{"string": "s", "empty": "", "unicode": "模型 😀", "int": 42, "negative": -7,
            "float": 0.25, "exp": 1.5e3, "big": 12345678901234567890123456789012345678,
            "tiny": 1e-130, "huge": 9.99e125, "zero": 0, "true": true, "false": false, "null": null,
            "array": [1, "two", null, [3], {"four": 4}], "empty_array": [], "empty_object": {},
            "nested": {"reasoning": {"effort": "high", "budget": 1024}}}"#,
    )
    .unwrap();
    let (project, id) = (new_id(), new_id());
    backend.put(route.table(), route.item(&project, &id)).await;
    let key = key(route, &project, &id);
    let set = vec![("parameters", item::to_attribute(&parameters))];
    let returned = backend.update(update(route, key.clone(), set)).await;
    let returned = returned.unwrap();
    assert!(
        same_json(&field_json(&returned, "parameters"), &parameters),
        "returned {}",
        field_json(&returned, "parameters")
    );
    let stored = backend.get(route.table(), &key).await.unwrap_or_default();
    assert!(same_json(&field_json(&stored, "parameters"), &parameters));
    // Stored natively: an object is M, an array L, a number N, null NULL.
    let Some(Attr::M(map)) = stored.get("parameters") else {
        panic!("parameters not stored as M");
    };
    assert!(matches!(map.get("array"), Some(Attr::L(_))));
    assert!(matches!(map.get("big"), Some(Attr::N(_))));
    assert!(matches!(map.get("null"), Some(Attr::Null)));
    assert!(matches!(map.get("true"), Some(Attr::Bool(true))));
}

async fn headers_and_parameters_are_replaced_not_merged<B: Backend>(backend: &B) {
    for (route, name, value) in [
        (Route::McpServers, "headers", json!({"X-New": "new"})),
        (Route::Models, "parameters", json!({"new": 2})),
    ] {
        let (project, id) = (new_id(), new_id());
        backend.put(route.table(), route.item(&project, &id)).await;
        let set = vec![(static_name(name), item::to_attribute(&value))];
        let returned = backend
            .update(update(route, key(route, &project, &id), set))
            .await;
        let returned = returned.unwrap();
        assert!(
            same_json(&field_json(&returned, name), &value),
            "{route:?} merged"
        );
    }
}

async fn updated_at_moves_and_created_at_stays<B: Backend>(backend: &B) {
    for route in Route::ALL {
        let (project, id) = (new_id(), new_id());
        backend.put(route.table(), route.item(&project, &id)).await;
        let set = vec![("name", Attr::S("renamed".into()))];
        let returned = backend
            .update(update(route, key(route, &project, &id), set))
            .await;
        let returned = returned.unwrap();
        assert_eq!(returned["updated_at"], Attr::S("2026-11-21T14:55:00.123Z".into()));
        assert_eq!(returned["created_at"], Attr::S("2026-01-01T00:00:00.000Z".into()));
    }
}

async fn version_counts_every_update<B: Backend>(backend: &B) {
    for route in Route::ALL {
        let (project, id) = (new_id(), new_id());
        backend.put(route.table(), route.item(&project, &id)).await; // no version attribute
        let key = key(route, &project, &id);
        for expected in 1..=3 {
            let set = vec![("name", Attr::S(format!("v{expected}")))];
            let returned = backend.update(update(route, key.clone(), set)).await;
            let returned = returned.unwrap();
            assert_eq!(item::version(&returned), Ok(expected), "{route:?}");
        }
    }
}

async fn other_preconditions_guard_the_write<B: Backend>(backend: &B) {
    for route in Route::ALL {
        let (project, id) = (new_id(), new_id());
        let mut original = route.item(&project, &id);
        original.insert("version".into(), Attr::N("3".into()));
        original.insert("updated_at".into(), Attr::S("2026-11-21T14:55:00.500Z".into()));
        backend.put(route.table(), original.clone()).await;
        let key = key(route, &project, &id);
        let base = || update(route, key.clone(), vec![("name", Attr::S("changed".into()))]);
        let mismatch = Err(StoreError::VersionMismatch { current: "3".into() });
        for refused in [
            Update {
                none_match: Some(NoneMatch::Any),
                ..base()
            },
            Update {
                none_match: Some(NoneMatch::Versions(vec![9, 3])),
                ..base()
            },
            // Written at 14:55:00.500, after "14:55:00" to the second? No:
            // within it; after 14:54:59 it is.
            Update {
                unmodified_before: Some("2026-11-21T14:55:00.000Z".into()),
                ..base()
            },
            Update {
                unmodified_before: Some("2026-11-21T14:55:00.500Z".into()),
                ..base()
            },
        ] {
            assert_eq!(
                backend.update(refused.clone()).await,
                mismatch,
                "{route:?} {refused:?}"
            );
            assert_eq!(
                backend.get(route.table(), &key).await,
                Some(original.clone()),
                "{route:?}"
            );
        }
        // `*` on a missing record: missing, nothing created.
        let missing = Key {
            id: new_id(),
            ..key.clone()
        };
        let absent = Update {
            key: missing.clone(),
            none_match: Some(NoneMatch::Any),
            ..base()
        };
        assert_eq!(
            backend.update(absent).await,
            Err(StoreError::NotFound(route.table()))
        );
        assert_eq!(backend.get(route.table(), &missing).await, None);
        // Passing preconditions write.
        for passing in [
            Update {
                none_match: Some(NoneMatch::Versions(vec![2, 4])),
                ..base()
            },
            Update {
                none_match: Some(NoneMatch::Versions(vec![])),
                ..base()
            },
            Update {
                unmodified_before: Some("2026-11-21T14:55:01.000Z".into()),
                ..base()
            },
        ] {
            assert!(backend.update(passing).await.is_ok(), "{route:?}");
        }
        // Absent version counts as 0 for If-None-Match too.
        let (project, id) = (new_id(), new_id());
        backend.put(route.table(), route.item(&project, &id)).await;
        let zero = Update {
            none_match: Some(NoneMatch::Versions(vec![0])),
            ..update(
                route,
                self::key(route, &project, &id),
                vec![("name", Attr::S("z".into()))],
            )
        };
        assert_eq!(
            backend.update(zero).await,
            Err(StoreError::VersionMismatch { current: "0".into() })
        );
    }
}

async fn who_and_which_fields_are_stored<B: Backend>(backend: &B) {
    for route in Route::ALL {
        let (project, id) = (new_id(), new_id());
        backend.put(route.table(), route.item(&project, &id)).await;
        let key = key(route, &project, &id);
        // Two settable fields, in an order that is not the set's.
        let other = route
            .fields()
            .iter()
            .rev()
            .find(|field| field.name != "name" && field.rule().is_some())
            .map_or("name", |field| field.name);
        let set = vec![("name", Attr::S("n".into())), (other, Attr::Null)];
        let written = backend.update(update(route, key.clone(), set)).await.unwrap();
        assert_eq!(
            written.get("updated_by"),
            Some(&Attr::S("store-conformance".into()))
        );
        // A string set: no order.
        let mut stored = match written.get("updated_fields") {
            Some(Attr::Ss(names)) => names.clone(),
            other => panic!("{route:?}: updated_fields is {other:?}"),
        };
        stored.sort();
        let mut expected = vec!["name".to_string(), other.to_string()];
        expected.sort();
        assert_eq!(stored, expected, "{route:?}");
        // A caller with no principal leaves no earlier caller's name.
        let anonymous = Update {
            updated_by: None,
            ..update(route, key.clone(), vec![("name", Attr::S("m".into()))])
        };
        let written = backend.update(anonymous).await.unwrap();
        assert_eq!(written.get("updated_by"), None, "{route:?}");
        assert_eq!(
            written.get("updated_fields"),
            Some(&Attr::Ss(vec!["name".into()]))
        );
        assert_eq!(backend.get(route.table(), &key).await.as_ref(), Some(&written));
    }
}

async fn expected_versions_guard_the_write<B: Backend>(backend: &B) {
    for route in Route::ALL {
        let (project, id) = (new_id(), new_id());
        let mut original = route.item(&project, &id);
        backend.put(route.table(), original.clone()).await;
        let key = key(route, &project, &id);
        let guarded = |versions: Vec<u64>, name: &str| Update {
            expected_versions: Some(versions),
            ..update(route, key.clone(), vec![("name", Attr::S(name.into()))])
        };
        // No version attribute counts as 0.
        assert_eq!(
            backend.update(guarded(vec![1], "stale")).await,
            Err(StoreError::VersionMismatch { current: "0".into() })
        );
        assert_eq!(backend.get(route.table(), &key).await, Some(original.clone()));
        let first = backend.update(guarded(vec![0], "first")).await;
        assert_eq!(first.as_ref().map(item::version), Ok(Ok(1)), "{route:?}");
        // A list matches if any entry does; an empty list never does.
        let second = backend.update(guarded(vec![7, 1], "second")).await;
        assert_eq!(second.as_ref().map(item::version), Ok(Ok(2)));
        let before = backend.get(route.table(), &key).await;
        assert_eq!(
            backend.update(guarded(vec![], "never")).await,
            Err(StoreError::VersionMismatch { current: "2".into() })
        );
        assert_eq!(
            backend.update(guarded(vec![1], "stale")).await,
            Err(StoreError::VersionMismatch { current: "2".into() })
        );
        assert_eq!(
            backend.get(route.table(), &key).await,
            before,
            "a refused write changed the item"
        );
        // A missing record is missing, whatever the precondition.
        let missing = Update {
            key: Key {
                id: new_id(),
                ..key.clone()
            },
            ..guarded(vec![0], "missing")
        };
        assert_eq!(
            backend.update(missing).await,
            Err(StoreError::NotFound(route.table()))
        );
        // An explicit version attribute of 0 matches 0 too.
        original.insert("version".into(), Attr::N("0".into()));
        original.insert("id".into(), Attr::S(new_id()));
        let zero_key = Key::of_item(route.table(), &original).expect("no key");
        backend.put(route.table(), original).await;
        let zero = Update {
            key: zero_key,
            ..guarded(vec![0], "zero")
        };
        assert_eq!(backend.update(zero).await.as_ref().map(item::version), Ok(Ok(1)));
    }
}

/// Items this service did not write: each is refused before anything is
/// written (the condition says what the service could not return), unless
/// the write replaces the odd attribute.
async fn items_the_service_cannot_return_are_left_unchanged<B: Backend>(backend: &B) {
    let n = |text: &str| Attr::N(text.into());
    for route in Route::ALL {
        let odd_map = match route {
            Route::ApiKeys => ("enabled", Attr::S("yes".into())),
            Route::McpServers => ("headers", Attr::S("{}".into())),
            Route::Models => ("parameters", Attr::L(vec![])),
        };
        for (attribute, value) in [
            ("version", n("-7")),
            ("version", n("18446744073709551615")),
            ("version", n("100000000000000000000")),
            ("version", Attr::S("3".into())),
            ("created_at", n("1")),
            ("name", Attr::Bool(true)),
            odd_map.clone(),
        ] {
            let (project, id) = (new_id(), new_id());
            let mut original = route.item(&project, &id);
            original.insert(attribute.into(), value.clone());
            backend.put(route.table(), original.clone()).await;
            let key = key(route, &project, &id);
            // A write that keeps the odd attribute is refused; nothing changes.
            let keep = if attribute == "name" {
                vec![(odd_field(route), Attr::S("x".into()))]
            } else {
                vec![("name", Attr::S("x".into()))]
            };
            let outcome = backend.update(update(route, key.clone(), keep)).await;
            assert!(
                matches!(&outcome, Err(StoreError::Unreadable(_))),
                "{route:?} {attribute}={value:?}: {outcome:?}"
            );
            assert_eq!(backend.get(route.table(), &key).await, Some(original.clone()));
            // With If-Match as well.
            // (For the odd `name`, which the write replaces, a stale tag.)
            let expected = if attribute == "name" { vec![5] } else { vec![0, 3] };
            let guarded = Update {
                expected_versions: Some(expected),
                ..update(route, key.clone(), vec![("name", Attr::S("y".into()))])
            };
            let outcome = backend.update(guarded).await;
            if attribute == "name" {
                // The write replaces the odd attribute, so only the stale
                // version stops it: a mismatch, as for any other item.
                assert!(
                    matches!(&outcome, Err(StoreError::VersionMismatch { current }) if current == "0"),
                    "{route:?}: {outcome:?}"
                );
            } else {
                assert!(matches!(&outcome, Err(StoreError::Unreadable(_))), "{outcome:?}");
            }
            assert_eq!(backend.get(route.table(), &key).await, Some(original.clone()));
            // A write that replaces the odd attribute is an ordinary write.
            if attribute == "name" {
                let set = vec![("name", Attr::S("fixed".into()))];
                let fixed = backend.update(update(route, key.clone(), set)).await;
                assert!(fixed.is_ok(), "{route:?}: {fixed:?}");
            }
        }
    }
}

/// Another writable field than `name`, for the case where `name` is odd.
fn odd_field(route: Route) -> &'static str {
    match route {
        Route::ApiKeys => "enabled",
        Route::McpServers => "endpoint",
        Route::Models => "model_id",
    }
}

/// Every number validation accepts is stored, whatever exponent it was
/// written with, and reads back as the same value.
async fn numbers_at_the_extremes_are_stored<B: Backend>(backend: &B) {
    let text = r#"{"zero_huge": 0e2147483648, "zero_tiny": -0.000e-99999999999999999999,
        "smallest": 1e-130, "negative_smallest": -1E-130, "largest": 9.9999999999999999999999999999999999999e125,
        "padded_exponent": 1e0000000000000000000000125, "digits": 12345678901234567890123456789012345678,
        "fraction": 0.00012345678901234567890123456789012345678, "long_zeros": 1234567890123456789012345678901234567800000}"#;
    let parameters: Value = serde_json::from_str(text).unwrap();
    let mut errors = agent_server_shared::error::FieldErrors::new();
    agent_server_shared::rules::Rule::Parameters.check(
        "parameters",
        &parameters,
        Default::default(),
        &mut errors,
    );
    assert!(
        errors.is_empty(),
        "the rules accept every one: {:?}",
        errors.into_vec()
    );
    let route = Route::Models;
    let (project, id) = (new_id(), new_id());
    backend.put(route.table(), route.item(&project, &id)).await;
    let key = key(route, &project, &id);
    let set = vec![("parameters", item::to_attribute(&parameters))];
    let returned = backend.update(update(route, key.clone(), set)).await;
    let returned = returned.unwrap();
    assert!(same_json(&field_json(&returned, "parameters"), &parameters));
    let stored = backend.get(route.table(), &key).await.unwrap_or_default();
    assert!(same_json(&field_json(&stored, "parameters"), &parameters));
}

/// A fractional version (never written by this service) cannot be refused
/// by a condition, so it is carried on: the write succeeds and the new
/// version is reported as it is; If-Match can never match it.
async fn a_fractional_version_is_carried_on<B: Backend>(backend: &B) {
    for route in Route::ALL {
        let (project, id) = (new_id(), new_id());
        let mut original = route.item(&project, &id);
        original.insert("version".into(), Attr::N("1.5".into()));
        backend.put(route.table(), original.clone()).await;
        let key = key(route, &project, &id);
        let guarded = Update {
            expected_versions: Some(vec![1, 2]),
            ..update(route, key.clone(), vec![("name", Attr::S("y".into()))])
        };
        // Refused with the stored version's tag: what a 412's ETag says.
        assert_eq!(
            backend.update(guarded).await,
            Err(StoreError::VersionMismatch {
                current: "1.5".into()
            })
        );
        assert_eq!(backend.get(route.table(), &key).await, Some(original.clone()));
        let set = vec![("name", Attr::S("x".into()))];
        let returned = backend.update(update(route, key.clone(), set)).await;
        let returned = returned.unwrap_or_else(|e| panic!("{route:?}: {e}"));
        assert_eq!(item::version_tag(&returned), Ok("2.5".to_string()), "{route:?}");
    }
}

/// The SDK retries an attempt that timed out, and that attempt may have
/// been applied: the same update sent again is answered with the item it
/// wrote, and writes nothing, with or without expected versions; another
/// update writes as usual.
async fn a_retried_update_is_written_once<B: Backend>(backend: &B) {
    for route in Route::ALL {
        let (project, id) = (new_id(), new_id());
        backend.put(route.table(), route.item(&project, &id)).await;
        let key = key(route, &project, &id);
        let once = update(route, key.clone(), vec![("name", Attr::S("once".into()))]);
        let first = backend.update(once.clone()).await;
        let first = first.unwrap_or_else(|e| panic!("{route:?}: {e}"));
        assert_eq!(item::version(&first), Ok(1), "{route:?}");
        let again = backend.update(once).await;
        assert_eq!(again.as_ref(), Ok(&first), "{route:?}: the retry wrote again");
        assert_eq!(backend.get(route.table(), &key).await, Some(first.clone()));

        let guarded = Update {
            expected_versions: Some(vec![1]),
            ..update(route, key.clone(), vec![("name", Attr::S("guarded".into()))])
        };
        let second = backend.update(guarded.clone()).await;
        let second = second.unwrap_or_else(|e| panic!("{route:?}: {e}"));
        assert_eq!(item::version(&second), Ok(2), "{route:?}");
        // Its own write is no precondition failure.
        assert_eq!(backend.update(guarded).await.as_ref(), Ok(&second), "{route:?}");

        let other = update(route, key.clone(), vec![("name", Attr::S("once".into()))]);
        let third = backend.update(other).await.map(|item| item::version(&item));
        assert_eq!(third, Ok(Ok(3)), "{route:?}: a new update writes");

        // A write id of another type, put there by another writer, is no
        // update's own: the write goes ahead.
        let (project, id) = (new_id(), new_id());
        let mut odd = route.item(&project, &id);
        odd.insert(WRITE_ID.into(), Attr::N("7".into()));
        backend.put(route.table(), odd).await;
        let odd_key = self::key(route, &project, &id);
        let mut same_text = update(route, odd_key, vec![("name", Attr::S("x".into()))]);
        same_text.write_id = "7".into();
        let written = backend.update(same_text).await.map(|item| item::version(&item));
        assert_eq!(written, Ok(Ok(1)), "{route:?}");
    }
}

/// What a write expects unchanged ([`Update::unchanged`]): an attribute
/// expected absent refuses a write once it is stored; one expected equal
/// (a map, a binary, a fractional version) refuses any other value; each
/// refusal returns the item as stored and writes nothing, a `version` that
/// moved is a version mismatch, and a failed precondition is told first.
async fn unchanged_attributes_guard_the_write<B: Backend>(backend: &B) {
    let route = Route::McpServers;
    let (project, id) = (new_id(), new_id());
    backend.put(route.table(), route.item(&project, &id)).await;
    let key = key(route, &project, &id);
    let with = |unchanged: Vec<(&'static str, Expected)>, set: Vec<(&'static str, Attr)>| Update {
        unchanged,
        ..update(route, key.clone(), set)
    };
    let blob = |byte: u8| Attr::B(vec![byte; 40]);
    let sealed = |byte: u8| Attr::M([("Authorization".to_string(), blob(byte))].into());
    let name = |text: &str| ("name", Attr::S(text.into()));
    // Nothing stored: expecting absence writes (and a key may be set with it).
    let first = backend
        .update(with(
            vec![("headers_key", Expected::Absent)],
            vec![name("a"), ("headers", sealed(1)), ("headers_key", blob(7))],
        ))
        .await
        .unwrap();
    assert_eq!(first.get("headers_key"), Some(&blob(7)));
    let before = backend.get(route.table(), &key).await;
    for expected in [
        vec![("headers_key", Expected::Absent)],
        vec![("headers_key", Expected::Is(blob(8)))],
        vec![
            ("headers_key", Expected::Is(blob(7))),
            ("headers", Expected::Is(sealed(2))),
        ],
        vec![("headers", Expected::Absent)],
        vec![("headers", Expected::AbsentOrEmpty)],
    ] {
        let refused = backend.update(with(expected.clone(), vec![name("b")])).await;
        match refused {
            Err(StoreError::Changed(seen)) => assert_eq!(Some(*seen.0), before, "{expected:?}"),
            other => panic!("{expected:?}: expected Changed, got {other:?}"),
        }
        assert_eq!(
            backend.get(route.table(), &key).await,
            before,
            "{expected:?} wrote"
        );
    }
    // A version that moved is a mismatch, with the stored tag.
    let moved = backend
        .update(with(
            vec![("version", Expected::Is(Attr::N("0".into())))],
            vec![name("c")],
        ))
        .await;
    assert_eq!(moved, Err(StoreError::VersionMismatch { current: "1".into() }));
    // Absent or empty: an empty map passes, a sealed one does not.
    let (project, id) = (new_id(), new_id());
    let mut empty = route.item(&project, &id);
    empty.insert("headers".into(), Attr::M(Default::default()));
    backend.put(route.table(), empty).await;
    let emptied = backend
        .update(Update {
            unchanged: vec![("headers", Expected::AbsentOrEmpty)],
            ..update(route, self::key(route, &project, &id), vec![name("x")])
        })
        .await;
    assert!(emptied.is_ok(), "{emptied:?}");
    // A failed precondition is told first.
    let stale = Update {
        expected_versions: Some(vec![0]),
        ..with(vec![("headers_key", Expected::Absent)], vec![name("d")])
    };
    assert_eq!(
        backend.update(stale).await,
        Err(StoreError::VersionMismatch { current: "1".into() })
    );
    // Exactly as stored: writes, the key removed with the values.
    let kept = backend
        .update(Update {
            remove: vec!["headers", "headers_key"],
            ..with(
                vec![
                    ("headers_key", Expected::Is(blob(7))),
                    ("headers", Expected::Is(sealed(1))),
                    ("version", Expected::Is(Attr::N("1".into()))),
                ],
                vec![name("e")],
            )
        })
        .await
        .unwrap();
    assert_eq!((kept.get("headers_key"), item::version(&kept)), (None, Ok(2)));
    assert_eq!(backend.get(route.table(), &key).await, Some(kept.clone()));
    // The data key is no field: updated_fields names the fields only.
    assert_eq!(
        kept.get("updated_fields"),
        Some(&Attr::Ss(vec!["headers".into(), "name".into()]))
    );
    // A fractional version another writer stored is expected by value.
    let (project, id) = (new_id(), new_id());
    let mut item = route.item(&project, &id);
    item.insert("version".into(), Attr::N("1.5".into()));
    backend.put(route.table(), item).await;
    let key = self::key(route, &project, &id);
    let fraction = Update {
        unchanged: vec![("version", Expected::Is(Attr::N("1.5".into())))],
        ..update(route, key.clone(), vec![name("f")])
    };
    let written = backend.update(fraction).await.unwrap();
    assert_eq!(item::version_tag(&written), Ok("2.5".into()));
    // Numbers compare by value, as DynamoDB compares them: 2.50 is 2.5.
    let respelled = Update {
        unchanged: vec![("version", Expected::Is(Attr::N("2.50".into())))],
        ..update(route, key.clone(), vec![name("f2")])
    };
    let written = backend.update(respelled).await.unwrap();
    assert_eq!(item::version_tag(&written), Ok("3.5".into()));
    // A NULL stored is expected as a NULL; sets whatever their order.
    let (project, id) = (new_id(), new_id());
    let mut item = route.item(&project, &id);
    item.insert("headers".into(), Attr::Null);
    item.insert("tags".into(), Attr::Ss(vec!["b".into(), "a".into()]));
    backend.put(route.table(), item).await;
    let nulled = self::key(route, &project, &id);
    let expected = Update {
        unchanged: vec![
            ("headers", Expected::Is(Attr::Null)),
            ("tags", Expected::Is(Attr::Ss(vec!["a".into(), "b".into()]))),
        ],
        ..update(route, nulled.clone(), vec![name("n")])
    };
    assert!(backend.update(expected).await.is_ok());
    let absent = Update {
        unchanged: vec![("headers", Expected::Absent)],
        ..update(route, nulled, vec![name("m")])
    };
    assert!(matches!(
        backend.update(absent).await,
        Err(StoreError::Changed(_))
    ));
    let stale = Update {
        unchanged: vec![("version", Expected::Is(Attr::N("1.5".into())))],
        ..update(route, key, vec![name("g")])
    };
    assert_eq!(
        backend.update(stale).await,
        Err(StoreError::VersionMismatch {
            current: "3.5".into()
        })
    );
}

/// A read is the item as stored, or none; a write may remove fields, which
/// `updated_fields` then names with the ones it set.
async fn reads_and_removals<B: Backend>(backend: &B) {
    let budget = agent_server_shared::budget::TIME_BUDGET;
    for route in [Route::McpServers, Route::Models] {
        let (project, id) = (new_id(), new_id());
        let key = key(route, &project, &id);
        assert_eq!(
            backend.read(route.table(), &key, budget).await,
            Ok(None),
            "{route:?}"
        );
        backend.put(route.table(), route.item(&project, &id)).await;
        let read = backend.read(route.table(), &key, budget).await;
        assert_eq!(
            read.as_ref().ok().cloned().flatten(),
            backend.get(route.table(), &key).await
        );
        // Another project's key reads nothing.
        let elsewhere = self::key(route, &new_id(), &id);
        assert_eq!(backend.read(route.table(), &elsewhere, budget).await, Ok(None));
        let map = if route == Route::McpServers {
            "headers"
        } else {
            "parameters"
        };
        let removal = Update {
            remove: vec![map],
            ..update(route, key.clone(), vec![("name", Attr::S("kept".into()))])
        };
        let written = backend
            .update(removal)
            .await
            .unwrap_or_else(|e| panic!("{route:?}: {e}"));
        assert_eq!(written.get(map), None, "{route:?}");
        assert_eq!(written.get("name"), Some(&Attr::S("kept".into())));
        assert_eq!(
            written.get("updated_fields"),
            Some(&Attr::Ss(
                vec![map.to_string(), "name".to_string()]
                    .into_iter()
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect()
            ))
        );
        assert_eq!(backend.get(route.table(), &key).await, Some(written));
        // No budget left: no call, unavailable.
        let refused = backend.read(route.table(), &key, std::time::Duration::ZERO).await;
        assert!(matches!(refused, Err(StoreError::Unavailable(_))), "{refused:?}");
    }
}

macro_rules! conformance {
    ($($case:ident),* $(,)?) => {
        mod memory_store {
            $(#[tokio::test]
            async fn $case() {
                super::$case(&super::memory()).await;
            })*
        }
        mod dynamodb_local {
            $(#[tokio::test]
            async fn $case() {
                super::$case(&super::dynamo().await).await;
            })*
        }
    };
}

conformance!(
    reads_and_removals,
    unchanged_attributes_guard_the_write,
    other_preconditions_guard_the_write,
    who_and_which_fields_are_stored,
    each_field_updates_alone,
    missing_record_is_not_found_and_nothing_is_created,
    another_projects_record_is_not_found_and_unchanged,
    parameters_of_every_json_type_round_trip,
    headers_and_parameters_are_replaced_not_merged,
    updated_at_moves_and_created_at_stays,
    version_counts_every_update,
    expected_versions_guard_the_write,
    items_the_service_cannot_return_are_left_unchanged,
    a_fractional_version_is_carried_on,
    a_retried_update_is_written_once,
    numbers_at_the_extremes_are_stored,
);

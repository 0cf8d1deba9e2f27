//! MCP header values are sealed before they reach the table, proven against
//! DynamoDB Local and a local KMS (moto's server, which enforces encryption
//! contexts as KMS does): a sentinel header value sent through the local
//! API exists at rest only as AES-256-GCM ciphertext under a data key bound
//! to its record (and each value to its name); every PUT still answers with
//! the values; a KMS outage writes nothing; and the cost bounds hold: a
//! record without sealed values costs what it did, one with them one KMS
//! call and at most two DynamoDB calls.

use std::sync::Arc;

use agent_server_shared::item::Attr;
use agent_server_shared::item::Item;
use agent_server_shared::seal::{self, DataKey, MemorySealer, SealError, Sealer};
use agent_server_shared::store::{Key, MemoryStore, Store, StoreError, TableNames, Update};
use agent_server_shared::{App, Settings, Table};
use integration_tests::events::Event;
use integration_tests::{
    KmsLocal, Route, body_json, capture_logs, client, consumer_example, dynamo_local, free_port, http,
    kms_decrypt, kms_local, put_item, serve_sealing,
};
use serde_json::{Value, json};

const SENTINEL: &str = "mcp-SEALED-HEADER-SENTINEL-7c2f";

/// A fresh MCP server record with plain headers, as written before sealing.
async fn plain_record() -> Key {
    integration_tests::mcp_record(None).await
}

async fn stored(key: &Key) -> Item {
    integration_tests::stored_mcp(key).await
}

fn url(base: &str, key: &Key) -> String {
    let project = key.project_id.as_deref().unwrap_or_default();
    format!(
        "{base}/api/agent-server/mcp-servers/{}?project_id={project}",
        key.id
    )
}

const JSON: [(&str, &str); 1] = [("content-type", "application/json")];

async fn put(base: &str, key: &Key, body: Value) -> integration_tests::Reply {
    http("PUT", &url(base, key), &JSON, body.to_string()).await
}

fn sealed_headers(item: &Item) -> (Vec<u8>, Vec<(String, Vec<u8>)>) {
    let Some(Attr::B(data_key)) = item.get("headers_key") else {
        panic!(
            "no sealed data key: {:?}",
            item.get("headers_key").map(|_| "another type")
        );
    };
    let Some(Attr::M(members)) = item.get("headers") else {
        panic!("headers are not a map");
    };
    let mut values: Vec<(String, Vec<u8>)> = members
        .iter()
        .map(|(name, value)| match value {
            Attr::B(sealed) => (name.clone(), sealed.clone()),
            _ => panic!("{name} is not sealed"),
        })
        .collect();
    values.sort();
    (data_key.clone(), values)
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

/// Opens `sealed` as docs/secrets.md tells a consumer to, from the data
/// key's plaintext: AES-256-GCM, nonce after the version byte, associated
/// data `0x01 || field 0x00 project 0x00 id 0x00 name`.
fn open_as_documented(plain_key: &[u8], key: &Key, name: &str, sealed: &[u8]) -> Option<String> {
    use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
    use aws_lc_rs::hkdf::{HKDF_SHA256, Salt};
    let (&version, rest) = sealed.split_first()?;
    // Layout 2: a key per write, HKDF-SHA256 of the data key under the
    // value's salt; layout 1: the data key itself.
    let (value_key, rest) = match version {
        2 if rest.len() >= 32 + 28 => {
            let (salt, rest) = rest.split_at(32);
            let mut derived = [0u8; 32];
            Salt::new(HKDF_SHA256, salt)
                .extract(plain_key)
                .expand(&[b"agent-server sealed values v2"], HKDF_SHA256)
                .ok()?
                .fill(&mut derived)
                .ok()?;
            (derived.to_vec(), rest)
        }
        1 if rest.len() >= 28 => (plain_key.to_vec(), rest),
        _ => return None,
    };
    let (nonce, ciphertext) = rest.split_at(12);
    let aead = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &value_key).ok()?);
    let mut aad = vec![version];
    let project = key.project_id.as_deref().unwrap_or_default();
    aad.extend_from_slice(format!("headers\0{project}\0{}\0{name}", key.id).as_bytes());
    let mut in_out = ciphertext.to_vec();
    let opened = aead
        .open_in_place(
            Nonce::try_assume_unique_for_key(nonce).ok()?,
            Aad::from(aad),
            &mut in_out,
        )
        .ok()?;
    String::from_utf8(opened.to_vec()).ok()
}

#[tokio::test]
async fn a_header_value_sent_to_the_api_exists_at_rest_only_as_ciphertext_bound_to_its_record_and_name() {
    let (logs, _guard) = capture_logs();
    let kms = kms_local().await;
    let base = serve_sealing(kms.sealer()).await;
    let key = plain_record().await;
    let other = plain_record().await;
    let headers = json!({"Authorization": format!("Bearer {SENTINEL}"), "X-Api-Key": SENTINEL, "Accept": "text/event-stream"});
    let reply = put(&base, &key, json!({"name": "Sealed", "headers": headers})).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(
        reply.body["data"]["headers"], headers,
        "the answer shows the values"
    );

    let item = stored(&key).await;
    assert!(!format!("{item:?}").contains(SENTINEL), "{item:?}");
    let (data_key, values) = sealed_headers(&item);
    let names: Vec<&str> = values.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        ["Accept", "Authorization", "X-Api-Key"],
        "names stay readable"
    );
    for (_, sealed) in &values {
        assert!(!contains(sealed, SENTINEL) && !contains(sealed, "SENTINEL"));
    }
    assert_eq!(
        item.get("updated_fields"),
        Some(&Attr::Ss(vec!["headers".into(), "name".into()]))
    );

    // The data key opens with one Decrypt and the documented context only.
    let project = key.project_id.as_deref().unwrap_or_default();
    let context = [
        ("field", "headers"),
        ("project_id", project),
        ("id", key.id.as_str()),
    ];
    let plain_key = kms_decrypt(&kms.endpoint, &data_key, &context)
        .await
        .expect("Decrypt refused");
    assert_eq!(plain_key.len(), 32);
    let other_project = other.project_id.as_deref().unwrap_or_default();
    for wrong in [
        vec![
            ("field", "headers"),
            ("project_id", project),
            ("id", other.id.as_str()),
        ],
        vec![
            ("field", "headers"),
            ("project_id", other_project),
            ("id", key.id.as_str()),
        ],
        vec![("field", "api_key"), ("id", key.id.as_str())],
        vec![("field", "headers"), ("id", key.id.as_str())],
        vec![],
    ] {
        assert!(
            kms_decrypt(&kms.endpoint, &data_key, &wrong).await.is_err(),
            "opened with {wrong:?}"
        );
    }
    // Each value opens under its own name and record only.
    for (name, sealed) in &values {
        let expected = headers[name].as_str();
        assert_eq!(
            open_as_documented(&plain_key, &key, name, sealed).as_deref(),
            expected
        );
        for (other_name, _) in values.iter().filter(|(other_name, _)| other_name != name) {
            assert_eq!(
                open_as_documented(&plain_key, &key, other_name, sealed),
                None,
                "{name} as {other_name}"
            );
        }
        assert_eq!(open_as_documented(&plain_key, &other, name, sealed), None);
        assert_eq!(
            open_as_documented(&plain_key, &key, &name.to_lowercase(), sealed),
            None
        );
    }

    // Both consumer examples open them as docs/secrets.md tells a reader to.
    for example in ["open_mcp_headers.py", "open_mcp_headers"] {
        let printed = consumer_example(example, &[project, &key.id], &kms.endpoint).await;
        let printed: serde_json::Value = serde_json::from_str(&printed).expect("the example printed JSON");
        assert_eq!(printed, headers, "{example}");
    }

    // A PUT that only renames answers with the values, opened.
    let reply = put(&base, &key, json!({"name": "Renamed"})).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["data"]["headers"], headers);
    assert_eq!(reply.body["data"]["name"], "Renamed");
    let renamed = stored(&key).await;
    assert_eq!(
        sealed_headers(&renamed),
        (data_key, values),
        "a rename re-sealed the values"
    );

    // An empty map stores no key: nothing is left to open.
    let reply = put(&base, &key, json!({"headers": {}})).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["data"]["headers"], json!({}));
    assert_eq!(stored(&key).await.get("headers_key"), None);

    let logged = logs.text();
    assert!(logged.contains("\"status\":200"), "no access line: {logged}");
    assert!(!logged.contains(SENTINEL), "a log line carries a header value");
}

#[tokio::test]
async fn a_kms_outage_writes_nothing_where_kms_is_needed_and_nothing_else_stops() {
    let (logs, _guard) = capture_logs();
    let kms = KmsLocal::start(free_port()).await;
    let base = serve_sealing(kms.sealer()).await;
    let sealed = plain_record().await;
    let reply = put(
        &base,
        &sealed,
        json!({"headers": {"Authorization": "Bearer before"}}),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let unsealed = plain_record().await;
    let (sealed_before, unsealed_before) = (stored(&sealed).await, stored(&unsealed).await);

    kms.stop();
    for (key, body, before) in [
        (&sealed, json!({"name": "Not written"}), &sealed_before),
        (
            &sealed,
            json!({"headers": {"Authorization": SENTINEL}}),
            &sealed_before,
        ),
        (
            &unsealed,
            json!({"headers": {"Authorization": SENTINEL}}),
            &unsealed_before,
        ),
    ] {
        let reply = put(&base, key, body.clone()).await;
        assert_eq!(reply.status, 503, "{body}: {}", reply.body);
        assert_eq!(reply.body["errorDetails"]["code"], "unavailable");
        assert!(reply.headers.contains_key("retry-after"));
        assert_eq!(&stored(key).await, before, "{body}: written while KMS was down");
        assert!(!reply.body.to_string().contains(SENTINEL));
    }
    // No KMS needed: a rename of a record with no sealed values, clearing
    // the headers, and a model update all go on.
    let reply = put(&base, &unsealed, json!({"name": "Renamed"})).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["data"]["headers"], json!({"X-Old": "old"}));
    let reply = put(&base, &sealed, json!({"headers": {}})).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let dynamo = client(&dynamo_local().await.endpoint);
    let (project, id) = (uuid::Uuid::new_v4().to_string(), uuid::Uuid::new_v4().to_string());
    put_item(&dynamo, Table::Models, Route::Models.item(&project, &id)).await;
    let model = http(
        "PUT",
        &format!("{base}/api/agent-server/models/{id}?project_id={project}"),
        &JSON,
        json!({"name": "Still works"}).to_string(),
    )
    .await;
    assert_eq!(model.status, 200, "{}", model.body);
    assert!(!logs.text().contains(SENTINEL));
}

/// The MCP route's handler on a memory store and sealer, as the Lambda
/// binary runs it: the answer, and the calls each made.
struct Counted {
    status: u16,
    body: Value,
    store_calls: usize,
    kms_calls: usize,
}

async fn call<S: Store>(app: &App<S>, sealer: &MemorySealer, key: &Key, body: Value) -> (u16, Value, usize) {
    let before = sealer.calls();
    let event = Event::put(Route::McpServers, &key.id, key.project_id.as_deref()).json(&body);
    let response = Route::McpServers.call(app, event.request()).await;
    (
        response.status().as_u16(),
        body_json(&response),
        sealer.calls() - before,
    )
}

fn memory_app() -> (App<MemoryStore>, Arc<MemorySealer>) {
    let sealer = Arc::new(MemorySealer::new());
    let app = App {
        store: MemoryStore::new(),
        settings: Settings::default(),
        sealer: Some(Sealer::Memory(sealer.clone())),
    };
    (app, sealer)
}

fn memory_record(app: &App<MemoryStore>) -> Key {
    let (project, id) = (uuid::Uuid::new_v4().to_string(), uuid::Uuid::new_v4().to_string());
    assert!(
        app.store
            .put(Table::McpServers, Route::McpServers.item(&project, &id))
    );
    Key {
        project_id: Some(project),
        id,
    }
}

async fn counted(app: &App<MemoryStore>, sealer: &MemorySealer, key: &Key, body: Value) -> Counted {
    let store_before = app.store.calls();
    let (status, body, kms_calls) = call(app, sealer, key, body).await;
    Counted {
        status,
        body,
        store_calls: app.store.calls() - store_before,
        kms_calls,
    }
}

#[tokio::test]
async fn each_request_makes_at_most_one_kms_call_and_two_store_calls() {
    let (app, sealer) = memory_app();
    let key = memory_record(&app);
    // Plain headers (stored before sealing): the try expecting none is
    // refused, and the write is conditioned on them as read; no KMS call.
    let rename = counted(&app, &sealer, &key, json!({"name": "a"})).await;
    assert_eq!((rename.status, rename.store_calls, rename.kms_calls), (200, 2, 0));
    // Setting headers: one data key, one write.
    let headers = json!({"Authorization": "Bearer t", "X-Other": "o"});
    let set = counted(&app, &sealer, &key, json!({"headers": headers})).await;
    assert_eq!((set.status, set.store_calls, set.kms_calls), (200, 1, 1));
    assert_eq!(set.body["data"]["headers"], headers);
    // A rename of a sealed record: the refused try, one Decrypt, the write.
    let rename = counted(
        &app,
        &sealer,
        &key,
        json!({"name": "b", "endpoint": "https://e.example"}),
    )
    .await;
    assert_eq!((rename.status, rename.store_calls, rename.kms_calls), (200, 2, 1));
    assert_eq!(rename.body["data"]["headers"], headers);
    // Empty headers: no key needed.
    let clear = counted(&app, &sealer, &key, json!({"headers": {}})).await;
    assert_eq!((clear.status, clear.store_calls, clear.kms_calls), (200, 1, 0));
    // No values to open: one write.
    let rename = counted(&app, &sealer, &key, json!({"name": "c"})).await;
    assert_eq!((rename.status, rename.store_calls, rename.kms_calls), (200, 1, 0));
    // The other kinds seal what they did.
    let stored = app.store.get(Table::McpServers, &key);
    assert_eq!(stored.and_then(|item| item.get("headers_key").cloned()), None);
}

#[tokio::test]
async fn a_kms_failure_is_answered_before_anything_is_written() {
    for (failure, status) in [
        (SealError::Unavailable("ThrottlingException".into()), 503),
        (SealError::Refused("DisabledException".into()), 500),
    ] {
        let (app, sealer) = memory_app();
        let key = memory_record(&app);
        let set = counted(&app, &sealer, &key, json!({"headers": {"A": "1"}})).await;
        assert_eq!(set.status, 200);
        let before = app.store.get(Table::McpServers, &key);
        sealer.fail_with(Some(failure.clone()));
        for body in [json!({"name": "x"}), json!({"headers": {"A": "2"}})] {
            let outcome = counted(&app, &sealer, &key, body.clone()).await;
            assert_eq!(outcome.status, status, "{failure:?} {body}: {}", outcome.body);
            assert_eq!(app.store.get(Table::McpServers, &key), before, "{body}: written");
        }
    }
}

/// A store on which another writer replaces the record's headers, and so
/// its data key, right after each refused write.
struct Racing {
    inner: MemoryStore,
}

impl Store for Racing {
    async fn read(
        &self,
        table: Table,
        key: &Key,
        budget: std::time::Duration,
    ) -> Result<Option<Item>, StoreError> {
        self.inner.read(table, key, budget).await
    }

    async fn update(&self, update: Update) -> Result<Item, StoreError> {
        let key = update.key.clone();
        let outcome = self.inner.update(update).await;
        if matches!(outcome, Err(StoreError::Changed(_))) {
            let racer = Update {
                table: Table::McpServers,
                key,
                set: vec![
                    ("headers", Attr::M(Default::default())),
                    ("headers_key", Attr::B(vec![9; 48])),
                ]
                .into(),
                remove: Vec::new(),
                expected_versions: None,
                none_match: None,
                unmodified_before: None,
                now: "2026-11-26T00:00:00.000Z".into(),
                write_id: Update::new_write_id(),
                fields: Route::McpServers.fields(),
                updated_by: Some("racer".into()),
                budget: agent_server_shared::budget::TIME_BUDGET,
                unchanged: Vec::new(),
            };
            assert!(self.inner.update(racer).await.is_ok());
        }
        outcome
    }
}

#[tokio::test]
async fn a_data_key_replaced_during_a_rename_is_a_conflict_and_writes_nothing() {
    let sealer = Arc::new(MemorySealer::new());
    let app = App {
        store: Racing {
            inner: MemoryStore::new(),
        },
        settings: Settings::default(),
        sealer: Some(Sealer::Memory(sealer.clone())),
    };
    let (project, id) = (uuid::Uuid::new_v4().to_string(), uuid::Uuid::new_v4().to_string());
    let mut item = Route::McpServers.item(&project, &id);
    let key = Key {
        project_id: Some(project),
        id,
    };
    // Sealed as a write would: a data key from the sealer, the value under it.
    let context = seal::context("headers", &key);
    let data_key: DataKey = Sealer::Memory(sealer.clone())
        .new_data_key(&context, agent_server_shared::budget::TIME_BUDGET)
        .await
        .unwrap();
    let value = data_key
        .for_write()
        .unwrap()
        .seal("headers", &key, "A", "1")
        .unwrap();
    item.insert(
        "headers".into(),
        Attr::M([("A".to_string(), Attr::B(value))].into()),
    );
    item.insert("headers_key".into(), Attr::B(data_key.sealed().to_vec()));
    assert!(app.store.inner.put(Table::McpServers, item));
    let (status, body, kms_calls) = call(&app, &sealer, &key, json!({"name": "Mine"})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["errorDetails"]["code"], "conflict");
    assert_eq!(kms_calls, 1, "a second key was opened");
    let stored = app.store.inner.get(Table::McpServers, &key).unwrap_or_default();
    assert_eq!(
        stored.get("name"),
        Some(&Attr::S("Original".into())),
        "the rename was written"
    );
    assert_eq!(stored.get("updated_by"), Some(&Attr::S("racer".into())));
}

/// `seal-secrets` on an MCP-server table of its own: plain headers are
/// sealed under a new data key bound to the record (nothing else of the item
/// changes), sealed ones and items without headers are counted and left, a
/// dry run writes nothing, a second run finds nothing, and a write between
/// the scan and the sealing write is never lost.
#[tokio::test]
async fn seal_secrets_seals_plain_headers_keeps_concurrent_writes_and_can_run_again() {
    use agent_server_ops::{Report, seal_item, seal_table};
    let kms = kms_local().await;
    let sealer = kms.sealer();
    let dynamo = client(&dynamo_local().await.endpoint);
    let table = format!("seal-mcp-test-{}", uuid::Uuid::new_v4());
    let tables = TableNames::default().with(agent_server_shared::Table::McpServers, table.clone());
    local_api::setup::create_tables(&dynamo, &tables).await.unwrap();
    let project = uuid::Uuid::new_v4().to_string();
    let put = |id: &str, headers: Option<Attr>, data_key: Option<Vec<u8>>| {
        let mut item = Route::McpServers.item(&project, id);
        item.insert("version".into(), Attr::N("7".into()));
        item.insert("updated_by".into(), Attr::S("someone".into()));
        match headers {
            Some(value) => item.insert("headers".into(), value),
            None => item.remove("headers"),
        };
        if let Some(data_key) = data_key {
            item.insert("headers_key".into(), Attr::B(data_key));
        }
        let (dynamo, table) = (dynamo.clone(), table.clone());
        async move {
            dynamo
                .put_item()
                .table_name(table)
                .set_item(Some(agent_server_shared::item::to_sdk(item)))
                .send()
                .await
                .unwrap();
        }
    };
    let plain = |pairs: &[(&str, &str)]| {
        Attr::M(
            pairs
                .iter()
                .map(|(name, value)| (name.to_string(), Attr::S(value.to_string())))
                .collect(),
        )
    };
    let key_of = |id: &str| Key {
        project_id: Some(project.clone()),
        id: id.to_string(),
    };
    let read = |id: &str| {
        let (dynamo, table, key) = (dynamo.clone(), table.clone(), key_of(id));
        async move {
            dynamo
                .get_item()
                .table_name(table)
                .set_key(Some(agent_server_shared::item::to_sdk(key.attributes())))
                .consistent_read(true)
                .send()
                .await
                .unwrap()
                .item
                .map(integration_tests::own)
                .unwrap_or_default()
        }
    };
    let ids: Vec<String> = (0..6).map(|_| uuid::Uuid::new_v4().to_string()).collect();
    put(
        &ids[0],
        Some(plain(&[("Authorization", SENTINEL), ("X-Two", "two")])),
        None,
    )
    .await;
    put(&ids[1], Some(plain(&[("X-One", "one")])), None).await;
    // Sealed already, as the API stores it.
    let sealed_record = key_of(&ids[2]);
    let context = seal::context("headers", &sealed_record);
    let data_key = sealer
        .new_data_key(&context, agent_server_shared::budget::TIME_BUDGET)
        .await
        .unwrap();
    let value = data_key
        .for_write()
        .unwrap()
        .seal("headers", &key_of(&ids[2]), "A", "sealed")
        .unwrap();
    put(
        &ids[2],
        Some(Attr::M([("A".to_string(), Attr::B(value))].into())),
        Some(data_key.sealed().to_vec()),
    )
    .await;
    put(&ids[3], None, None).await;
    put(&ids[4], Some(Attr::S("not a map".into())), None).await;
    // Sealed in the first layout, under the data key itself.
    let first_layout = key_of(&ids[5]);
    let old_key = sealer
        .new_data_key(
            &seal::context("headers", &first_layout),
            agent_server_shared::budget::TIME_BUDGET,
        )
        .await
        .unwrap();
    let old_members: std::collections::HashMap<String, Attr> = [("A", "one"), ("B", SENTINEL)]
        .into_iter()
        .map(|(name, value)| {
            let sealed =
                seal::values::seal_first_layout(&old_key, "headers", &first_layout, name, value).unwrap();
            (name.to_string(), Attr::B(sealed))
        })
        .collect();
    put(
        &ids[5],
        Some(Attr::M(old_members.clone())),
        Some(old_key.sealed().to_vec()),
    )
    .await;
    let mut before = Vec::new();
    for id in &ids {
        before.push(read(id).await);
    }
    let expected = Report {
        scanned: 6,
        sealed: 2,
        resealed: 1,
        already_sealed: 1,
        without_secret: 1,
        unexpected: 1,
        ..Report::default()
    };
    let dry = seal_table(&dynamo, Table::McpServers, &table, &sealer, true)
        .await
        .unwrap();
    assert_eq!(dry, expected);
    for (id, item) in ids.iter().zip(&before) {
        assert_eq!(&read(id).await, item, "a dry run wrote");
    }
    let done = seal_table(&dynamo, Table::McpServers, &table, &sealer, false)
        .await
        .unwrap();
    assert_eq!(done, expected);
    for (index, expected) in [
        (0, json!({"Authorization": SENTINEL, "X-Two": "two"})),
        (1, json!({"X-One": "one"})),
    ] {
        let item = read(&ids[index]).await;
        assert!(!format!("{item:?}").contains(SENTINEL));
        let (sealed_key, values) = sealed_headers(&item);
        let key = key_of(&ids[index]);
        let project = key.project_id.as_deref().unwrap_or_default();
        let plain_key = kms_decrypt(
            &kms.endpoint,
            &sealed_key,
            &[
                ("field", "headers"),
                ("project_id", project),
                ("id", key.id.as_str()),
            ],
        )
        .await
        .unwrap();
        for (name, sealed) in values {
            assert_eq!(
                open_as_documented(&plain_key, &key, &name, &sealed).as_deref(),
                expected[&name].as_str(),
                "{index} {name}"
            );
        }
        // Sealing changes how the values are stored, not the record.
        for kept in [
            "version",
            "updated_at",
            "updated_by",
            "updated_fields",
            "name",
            "created_at",
        ] {
            assert_eq!(item.get(kept), before[index].get(kept), "{index}: {kept}");
        }
    }
    for index in 2..5 {
        assert_eq!(read(&ids[index]).await, before[index], "{index}");
    }
    // The first layout's values, re-sealed in the current one under the
    // key the record holds, open to what they were.
    let resealed = read(&ids[5]).await;
    let (sealed_key, values) = sealed_headers(&resealed);
    assert_eq!(sealed_key, old_key.sealed());
    assert_eq!(values.len(), 2);
    for (name, sealed) in &values {
        assert_eq!(sealed[0], seal::values::VERSION, "{name}");
        let opened = old_key.open("headers", &first_layout, name, sealed);
        assert_eq!(opened.as_deref(), Ok(if name == "A" { "one" } else { SENTINEL }));
    }
    assert_eq!(resealed.get("version"), before[5].get("version"));
    let again = seal_table(&dynamo, Table::McpServers, &table, &sealer, false)
        .await
        .unwrap();
    assert_eq!((again.sealed, again.resealed, again.already_sealed), (0, 0, 4));

    // Between the scan and the write, the API replaced the headers: the
    // stale plain text is not written over them.
    let raced = uuid::Uuid::new_v4().to_string();
    put(&raced, Some(plain(&[("A", "stale")])), None).await;
    let scanned = read(&raced).await;
    put(&raced, Some(plain(&[("A", "newer")])), None).await;
    let mut report = Report::default();
    seal_item(
        &dynamo,
        Table::McpServers,
        &table,
        &sealer,
        scanned,
        false,
        &mut report,
    )
    .await;
    assert_eq!((report.changed, report.sealed), (1, 0));
    assert_eq!(read(&raced).await.get("headers"), Some(&plain(&[("A", "newer")])));
    // ... or only renamed the record: sealing goes ahead, the rename is kept.
    let renamed = uuid::Uuid::new_v4().to_string();
    put(&renamed, Some(plain(&[("A", "same")])), None).await;
    let scanned = read(&renamed).await;
    dynamo
        .update_item()
        .table_name(&table)
        .set_key(Some(agent_server_shared::item::to_sdk(
            key_of(&renamed).attributes(),
        )))
        .update_expression("SET #n = :n")
        .expression_attribute_names("#n", "name")
        .expression_attribute_values(":n", Attr::S("Renamed meanwhile".into()).into())
        .send()
        .await
        .unwrap();
    let mut report = Report::default();
    seal_item(
        &dynamo,
        Table::McpServers,
        &table,
        &sealer,
        scanned,
        false,
        &mut report,
    )
    .await;
    assert_eq!(report.sealed, 1);
    let item = read(&renamed).await;
    assert_eq!(item.get("name"), Some(&Attr::S("Renamed meanwhile".into())));
    assert_eq!(sealed_headers(&item).1.len(), 1);
}

/// A stored item whose sealed values are not as this service writes them (a
/// text value planted beside sealed ones, a value of another type) is
/// refused before anything is written, on a rename and on a merge patch.
#[tokio::test]
async fn a_planted_header_value_is_refused_and_nothing_is_written() {
    use agent_server_shared::item::to_attribute;
    let (app, sealer) = memory_app();
    let key = memory_record(&app);
    let set = counted(
        &app,
        &sealer,
        &key,
        json!({"headers": {"Authorization": "Bearer real"}}),
    )
    .await;
    assert_eq!(set.status, 200);
    for planted in [Attr::S("attacker-plain".into()), Attr::N("1".into())] {
        let mut item = app.store.get(Table::McpServers, &key).unwrap_or_default();
        if let Some(Attr::M(members)) = item.get_mut("headers") {
            members.insert("Injected".into(), planted.clone());
        }
        assert!(app.store.put(Table::McpServers, item));
        let before = app.store.get(Table::McpServers, &key);
        let rename = counted(&app, &sealer, &key, json!({"name": "x"})).await;
        assert_eq!(rename.status, 500, "{planted:?}: {}", rename.body);
        assert_eq!(
            app.store.get(Table::McpServers, &key),
            before,
            "{planted:?}: written"
        );
        let event = Event::patch(Route::McpServers, &key.id, key.project_id.as_deref())
            .json(&json!({"headers": {"X-More": "m"}}));
        let response = Route::McpServers.call(&app, event.request()).await;
        assert_eq!(response.status().as_u16(), 500, "{planted:?}");
        assert_eq!(
            app.store.get(Table::McpServers, &key),
            before,
            "{planted:?}: written by PATCH"
        );
    }
    // Plain headers stored before sealing (no key) are as written: fine.
    let plain = memory_record(&app);
    let mut item = app.store.get(Table::McpServers, &plain).unwrap_or_default();
    item.insert("headers".into(), to_attribute(&json!({"A": "plain"})));
    assert!(app.store.put(Table::McpServers, item));
    assert_eq!(
        counted(&app, &sealer, &plain, json!({"name": "y"})).await.status,
        200
    );
}

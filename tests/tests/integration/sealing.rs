//! Provider keys are sealed before they reach the table: proven against
//! DynamoDB Local and a local KMS (moto's server, which enforces encryption
//! contexts as KMS does). A sentinel `api_key` sent through the local API
//! exists at rest only as a KMS ciphertext bound to its record, which the
//! consumer examples open; a KMS
//! outage is a 503 with nothing written; a key KMS refuses is a 500 with
//! one ERROR line; `seal-api-keys` seals items written before sealing
//! without losing a concurrent write.

use agent_server_ops::{Report, seal_item, seal_table};
use agent_server_shared::Table;
use agent_server_shared::item::Attr;
use agent_server_shared::item::Item;
use agent_server_shared::seal::{KmsSealer, Sealer};
use agent_server_shared::store::Key;
use agent_server_shared::store::TableNames;
use integration_tests::{
    KmsLocal, Route, capture_logs, client, consumer_example, dynamo_local, free_port, get_item, http,
    kms_client_budgeted, kms_decrypt, kms_local, put_item, serve_sealing,
};
use serde_json::json;

const SENTINEL: &str = "sk-proj-SEALED-SENTINEL-4b1e9d";

/// A fresh API key record holding `api_key` as written before sealing.
async fn plain_key_record(api_key: &str) -> (String, Key) {
    let dynamo = client(&dynamo_local().await.endpoint);
    let id = uuid::Uuid::new_v4().to_string();
    let mut item = Route::ApiKeys.item("", &id);
    item.insert("api_key".into(), Attr::S(api_key.into()));
    put_item(&dynamo, Table::ApiKeys, item).await;
    (id.clone(), Key { project_id: None, id })
}

async fn stored(key: &Key) -> Item {
    let dynamo = client(&dynamo_local().await.endpoint);
    get_item(&dynamo, Table::ApiKeys, key)
        .await
        .unwrap_or_else(|| panic!("{} is gone", key.id))
}

fn sealed_bytes(item: &Item) -> Vec<u8> {
    match item.get("api_key") {
        Some(Attr::B(blob)) => blob.clone(),
        other => panic!("api_key is not sealed (B): {:?}", other.map(|_| "another type")),
    }
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

fn url(base: &str, id: &str) -> String {
    format!("{base}/api/agent-server/api-keys/{id}")
}

// Current-thread runtime: the local API's tasks log on this thread, where
// the capturing subscriber is installed.
#[tokio::test]
async fn a_key_sent_to_the_api_exists_at_rest_only_as_ciphertext_bound_to_its_record() {
    let (logs, _guard) = capture_logs();
    let kms = kms_local().await;
    let base = serve_sealing(kms.sealer()).await;
    let (id, key) = plain_key_record("sk-old-plain").await;
    let (other_id, _) = plain_key_record("sk-other").await;

    let body = json!({"api_key": SENTINEL, "name": "Sealed"}).to_string();
    let json = [("content-type", "application/json")];
    let reply = http("PUT", &url(&base, &id), &json, body).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(!reply.body.to_string().contains(SENTINEL));
    assert!(!format!("{:?}", reply.headers).contains(SENTINEL));

    let item = stored(&key).await;
    // Every attribute, as any reader of the table sees it.
    assert!(!format!("{item:?}").contains(SENTINEL), "{item:?}");
    let sealed = sealed_bytes(&item);
    assert!(!contains(&sealed, SENTINEL));
    assert!(!contains(&sealed, "SENTINEL"));
    // The write stored its fields by name only.
    assert_eq!(
        item.get("updated_fields"),
        Some(&Attr::Ss(vec!["api_key".into(), "name".into()]))
    );

    // One Decrypt with the documented context opens it; nothing else does.
    let opened = kms_decrypt(&kms.endpoint, &sealed, &[("field", "api_key"), ("id", &id)]).await;
    assert_eq!(opened.as_deref(), Ok(SENTINEL.as_bytes()));
    for context in [
        vec![("field", "api_key"), ("id", other_id.as_str())],
        vec![],
        vec![("field", "api_key")],
        vec![("field", "name"), ("id", id.as_str())],
        vec![("field", "api_key"), ("id", id.as_str()), ("extra", "x")],
    ] {
        let refused = kms_decrypt(&kms.endpoint, &sealed, &context).await;
        assert!(refused.is_err(), "opened with {context:?}");
    }
    // A ciphertext copied to another record does not open as that record's.
    let moved = kms_decrypt(&kms.endpoint, &sealed, &[("field", "api_key"), ("id", &other_id)]).await;
    assert!(moved.is_err());
    // Both consumer examples open it as docs/secrets.md tells a reader to.
    for example in ["decrypt_api_key.py", "decrypt_api_key"] {
        assert_eq!(
            consumer_example(example, &[&id], &kms.endpoint).await,
            SENTINEL,
            "{example}"
        );
    }

    let logged = logs.text();
    assert!(logged.contains("\"status\":200"), "no access line: {logged}");
    assert!(!logged.contains(SENTINEL), "a log line carries the key");
}

#[tokio::test]
async fn a_kms_outage_is_a_503_with_nothing_written_and_a_request_without_a_key_needs_no_kms() {
    let (logs, _guard) = capture_logs();
    // A KMS of this test's own, stopped mid-run.
    let kms = KmsLocal::start(free_port()).await;
    let base = serve_sealing(kms.sealer()).await;
    let (id, key) = plain_key_record("sk-before").await;
    let json = [("content-type", "application/json")];
    let first = http(
        "PUT",
        &url(&base, &id),
        &json,
        json!({"api_key": "sk-first"}).to_string(),
    )
    .await;
    assert_eq!(first.status, 200, "{}", first.body);
    let before = stored(&key).await;

    kms.stop();
    let started = std::time::Instant::now();
    let body = json!({"api_key": SENTINEL, "name": "Not written"}).to_string();
    let reply = http("PUT", &url(&base, &id), &json, body).await;
    assert_eq!(reply.status, 503, "{}", reply.body);
    assert_eq!(reply.body["errorDetails"]["code"], "unavailable");
    assert_eq!(reply.body["status"], 503);
    assert!(reply.headers.contains_key("retry-after"));
    assert!(started.elapsed() < agent_server_shared::budget::TIME_BUDGET + std::time::Duration::from_secs(2));
    assert_eq!(
        stored(&key).await,
        before,
        "a request KMS could not seal wrote something"
    );
    // The envelope's requestId finds the line that explains it.
    let request_id = reply.body["errorDetails"]["requestId"]
        .as_str()
        .unwrap_or_default();
    let explained = explaining_line(&logs.text(), request_id, "WARN");
    assert!(explained.contains("KMS unavailable"), "{explained}");

    // Setting anything but the key needs no KMS: it still succeeds.
    let reply = http(
        "PUT",
        &url(&base, &id),
        &json,
        json!({"enabled": false}).to_string(),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    // One version past the first write: the refused one counted for nothing.
    let version = |reply: &integration_tests::Reply| {
        let tag = reply.headers["etag"].to_str().unwrap_or_default();
        tag.trim_matches('"').parse::<u64>().ok()
    };
    assert_eq!(version(&reply), version(&first).map(|v| v + 1));
}

#[tokio::test]
async fn a_key_kms_refuses_is_a_500_with_one_error_line_and_nothing_written() {
    let (logs, _guard) = capture_logs();
    let kms = kms_local().await;
    let missing = Sealer::Kms(KmsSealer::new(
        kms_client_budgeted(&kms.endpoint),
        "alias/no-such-key".into(),
    ));
    let base = serve_sealing(missing).await;
    let (id, key) = plain_key_record("sk-before").await;
    let before = stored(&key).await;
    let json = [("content-type", "application/json")];
    let reply = http(
        "PUT",
        &url(&base, &id),
        &json,
        json!({"api_key": SENTINEL}).to_string(),
    )
    .await;
    assert_eq!(reply.status, 500, "{}", reply.body);
    assert_eq!(reply.body["errorDetails"]["code"], "internal");
    let request_id = reply.body["errorDetails"]["requestId"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(!request_id.is_empty());
    assert_eq!(stored(&key).await, before);
    let logged = logs.text();
    let errors: Vec<&str> = logged
        .lines()
        .filter(|line| line.contains("\"level\":\"ERROR\""))
        .collect();
    assert_eq!(errors.len(), 1, "{logged}");
    let explained = explaining_line(&logged, &request_id, "ERROR");
    assert!(explained.contains("NotFoundException"), "{explained}");
    assert!(!logged.contains(SENTINEL));
}

#[tokio::test]
async fn seal_api_keys_seals_plain_items_keeps_concurrent_writes_and_can_run_again() {
    let kms = kms_local().await;
    let sealer = kms.sealer();
    let dynamo = client(&dynamo_local().await.endpoint);
    // A table of its own, so the counts are this test's.
    let table = format!("seal-test-{}", uuid::Uuid::new_v4());
    let tables = TableNames::default().with(agent_server_shared::Table::ApiKeys, table.clone());
    local_api::setup::create_tables(&dynamo, &tables).await.unwrap();
    let put = |id: &str, api_key: Option<Attr>| {
        let mut item = Route::ApiKeys.item("", id);
        item.insert("version".into(), Attr::N("7".into()));
        item.insert("updated_by".into(), Attr::S("someone".into()));
        match api_key {
            Some(value) => item.insert("api_key".into(), value),
            None => item.remove("api_key"),
        };
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
    let ids: Vec<String> = (0..5).map(|_| uuid::Uuid::new_v4().to_string()).collect();
    put(&ids[0], Some(Attr::S("sk-plain-0".into()))).await;
    put(&ids[1], Some(Attr::S("sk-plain-1".into()))).await;
    let already = sealer
        .seal(
            &[("field", "api_key"), ("id", &ids[2])],
            b"sk-sealed-2",
            agent_server_shared::budget::TIME_BUDGET,
        )
        .await
        .unwrap();
    put(&ids[2], Some(Attr::B(already))).await;
    put(&ids[3], None).await;
    put(&ids[4], Some(Attr::N("5".into()))).await;
    let read = |id: &str| {
        let (dynamo, table, id) = (dynamo.clone(), table.clone(), id.to_string());
        async move {
            dynamo
                .get_item()
                .table_name(table)
                .key("id", Attr::S(id).into())
                .consistent_read(true)
                .send()
                .await
                .ok()
                .and_then(|output| output.item)
                .map(integration_tests::own)
                .unwrap_or_default()
        }
    };
    let before: Vec<Item> = futures_of(&ids, read).await;

    let dry = seal_table(&dynamo, Table::ApiKeys, &table, &sealer, true)
        .await
        .unwrap();
    let expected = Report {
        scanned: 5,
        sealed: 2,
        already_sealed: 1,
        without_secret: 1,
        unexpected: 1,
        ..Report::default()
    };
    assert_eq!(dry, expected);
    assert_eq!(futures_of(&ids, read).await, before, "a dry run wrote");

    let done = seal_table(&dynamo, Table::ApiKeys, &table, &sealer, false)
        .await
        .unwrap();
    assert_eq!(done, expected);
    for (index, plain) in [(0, "sk-plain-0"), (1, "sk-plain-1"), (2, "sk-sealed-2")] {
        let item = read(&ids[index]).await;
        let opened = kms_decrypt(
            &kms.endpoint,
            &sealed_bytes(&item),
            &[("field", "api_key"), ("id", &ids[index])],
        )
        .await;
        assert_eq!(opened.as_deref(), Ok(plain.as_bytes()), "{index}");
        // Sealing changes how the value is stored, not the record.
        for kept in ["version", "updated_at", "updated_by", "name", "created_at"] {
            assert_eq!(item.get(kept), before[index].get(kept), "{index}: {kept}");
        }
    }
    assert_eq!(read(&ids[3]).await, before[3]);
    assert_eq!(read(&ids[4]).await, before[4]);

    // Again: nothing left to seal.
    let again = seal_table(&dynamo, Table::ApiKeys, &table, &sealer, false)
        .await
        .unwrap();
    assert_eq!((again.sealed, again.already_sealed), (0, 3));

    // Concurrent writes between the scan and the write. One set a new key
    // (the API seals it): the stale plain text is not written over it.
    let raced = uuid::Uuid::new_v4().to_string();
    put(&raced, Some(Attr::S("sk-stale".into()))).await;
    let scanned = read(&raced).await;
    let newer = sealer
        .seal(
            &[("field", "api_key"), ("id", &raced)],
            b"sk-newer",
            agent_server_shared::budget::TIME_BUDGET,
        )
        .await
        .unwrap();
    put(&raced, Some(Attr::B(newer.clone()))).await;
    let mut report = Report::default();
    seal_item(
        &dynamo,
        Table::ApiKeys,
        &table,
        &sealer,
        scanned,
        false,
        &mut report,
    )
    .await;
    assert_eq!((report.changed, report.sealed), (1, 0));
    assert_eq!(read(&raced).await.get("api_key"), Some(&Attr::B(newer)));

    // The other changed another field only: sealing goes ahead and the
    // other write is kept.
    let renamed = uuid::Uuid::new_v4().to_string();
    put(&renamed, Some(Attr::S("sk-same".into()))).await;
    let scanned = read(&renamed).await;
    dynamo
        .update_item()
        .table_name(&table)
        .key("id", Attr::S(renamed.clone()).into())
        .update_expression("SET #n = :n")
        .expression_attribute_names("#n", "name")
        .expression_attribute_values(":n", Attr::S("Renamed meanwhile".into()).into())
        .send()
        .await
        .unwrap();
    let mut report = Report::default();
    seal_item(
        &dynamo,
        Table::ApiKeys,
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
    let opened = kms_decrypt(
        &kms.endpoint,
        &sealed_bytes(&item),
        &[("field", "api_key"), ("id", &renamed)],
    )
    .await;
    assert_eq!(opened.as_deref(), Ok(&b"sk-same"[..]));
}

/// The one line at `level` whose `request_id` is `request_id`.
fn explaining_line(logs: &str, request_id: &str, level: &str) -> String {
    assert!(!request_id.is_empty(), "the envelope has no requestId");
    let found: Vec<serde_json::Value> = logs
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|line| line["request_id"] == request_id && line["level"] == level)
        .collect();
    assert_eq!(found.len(), 1, "{level} lines of {request_id} in:\n{logs}");
    found[0].to_string()
}

async fn futures_of<F, Fut>(ids: &[String], read: F) -> Vec<Item>
where
    F: Fn(&str) -> Fut,
    Fut: std::future::Future<Output = Item>,
{
    let mut items = Vec::new();
    for id in ids {
        items.push(read(id).await);
    }
    items
}

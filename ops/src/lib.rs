//! `seal-api-keys`: seals every `api_key` an API-key table still holds in
//! plain text (written before sealing), as the API seals a new one.
//!
//! It scans the table and, for each item whose `api_key` is a string (S),
//! seals it with KMS (`Encrypt`, the record's encryption context) and writes
//! the ciphertext back with a conditional `UpdateItem` that sets `api_key`
//! only while it still holds that same plain text. So a concurrent update
//! is never lost: an update that set another key (sealed by the API) or
//! changed any other field is kept, and sealing touches no other attribute
//! (`version`, `updated_at`, `updated_by`, `updated_fields` stay as they are).
//! A second run finds nothing left to seal (idempotent), so an interrupted
//! run is resumed by running it again. `--dry-run` only counts.

use std::collections::HashMap;

use agent_server_shared::item::Item;
use agent_server_shared::seal::{self, Sealer};
use agent_server_shared::{ApiKey, Resource};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::types::AttributeValue;

/// The attribute this command seals.
pub const FIELD: &str = "api_key";

/// What one run found and did, item by item.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    /// Items read.
    pub scanned: usize,
    /// Plain-text keys sealed (with `--dry-run`: that would be sealed).
    pub sealed: usize,
    /// Keys already sealed (B).
    pub already_sealed: usize,
    /// Items without an `api_key`.
    pub without_key: usize,
    /// Plain-text keys that changed between the scan and the write: left
    /// to the next run.
    pub changed: usize,
    /// Keys of another type, or items without an id: left as they are.
    pub unexpected: usize,
    /// Ids whose key could not be sealed or written (the error code only).
    pub failed: Vec<(String, String)>,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "scanned {} items: {} sealed, {} already sealed, {} without api_key, \
             {} changed while sealing (run again), {} of another type (left as is), {} failed",
            self.scanned,
            self.sealed,
            self.already_sealed,
            self.without_key,
            self.changed,
            self.unexpected,
            self.failed.len()
        )
    }
}

/// Scans `table` and seals every plain-text `api_key` with `sealer`
/// (with `dry_run`, counts them instead). Fails only if the table cannot
/// be read; a key that cannot be sealed or written is listed in
/// [`Report::failed`] and the run goes on.
pub async fn seal_table(
    client: &Client,
    table: &str,
    sealer: &Sealer,
    dry_run: bool,
) -> Result<Report, String> {
    let mut report = Report::default();
    let mut start: Option<HashMap<String, AttributeValue>> = None;
    loop {
        let page = client
            .scan()
            .table_name(table)
            // A consistent read, so a key written just before is seen.
            .consistent_read(true)
            .projection_expression("#id, #key")
            .expression_attribute_names("#id", "id")
            .expression_attribute_names("#key", FIELD)
            .set_exclusive_start_key(start.take())
            .send()
            .await
            .map_err(|e| format!("cannot scan {table}: {}", e.code().unwrap_or("request failed")))?;
        for item in page.items.unwrap_or_default() {
            report.scanned += 1;
            seal_item(client, table, sealer, item, dry_run, &mut report).await;
        }
        match page.last_evaluated_key {
            Some(key) if !key.is_empty() => start = Some(key),
            _ => return Ok(report),
        }
    }
}

/// Seals one scanned `item` (its `id` and `api_key`, as
/// [`seal_table`] reads them) and counts the outcome in `report`.
pub async fn seal_item(
    client: &Client,
    table: &str,
    sealer: &Sealer,
    item: Item,
    dry_run: bool,
    report: &mut Report,
) {
    let id = match item.get("id") {
        Some(AttributeValue::S(id)) => id.clone(),
        _ => {
            report.unexpected += 1;
            return;
        }
    };
    let plain = match item.get(FIELD) {
        None | Some(AttributeValue::Null(_)) => return report.without_key += 1,
        Some(AttributeValue::B(_)) => return report.already_sealed += 1,
        Some(AttributeValue::S(plain)) => AttributeValue::S(plain.clone()),
        Some(_) => return report.unexpected += 1,
    };
    if dry_run {
        report.sealed += 1;
        return;
    }
    let mut sealed = item;
    if let Err(error) = seal::seal_stored(sealer, ApiKey::FIELDS, &mut sealed).await {
        report.failed.push((id, error.to_string()));
        return;
    }
    let Some(ciphertext) = sealed.remove(FIELD) else {
        report.failed.push((id, "nothing sealed".into()));
        return;
    };
    let written = client
        .update_item()
        .table_name(table)
        .key("id", AttributeValue::S(id.clone()))
        .update_expression("SET #key = :sealed")
        // Only while the item still holds the plain text that was sealed:
        // a concurrent write wins, and the next run looks again.
        .condition_expression("#key = :plain")
        .expression_attribute_names("#key", FIELD)
        .expression_attribute_values(":sealed", ciphertext)
        .expression_attribute_values(":plain", plain)
        .send()
        .await;
    match written {
        Ok(_) => report.sealed += 1,
        Err(error)
            if error
                .as_service_error()
                .is_some_and(|e| e.is_conditional_check_failed_exception()) =>
        {
            report.changed += 1;
        }
        Err(error) => report
            .failed
            .push((id, error.code().unwrap_or("request failed").to_owned())),
    }
}

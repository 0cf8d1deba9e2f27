//! `seal-secrets`: seals every secret a table still holds in plain text
//! (written before sealing) as the API seals a new one: the API-key table's
//! `api_key`s and the MCP-server table's header values. Each item is written
//! back by a conditional `UpdateItem` that applies only while it still holds
//! what was scanned, touching no other attribute, so a rerun resumes.
//! See docs/secrets.md, Sealing the secrets stored before.

use std::collections::HashMap;

use agent_server_shared::Table;
use agent_server_shared::item::{self, Attr, Item};
use agent_server_shared::records::Sealing;
use agent_server_shared::seal::{self, Sealer};
use agent_server_shared::store::Key;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::ProvideErrorMetadata;

/// What one run found and did in one table, item by item.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    /// Items read.
    pub scanned: usize,
    /// Items whose plain-text secrets were sealed (with `--dry-run`: would be).
    pub sealed: usize,
    /// Items whose sealed values were in an earlier layout, re-sealed in
    /// the current one (with `--dry-run`: would be).
    pub resealed: usize,
    /// Items whose secrets were already sealed.
    pub already_sealed: usize,
    /// Items holding no secret.
    pub without_secret: usize,
    /// Items that changed between the scan and the write: left to the next run.
    pub changed: usize,
    /// Secrets of another type, or items without a key: left as they are.
    pub unexpected: usize,
    /// Items whose secrets could not be sealed or written, by key (the
    /// error code only).
    pub failed: Vec<(String, String)>,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "scanned {} items: {} sealed, {} re-sealed in the current layout, {} already sealed, \
             {} without secrets, {} changed while sealing (run again), {} of another type (left as is), \
             {} failed",
            self.scanned,
            self.sealed,
            self.resealed,
            self.already_sealed,
            self.without_secret,
            self.changed,
            self.unexpected,
            self.failed.len()
        )
    }
}

/// The attributes of `table`'s items a run reads: the key, each sealed
/// field and its data key.
fn projection(table: Table) -> Vec<&'static str> {
    let mut names = vec!["id"];
    if table.scoped_by_project() {
        names.push("project_id");
    }
    for field in table.fields() {
        match field.sealing() {
            Some(Sealing::Whole) => names.push(field.name),
            Some(Sealing::Values { key }) => names.extend([field.name, key]),
            None => {}
        }
    }
    names
}

/// Scans `name`, a table of kind `table`, and seals every plain-text secret
/// with `sealer` (with `dry_run`, counts them instead). Fails only if the
/// table cannot be read; an item that cannot be sealed or written is listed
/// in [`Report::failed`] and the run goes on.
pub async fn seal_table(
    client: &Client,
    table: Table,
    name: &str,
    sealer: &Sealer,
    dry_run: bool,
) -> Result<Report, String> {
    let mut report = Report::default();
    let attributes = projection(table);
    let placeholders: Vec<String> = (0..attributes.len()).map(|index| format!("#a{index}")).collect();
    let mut pages = client
        .scan()
        .table_name(name)
        // A consistent read, so a secret written just before is seen.
        .consistent_read(true)
        .projection_expression(placeholders.join(", "))
        .set_expression_attribute_names(Some(
            placeholders
                .iter()
                .cloned()
                .zip(attributes.iter().map(|name| (*name).to_owned()))
                .collect(),
        ))
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page =
            page.map_err(|e| format!("cannot scan {name}: {}", e.code().unwrap_or("request failed")))?;
        for item in page.items.unwrap_or_default() {
            report.scanned += 1;
            let key = ["project_id", "id"]
                .iter()
                .filter_map(|name| item.get(*name)?.as_s().ok().cloned())
                .collect::<Vec<_>>()
                .join("/");
            match item::from_sdk(item) {
                Ok(item) => seal_item(client, table, name, sealer, item, dry_run, &mut report).await,
                // Not sealed, and said so with its key: an attribute of a type
                // the service cannot read.
                Err(error) => report.failed.push((key, error.to_string())),
            }
        }
    }
    Ok(report)
}

/// What a scanned item holds of its secrets.
enum Found {
    /// Something to seal.
    Plain,
    /// Sealed, some of it in an earlier layout: to re-seal.
    Earlier,
    /// Everything present is sealed.
    Sealed,
    /// No secret.
    Nothing,
    /// A secret of a type this service never writes.
    Unexpected,
}

fn found(table: Table, item: &Item) -> Found {
    let mut outcome = Found::Nothing;
    for field in table.fields() {
        let this = match (field.sealing(), item.get(field.name)) {
            (None, _) | (_, None | Some(Attr::Null)) => continue,
            (Some(Sealing::Whole), Some(Attr::S(_))) => Found::Plain,
            (Some(Sealing::Whole), Some(Attr::B(_))) => Found::Sealed,
            (Some(Sealing::Values { key }), Some(Attr::M(members))) => {
                let plain = members.values().any(|value| matches!(value, Attr::S(_)));
                match (item.contains_key(key), plain) {
                    (false, true) => Found::Plain,
                    (true, _) if members.values().all(|value| matches!(value, Attr::B(_))) => {
                        if seal::has_earlier_layout(members) {
                            Found::Earlier
                        } else {
                            Found::Sealed
                        }
                    }
                    (false, false) if members.is_empty() => continue,
                    _ => Found::Unexpected,
                }
            }
            _ => Found::Unexpected,
        };
        outcome = match (outcome, this) {
            (Found::Unexpected, _) | (_, Found::Unexpected) => Found::Unexpected,
            (Found::Plain, _) | (_, Found::Plain) => Found::Plain,
            (Found::Earlier, _) | (_, Found::Earlier) => Found::Earlier,
            _ => Found::Sealed,
        };
    }
    outcome
}

/// Seals one scanned `item` of `table` (stored in `name`) and counts the
/// outcome in `report`.
pub async fn seal_item(
    client: &Client,
    table: Table,
    name: &str,
    sealer: &Sealer,
    item: Item,
    dry_run: bool,
    report: &mut Report,
) {
    let Some(key) = Key::of_item(table, &item) else {
        report.unexpected += 1;
        return;
    };
    let label = match &key.project_id {
        Some(project) => format!("{project}/{}", key.id),
        None => key.id.clone(),
    };
    let earlier = match found(table, &item) {
        Found::Plain => false,
        Found::Earlier => true,
        Found::Sealed => return report.already_sealed += 1,
        Found::Nothing => return report.without_secret += 1,
        Found::Unexpected => return report.unexpected += 1,
    };
    let count = |report: &mut Report| {
        if earlier {
            report.resealed += 1;
        } else {
            report.sealed += 1;
        }
    };
    if dry_run {
        return count(report);
    }
    let mut sealed = item.clone();
    let outcome = if earlier {
        seal::reseal_stored(sealer, table, table.fields(), &mut sealed).await
    } else {
        seal::seal_stored(sealer, table, table.fields(), &mut sealed).await
    };
    let fields = match outcome {
        Ok(fields) if !fields.is_empty() => fields,
        Ok(_) => return report.failed.push((label, "nothing sealed".into())),
        Err(error) => return report.failed.push((label, error.to_string())),
    };
    let mut names = HashMap::new();
    let mut values = HashMap::new();
    let mut assignments = Vec::new();
    let mut conditions = vec!["attribute_exists(#id)".to_owned()];
    names.insert("#id".to_owned(), "id".to_owned());
    for (index, field) in table.fields().iter().enumerate() {
        if !fields.contains(&field.name) {
            continue;
        }
        let (Some(plain), Some(ciphertext)) = (item.get(field.name), sealed.get(field.name)) else {
            continue;
        };
        names.insert(format!("#f{index}"), field.name.to_owned());
        values.insert(format!(":plain{index}"), plain.clone().into());
        values.insert(format!(":sealed{index}"), ciphertext.clone().into());
        assignments.push(format!("#f{index} = :sealed{index}"));
        // Only while the item still holds the plain text that was sealed:
        // a concurrent write wins, and the next run looks again.
        conditions.push(format!("#f{index} = :plain{index}"));
        if let Some(Sealing::Values { key: attribute }) = field.sealing() {
            match (item.get(attribute), sealed.get(attribute)) {
                // Re-sealed under the key the item holds: only while it does.
                (Some(stored), _) => {
                    names.insert(format!("#k{index}"), attribute.to_owned());
                    values.insert(format!(":key{index}"), stored.clone().into());
                    conditions.push(format!("#k{index} = :key{index}"));
                }
                (None, Some(data_key)) => {
                    names.insert(format!("#k{index}"), attribute.to_owned());
                    values.insert(format!(":key{index}"), data_key.clone().into());
                    assignments.push(format!("#k{index} = :key{index}"));
                    conditions.push(format!("attribute_not_exists(#k{index})"));
                }
                (None, None) => {}
            }
        }
    }
    let written = client
        .update_item()
        .table_name(name)
        .set_key(Some(item::to_sdk(key.attributes())))
        .update_expression(format!("SET {}", assignments.join(", ")))
        .condition_expression(conditions.join(" AND "))
        .set_expression_attribute_names(Some(names))
        .set_expression_attribute_values(Some(values))
        .send()
        .await;
    match written {
        Ok(_) => count(report),
        Err(error)
            if error
                .as_service_error()
                .is_some_and(|e| e.is_conditional_check_failed_exception()) =>
        {
            report.changed += 1;
        }
        Err(error) => report
            .failed
            .push((label, error.code().unwrap_or("request failed").to_owned())),
    }
}

/// What the commands share: reading the configuration, running, reporting.
pub mod cli {
    use std::process::ExitCode;

    use agent_server_shared::Table;
    use agent_server_shared::seal::{KmsSealer, Sealer};

    use super::seal_table;

    /// A table that holds secrets, as `--only` names it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
    pub enum Kind {
        /// The API-key table (`api_key`).
        ApiKeys,
        /// The MCP-server table (`headers`).
        McpServers,
    }

    /// Seals `tables` (each a kind and its name) with `SECRETS_KEY_ID`
    /// and the standard AWS configuration, printing one line per table
    /// under the command's name `command`, and each item that failed.
    /// Exits 2 without a key, 1 if anything failed.
    pub async fn run(command: &str, tables: &[(Table, String)], dry_run: bool) -> ExitCode {
        let key_id = match Sealer::key_id(|name| std::env::var(name).ok()) {
            Ok(key_id) => key_id,
            Err(error) => {
                eprintln!("{command}: {error}");
                return ExitCode::from(2);
            }
        };
        let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .load()
            .await;
        let client = aws_sdk_dynamodb::Client::new(&config);
        let sealer = Sealer::Kms(KmsSealer::from_config(&config, key_id));
        let mut failed = false;
        for (table, name) in tables {
            match seal_table(&client, *table, name, &sealer, dry_run).await {
                Ok(report) => {
                    let verb = if dry_run {
                        "dry run, nothing written"
                    } else {
                        "done"
                    };
                    println!("{command}: {name}: {report} ({verb})");
                    for (key, reason) in &report.failed {
                        eprintln!("{command}: {name}: {key}: not sealed: {reason}");
                    }
                    failed |= !report.failed.is_empty();
                }
                Err(message) => {
                    eprintln!("{command}: {message}");
                    failed = true;
                }
            }
        }
        if failed {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        }
    }
}

//! Outcomes kept under idempotency keys (their items' attributes), and
//! the item an update leaves, computed as DynamoDB writes it: what a
//! transaction, which returns no item, answers with.

use super::{StoreError, UPDATED_BY, UPDATED_FIELDS, Update, VERSION, WRITE_ID};
use crate::item::{Attr, Item};

/// An outcome kept under an idempotency key: written in one transaction
/// with the update it is the outcome of, read in one call with the record.
#[derive(Clone, PartialEq)]
pub struct Kept {
    /// Its item's key: `<function>#<digest of the caller, record and key>`.
    pub key: String,
    /// What makes a later request the same request.
    pub fingerprint: String,
    /// The record as the update wrote it (secrets sealed as the record
    /// keeps them): the answer's body, `ETag` and `Last-Modified`.
    pub record: Item,
    /// When it was kept, in seconds since the epoch.
    pub kept_at: i64,
    /// When it expires (the table's TTL attribute), in seconds since the
    /// epoch; an expired outcome is as none, whether or not DynamoDB has
    /// deleted it yet.
    pub expires_at: i64,
}

/// The partition key (S) of a kept outcome's item.
pub const KEY: &str = "key";
/// The request's fingerprint (S).
pub const FINGERPRINT: &str = "fingerprint";
/// The record as written (M).
pub const RECORD: &str = "record";
/// When it was kept (N, seconds).
pub const KEPT_AT: &str = "kept_at";
/// The table's time-to-live attribute (N, seconds).
pub const EXPIRES_AT: &str = "expires_at";

impl std::fmt::Debug for Kept {
    // The record's attribute names only: one written before sealing may
    // hold header values as text.
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<&String> = self.record.keys().collect();
        names.sort();
        formatter
            .debug_struct("Kept")
            .field("key", &self.key)
            .field("record", &names)
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

impl Kept {
    /// As an item of the table of kept outcomes.
    pub fn to_item(&self) -> Item {
        Item::from([
            (KEY.into(), Attr::S(self.key.clone())),
            (FINGERPRINT.into(), Attr::S(self.fingerprint.clone())),
            (RECORD.into(), Attr::M(self.record.clone())),
            (KEPT_AT.into(), Attr::N(self.kept_at.to_string())),
            (EXPIRES_AT.into(), Attr::N(self.expires_at.to_string())),
        ])
    }

    /// Read from an item of that table; `None` if it is not one.
    pub fn from_item(item: &Item) -> Option<Self> {
        let text = |name: &str| item.get(name)?.as_s().map(str::to_owned);
        let number = |name: &str| item.get(name)?.as_n()?.parse::<i64>().ok();
        Some(Self {
            key: text(KEY)?,
            fingerprint: text(FINGERPRINT)?,
            record: item.get(RECORD)?.as_m()?.clone(),
            kept_at: number(KEPT_AT)?,
            expires_at: number(EXPIRES_AT)?,
        })
    }
}

/// `stored` as `update` leaves it (what DynamoDB's `UpdateItem` writes, the
/// condition aside): its fields set and removed, `updated_at`,
/// `updated_by`, `updated_fields` and `write_id` written, `version` one up.
pub fn applied(update: &Update, stored: &Item) -> Result<Item, StoreError> {
    let next = next_version(stored.get(VERSION))
        .ok_or_else(|| StoreError::Internal("version cannot be incremented here".into()))?;
    let mut item = stored.clone();
    item.insert(UPDATED_FIELDS.into(), Attr::Ss(update.set_names()));
    match &update.updated_by {
        Some(principal) => item.insert(UPDATED_BY.into(), Attr::S(principal.clone())),
        None => item.remove(UPDATED_BY),
    };
    for (name, value) in update.set.iter() {
        item.insert((*name).to_string(), value.clone());
    }
    for name in &update.remove {
        item.remove(*name);
    }
    item.insert("updated_at".into(), Attr::S(update.now.clone()));
    item.insert(VERSION.into(), Attr::N(next));
    item.insert(WRITE_ID.into(), Attr::S(update.write_id.clone()));
    Ok(item)
}

/// `version + 1` as DynamoDB would write it, for the versions
/// [`crate::item::updatable`] lets through: whole numbers, and the plain decimal
/// fractions another writer might have stored.
fn next_version(version: Option<&Attr>) -> Option<String> {
    let text = match version {
        None => return Some("1".into()),
        Some(Attr::N(text)) => text,
        Some(_) => return None,
    };
    let canonical = crate::number::Decimal::parse(text)?.canonical();
    let (whole, fraction) = canonical.split_once('.').unwrap_or((&canonical, ""));
    let whole = whole.parse::<u128>().ok()?.checked_add(1)?;
    Some(if fraction.is_empty() {
        whole.to_string()
    } else {
        format!("{whole}.{fraction}")
    })
}

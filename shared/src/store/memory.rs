//! An in-memory store with the DynamoDB store's semantics, for fast
//! handler tests. It also counts calls, so tests can prove that a rejected
//! request never reaches the database.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use aws_sdk_dynamodb::types::AttributeValue;

use super::{Key, Store, StoreError, Table, UPDATED_BY, UPDATED_FIELDS, Update, WRITE_ID, written_by};
use crate::item::Item;
use crate::number::Decimal;

/// Records kept in a map, guarded by a mutex so updates are atomic.
#[derive(Debug, Default)]
pub struct MemoryStore {
    items: Mutex<HashMap<(Table, Key), Item>>,
    calls: AtomicUsize,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stores `item` as is (a test fixture, like a `PutItem`). Returns
    /// `false` and stores nothing if the item has no key for `table`.
    pub fn put(&self, table: Table, item: Item) -> bool {
        let Some(key) = Key::of_item(table, &item) else {
            return false;
        };
        self.lock().insert((table, key), item);
        true
    }

    /// The stored item, if any.
    pub fn get(&self, table: Table, key: &Key) -> Option<Item> {
        self.lock().get(&(table, key.clone())).cloned()
    }

    /// How many calls (updates and reads) were made.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(Table, Key), Item>> {
        // A panic while holding the lock cannot leave an item half-written
        // (each update swaps whole values), so a poisoned map is still sound.
        self.items
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// `version + 1` as DynamoDB would write it, for the versions
/// [`item::updatable`] lets through: whole numbers, and the plain decimal
/// fractions another writer might have stored.
fn next_version(version: Option<&AttributeValue>) -> Option<String> {
    let text = match version {
        None => return Some("1".into()),
        Some(AttributeValue::N(text)) => text,
        Some(_) => return None,
    };
    let canonical = Decimal::parse(text)?.canonical();
    let (whole, fraction) = canonical.split_once('.').unwrap_or((&canonical, ""));
    let whole = whole.parse::<u128>().ok()?.checked_add(1)?;
    Some(if fraction.is_empty() {
        whole.to_string()
    } else {
        format!("{whole}.{fraction}")
    })
}

impl Store for MemoryStore {
    async fn read(
        &self,
        table: Table,
        key: &Key,
        budget: std::time::Duration,
    ) -> Result<Option<Item>, StoreError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if budget.is_zero() {
            return Err(StoreError::Unavailable("time budget exhausted".into()));
        }
        Ok(self.get(table, key))
    }

    async fn update(&self, update: Update) -> Result<Item, StoreError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if update.budget.is_zero() {
            return Err(StoreError::Unavailable("time budget exhausted".into()));
        }
        let mut items = self.lock();
        let fields = update.set_names();
        let Some(stored) = items.get_mut(&(update.table, update.key.clone())) else {
            return Err(StoreError::NotFound(update.table));
        };
        // An earlier attempt of this update was applied (DynamoDB's
        // condition refuses a second one and returns the item as it is).
        if written_by(stored, &update.write_id) {
            return Ok(stored.clone());
        }
        // What DynamoDB's condition refuses.
        update.check(stored)?;
        let next = next_version(stored.get("version"))
            .ok_or_else(|| StoreError::Internal("version cannot be incremented here".into()))?;
        stored.insert(UPDATED_FIELDS.into(), AttributeValue::Ss(fields));
        match update.updated_by {
            Some(principal) => stored.insert(UPDATED_BY.into(), AttributeValue::S(principal)),
            None => stored.remove(UPDATED_BY),
        };
        for (name, value) in update.set {
            stored.insert(name.to_string(), value);
        }
        for name in update.remove {
            stored.remove(name);
        }
        stored.insert("updated_at".into(), AttributeValue::S(update.now));
        stored.insert("version".into(), AttributeValue::N(next));
        stored.insert(WRITE_ID.into(), AttributeValue::S(update.write_id));
        Ok(stored.clone())
    }
}

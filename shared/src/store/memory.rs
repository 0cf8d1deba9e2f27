//! An in-memory store with the DynamoDB store's semantics, for fast
//! handler tests. It also counts calls, so tests can prove that a rejected
//! request never reaches the database.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{Kept, Key, Store, StoreError, Table, Update, applied, written_by};
use crate::item::Item;

/// Records kept in a map, guarded by a mutex so updates are atomic; the
/// outcomes kept under idempotency keys in another.
#[derive(Debug, Default)]
pub struct MemoryStore {
    items: Mutex<HashMap<(Table, Key), Item>>,
    kept: Mutex<HashMap<String, Kept>>,
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

    /// The outcome kept under `key`, if any (expired or not).
    pub fn kept(&self, key: &str) -> Option<Kept> {
        self.kept_lock().get(key).cloned()
    }

    fn kept_lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Kept>> {
        self.kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(Table, Key), Item>> {
        // A panic while holding the lock cannot leave an item half-written
        // (each update swaps whole values), so a poisoned map is still sound.
        self.items
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
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
        *stored = applied(&update, stored)?;
        Ok(stored.clone())
    }

    async fn read_keyed(
        &self,
        table: Table,
        key: &Key,
        kept: &str,
        budget: std::time::Duration,
    ) -> Result<(Option<Item>, Option<Kept>), StoreError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if budget.is_zero() {
            return Err(StoreError::Unavailable("time budget exhausted".into()));
        }
        let items = self.lock();
        let record = items.get(&(table, key.clone())).cloned();
        let kept = self.kept_lock().get(kept).cloned();
        Ok((record, kept))
    }

    async fn update_keeping(&self, update: Update, kept: Kept) -> Result<(), StoreError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if update.budget.is_zero() {
            return Err(StoreError::Unavailable("time budget exhausted".into()));
        }
        // Both locks for the whole transaction: both writes or neither.
        let mut items = self.lock();
        let mut outcomes = self.kept_lock();
        if outcomes
            .get(&kept.key)
            .is_some_and(|earlier| earlier.expires_at > kept.kept_at)
        {
            return Err(StoreError::KeyTaken);
        }
        let Some(stored) = items.get_mut(&(update.table, update.key.clone())) else {
            return Err(StoreError::NotFound(update.table));
        };
        update.check(stored)?;
        *stored = applied(&update, stored)?;
        outcomes.insert(kept.key.clone(), kept);
        Ok(())
    }
}

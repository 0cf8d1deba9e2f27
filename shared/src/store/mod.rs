//! Storage: one conditional write per successful request.
//!
//! [`Store`] is the seam between handlers and DynamoDB. [`DynamoStore`] is
//! the real one; `MemoryStore` (feature `memory-store`) follows the same
//! semantics in memory for fast handler tests, and one conformance suite
//! runs against both so they cannot drift.

mod dynamo;
pub mod kept;
#[cfg(feature = "memory-store")]
mod memory;

use std::env;
use std::future::Future;
use std::time::Duration;

pub use crate::budget::{MAX_ATTEMPTS, TIME_BUDGET};
pub use dynamo::DynamoStore;
pub use kept::{Kept, applied};
#[cfg(feature = "memory-store")]
pub use memory::MemoryStore;

use crate::item::{self, Attr, Attributes, Item, Kind};
use crate::records::Field;
pub use crate::records::Table;

/// The DynamoDB table behind each record kind, and the table of kept
/// outcomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableNames {
    /// Each record kind's table, in [`Table::ALL`]'s order.
    records: [String; Table::ALL.len()],
    /// The outcomes kept under idempotency keys (`IDEMPOTENCY_TABLE`).
    pub idempotency: String,
}

/// The environment variable naming the table of kept outcomes.
pub const IDEMPOTENCY_TABLE_VAR: &str = "IDEMPOTENCY_TABLE";
/// Its local name.
pub const IDEMPOTENCY_TABLE_DEFAULT: &str = "agent-server-idempotency";

impl TableNames {
    /// Reads each record kind's variable ([`Table::env_var`]: `API_KEYS_TABLE`,
    /// ...) and `IDEMPOTENCY_TABLE`, each defaulting to its local name.
    pub fn from_env() -> Self {
        Self::from_lookup(|name| env::var(name).ok())
    }

    /// As [`TableNames::from_env`], reading variables through `lookup`.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let named = |variable: &str, default: &str| {
            lookup(variable)
                .filter(|name| !name.trim().is_empty())
                .unwrap_or_else(|| default.into())
        };
        Self {
            records: Table::ALL.map(|table| named(table.env_var(), table.default_name())),
            idempotency: named(IDEMPOTENCY_TABLE_VAR, IDEMPOTENCY_TABLE_DEFAULT),
        }
    }

    /// The name of `table`.
    pub fn name(&self, table: Table) -> &str {
        &self.records[table as usize]
    }

    /// These names, with `table`'s set to `name`.
    #[must_use]
    pub fn with(mut self, table: Table, name: impl Into<String>) -> Self {
        self.records[table as usize] = name.into();
        self
    }
}

impl Default for TableNames {
    fn default() -> Self {
        Self::from_lookup(|_| None)
    }
}

/// Identifies one record. `project_id` is `Some` exactly for project-scoped tables.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    /// Owning project (the partition key of scoped tables).
    pub project_id: Option<String>,
    /// Record id.
    pub id: String,
}

impl Key {
    /// The DynamoDB key attributes.
    pub fn attributes(&self) -> Item {
        let mut key = Item::with_capacity(2);
        key.insert("id".into(), Attr::S(self.id.clone()));
        if let Some(project_id) = &self.project_id {
            key.insert("project_id".into(), Attr::S(project_id.clone()));
        }
        key
    }

    /// The key of a stored item, if it has one for `table`.
    pub fn of_item(table: Table, item: &Item) -> Option<Self> {
        let text = |name: &str| match item.get(name) {
            Some(Attr::S(text)) => Some(text.clone()),
            _ => None,
        };
        let project_id = if table.scoped_by_project() {
            Some(text("project_id")?)
        } else {
            None
        };
        Some(Self {
            project_id,
            id: text("id")?,
        })
    }
}

/// A partial update of one existing record.
#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    /// Where the record lives.
    pub table: Table,
    /// Which record.
    pub key: Key,
    /// The attributes to set; every other attribute keeps its value.
    pub set: Attributes,
    /// The fields to remove (a merge patch's `null` on a field a record
    /// may lack).
    pub remove: Vec<&'static str>,
    /// `Some(versions)`: write only if the stored `version` (absent counts
    /// as 0) is one of `versions`; an empty list never matches (If-Match).
    pub expected_versions: Option<Vec<u64>>,
    /// `Some(..)`: write only if the stored version is not the one named
    /// (If-None-Match); `Any` never writes an existing record.
    pub none_match: Option<NoneMatch>,
    /// `Some(bound)`: write only if the stored `updated_at` is absent or
    /// earlier than `bound`, a timestamp in the stored format
    /// (If-Unmodified-Since, one second past its date).
    pub unmodified_before: Option<String>,
    /// The new `updated_at`.
    pub now: String,
    /// This update's own id ([`Update::new_write_id`]), stored as
    /// [`WRITE_ID`]. The SDK retries an attempt that timed out, and that
    /// attempt may have been applied: the retry then finds its own id
    /// stored and returns the item as it is instead of writing again. Only
    /// the last write's id is kept, so a retry that follows another
    /// update's write cannot tell (docs/operations.md, "Configuration").
    pub write_id: String,
    /// The record kind's fields: the write happens only if each one it
    /// keeps and a response shows has its type (see
    /// [`crate::item::updatable`]).
    pub fields: &'static [Field],
    /// Who asked for it (the caller's principal), stored as
    /// [`UPDATED_BY`]; `None` removes an earlier caller's name.
    pub updated_by: Option<String>,
    /// The most time the write may take: what the request's earlier calls
    /// left of [`TIME_BUDGET`] ([`crate::budget`]).
    pub budget: Duration,
    /// Attributes the write expects as they were read: the values a
    /// request opened and answers with, or the version a merge was applied
    /// to. A `version` that differs is a [`StoreError::VersionMismatch`];
    /// any other, [`StoreError::Changed`].
    pub unchanged: Vec<(&'static str, Expected)>,
}

/// What a write expects of one stored attribute ([`Update::unchanged`]).
/// Its `Debug` never shows the value: a record's headers stored before
/// sealing hold their values as text.
#[derive(Clone, PartialEq)]
pub enum Expected {
    /// Not stored.
    Absent,
    /// Not stored, or an empty map.
    AbsentOrEmpty,
    /// Stored, equal to this (maps and binaries compared by value).
    Is(Attr),
}

impl std::fmt::Debug for Expected {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(match self {
            Self::Absent => "Absent",
            Self::AbsentOrEmpty => "AbsentOrEmpty",
            Self::Is(_) => "Is(…)",
        })
    }
}

impl Expected {
    /// What `stored` (an attribute's value, or `None`) must be to match it.
    pub fn as_read(stored: Option<&Attr>) -> Self {
        stored.map_or(Self::Absent, |value| Self::Is(value.clone()))
    }

    /// Whether `stored` is as expected.
    pub fn holds(&self, stored: Option<&Attr>) -> bool {
        match (self, stored) {
            (Self::Absent | Self::AbsentOrEmpty, None) => true,
            (Self::AbsentOrEmpty, Some(Attr::M(map))) => map.is_empty(),
            (Self::Is(expected), Some(value)) => same_value(expected, value),
            _ => false,
        }
    }
}

/// Whether two attribute values are equal as DynamoDB compares them: numbers
/// by value (`1.5` is `1.50`), sets whatever their order, maps and lists
/// member by member.
fn same_value(a: &Attr, b: &Attr) -> bool {
    use crate::number::Decimal;
    let same_numbers = |x: &str, y: &str| Decimal::parse(x).is_some_and(|x| Some(x) == Decimal::parse(y));
    let same_set = |x: &[String], y: &[String], same: &dyn Fn(&str, &str) -> bool| {
        x.len() == y.len() && x.iter().all(|x| y.iter().any(|y| same(x, y)))
    };
    match (a, b) {
        (Attr::N(x), Attr::N(y)) => same_numbers(x, y),
        (Attr::Ns(x), Attr::Ns(y)) => same_set(x, y, &same_numbers),
        (Attr::Ss(x), Attr::Ss(y)) => same_set(x, y, &|x, y| x == y),
        (Attr::Bs(x), Attr::Bs(y)) => x.len() == y.len() && x.iter().all(|x| y.contains(x)),
        (Attr::M(x), Attr::M(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same_value(v, w)))
        }
        (Attr::L(x), Attr::L(y)) => x.len() == y.len() && x.iter().zip(y).all(|(v, w)| same_value(v, w)),
        _ => a == b,
    }
}

/// What `If-None-Match` refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoneMatch {
    /// `*`: any current record; an update, which never creates, is refused
    /// whenever the record exists.
    Any,
    /// These versions (absent counts as 0).
    Versions(Vec<u64>),
}

/// The stored attribute naming the caller of the last write (S). Never
/// shown in a response; the change events carry it.
pub const UPDATED_BY: &str = "updated_by";
/// The stored attribute listing the fields the last write set (SS), by
/// name only. Never shown in a response; the change events carry it.
pub const UPDATED_FIELDS: &str = "updated_fields";

/// The stored attribute every update increments (N; absent counts as 0).
pub const VERSION: &str = "version";

/// The stored attribute holding the id of the update that last wrote an
/// item (see [`Update::write_id`]). Never shown in a response.
pub const WRITE_ID: &str = "write_id";

/// Whether `item` was last written by the update with `write_id`: an
/// earlier attempt of it was applied, and `item` is what it wrote. Both
/// stores answer such an attempt from the item instead of writing again
/// (DynamoDB's on the raw item, before any conversion: `sdk_written_by`).
#[cfg(feature = "memory-store")]
fn written_by(item: &Item, write_id: &str) -> bool {
    matches!(item.get(WRITE_ID), Some(Attr::S(id)) if id == write_id)
}

impl Update {
    /// A fresh, unique write id: one per request.
    pub fn new_write_id() -> String {
        uuid::Uuid::new_v4().to_string()
    }

    /// The names of the record's fields this write sets or removes (not the
    /// attributes beside them, such as a data key, nor a verification it
    /// removes because what it vouched for changed), as stored in
    /// [`UPDATED_FIELDS`]: never a value.
    pub fn set_names(&self) -> Vec<String> {
        let vouches = crate::records::verification(self.fields).map(|(name, _)| name);
        let mut names: Vec<String> = self
            .set
            .iter()
            .map(|(name, _)| *name)
            .chain(self.remove.iter().copied().filter(|name| Some(*name) != vouches))
            .filter(|name| self.fields.iter().any(|field| field.name == *name))
            .map(str::to_owned)
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    /// The readable attributes this write keeps (does not set): the ones
    /// whose stored type decides whether the item may be updated. Both
    /// stores judge an item, and explain a refused write, by this list.
    pub fn kept(&self) -> Vec<(&'static str, Kind)> {
        self.fields
            .iter()
            .filter(|field| field.is_kept_and_shown())
            .filter(|field| !self.set.iter().any(|(set, _)| *set == field.name))
            .filter(|field| !self.remove.contains(&field.name))
            .map(|field| (field.name, field.kind))
            .collect()
    }
}

/// Why an update did not happen.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StoreError {
    /// No record has this key; nothing was written.
    #[error("record not found")]
    NotFound(Table),
    /// The record's version is not the expected one; nothing was written.
    #[error("version mismatch (stored version {current})")]
    VersionMismatch {
        /// The stored version, as its entity tag's text (`3`, or `2.5`
        /// where another writer stored a fraction).
        current: String,
    },
    /// Throttled, unreachable, or out of time: worth retrying later.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// The stored item is one this service could not return (an attribute
    /// of another type, a version out of range); nothing was written.
    #[error("stored item cannot be updated: {0}")]
    Unreadable(String),
    /// Every precondition held, but an attribute the update expected
    /// unchanged ([`Update::unchanged`]) is not as expected; nothing was
    /// written. Carries the item as stored, which the caller may open and
    /// try again on.
    #[error("the record is not as it was read")]
    Changed(StoredItem),
    /// Another request kept an outcome under the same idempotency key
    /// first; nothing was written.
    #[error("the idempotency key was taken meanwhile")]
    KeyTaken,
    /// The record changed, or another transaction held it, while the
    /// transaction ran; nothing was written, and a fresh read may try again.
    #[error("the record was contended")]
    Contended,
    /// Anything else (missing table, bad credentials, corrupt item).
    #[error("database error: {0}")]
    Internal(String),
}

/// One clause of a write's condition. [`Update::clauses`] states the
/// condition once, as these: the memory store judges them
/// ([`Clause::holds`]), the DynamoDB store renders them into its condition
/// expression, and either explains a refused write by the first that fails
/// ([`Update::check`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Clause {
    /// Every attribute the write keeps and a response shows is absent, NULL
    /// or of its kind, and `version` is absent or a number from 0 to
    /// [`item::MAX_VERSION`]: the item is one the service can return.
    Readable(Vec<(&'static str, Kind)>),
    /// `version` (absent counts as 0) is one of these (`If-Match`; none
    /// never holds, nor does a fractional version).
    VersionIn(Vec<u64>),
    /// The item does not exist (`If-None-Match: *`): beside the item's
    /// existence, never holds.
    Absent,
    /// `version` (absent counts as 0) is none of these (`If-None-Match`).
    VersionNotIn(Vec<u64>),
    /// `updated_at` is absent or earlier than this timestamp
    /// (`If-Unmodified-Since`).
    UnmodifiedBefore(String),
    /// The attribute is as read ([`Update::unchanged`]).
    Unchanged(&'static str, Expected),
}

impl Clause {
    /// Whether `stored`, an existing item, meets the clause.
    pub fn holds(&self, stored: &Item) -> bool {
        let version = item::version(stored);
        match self {
            Self::Readable(kept) => item::updatable(stored, kept).is_ok(),
            Self::VersionIn(accepted) => version.is_ok_and(|current| accepted.contains(&current)),
            Self::Absent => false,
            Self::VersionNotIn(refused) => !version.is_ok_and(|current| refused.contains(&current)),
            // An attribute of another type never compares as earlier.
            Self::UnmodifiedBefore(bound) => match stored.get("updated_at") {
                None => true,
                Some(Attr::S(at)) => at < bound,
                Some(_) => false,
            },
            Self::Unchanged(name, expected) => expected.holds(stored.get(*name)),
        }
    }

    /// Why a write is refused when `stored` fails the clause.
    fn refusal(&self, stored: &Item) -> StoreError {
        match self {
            Self::Readable(kept) => match item::updatable(stored, kept) {
                Err(error) => StoreError::Unreadable(error.to_string()),
                Ok(()) => StoreError::Internal("a readable item was refused as unreadable".into()),
            },
            Self::Unchanged(name, _) if *name != VERSION => {
                StoreError::Changed(StoredItem(Box::new(stored.clone())))
            }
            // A failed precondition answers with the stored version's tag.
            _ => match item::version_tag(stored) {
                Ok(current) => StoreError::VersionMismatch { current },
                Err(error) => StoreError::Unreadable(error.to_string()),
            },
        }
    }
}

impl Update {
    /// The write's condition, besides the item's existence and the write
    /// being no earlier attempt of this one (its `write_id`): the clauses
    /// in the order a refusal is explained by.
    pub fn clauses(&self) -> Vec<Clause> {
        let mut clauses = vec![Clause::Readable(self.kept())];
        if let Some(expected) = &self.expected_versions {
            clauses.push(Clause::VersionIn(expected.clone()));
        }
        match &self.none_match {
            Some(NoneMatch::Any) => clauses.push(Clause::Absent),
            Some(NoneMatch::Versions(refused)) if !refused.is_empty() => {
                clauses.push(Clause::VersionNotIn(refused.clone()));
            }
            Some(NoneMatch::Versions(_)) | None => {}
        }
        if let Some(bound) = &self.unmodified_before {
            clauses.push(Clause::UnmodifiedBefore(bound.clone()));
        }
        // A version that moved is told before any other attribute.
        let (version, others): (Vec<_>, Vec<_>) =
            self.unchanged.iter().partition(|(name, _)| *name == VERSION);
        clauses.extend(
            version
                .into_iter()
                .chain(others)
                .map(|(name, expected)| Clause::Unchanged(name, expected.clone())),
        );
        clauses
    }

    /// Whether this update may be applied to `stored`, the item as it is
    /// now, and if not, why: by the first of its [`Update::clauses`] that
    /// fails. The memory store decides by it; the DynamoDB store explains a
    /// refused write by it from the old item DynamoDB returns. An attempt
    /// of this update that was already applied is not judged here
    /// (its `write_id`).
    pub fn check(&self, stored: &Item) -> Result<(), StoreError> {
        judge(&self.clauses(), stored)
    }
}

/// Whether `stored` meets every one of `clauses`, and if not, why: by the
/// first that fails.
pub fn judge(clauses: &[Clause], stored: &Item) -> Result<(), StoreError> {
    match clauses.iter().find(|clause| !clause.holds(stored)) {
        Some(failed) => Err(failed.refusal(stored)),
        None => Ok(()),
    }
}

/// An item as stored, carried by an error: its `Debug` names the
/// attributes only, so no `{:?}` of an error shows a stored value.
#[derive(Clone, PartialEq)]
pub struct StoredItem(pub Box<Item>);

impl std::fmt::Debug for StoredItem {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_set().entries(self.0.keys()).finish()
    }
}

impl std::ops::Deref for StoredItem {
    type Target = Item;
    fn deref(&self) -> &Item {
        &self.0
    }
}

/// Reads records and applies partial updates to existing ones.
pub trait Store: Send + Sync {
    /// Applies `update` in one conditional write and returns the whole new
    /// item. Also sets `updated_at` and increments `version`.
    fn update(&self, update: Update) -> impl Future<Output = Result<Item, StoreError>> + Send;

    /// The record `key` of `table` and the outcome kept under `kept`, as
    /// they are now, in one call (strongly consistent), within `budget`. A
    /// store that keeps no outcomes (a test's) reads the record alone.
    fn read_keyed(
        &self,
        table: Table,
        key: &Key,
        kept: &str,
        budget: Duration,
    ) -> impl Future<Output = Result<(Option<Item>, Option<Kept>), StoreError>> + Send {
        let _ = kept;
        async move { Ok((self.read(table, key, budget).await?, None)) }
    }

    /// Applies `update` (as [`Store::update`]) and keeps `kept` in one
    /// transaction: both or neither. [`StoreError::KeyTaken`] if an
    /// unexpired outcome is kept under its key already. The new item is
    /// [`applied`] to the item the update's condition holds it to. A store
    /// that keeps no outcomes (a test's) refuses, writing nothing.
    fn update_keeping(
        &self,
        update: Update,
        kept: Kept,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = (update, kept);
        async { Err(StoreError::Internal("this store keeps no outcomes".into())) }
    }

    /// The item with `key` in `table` as it is now (a strongly consistent
    /// read, one call), or `None`; within `budget`. What a merge patch is
    /// applied to.
    fn read(
        &self,
        table: Table,
        key: &Key,
        budget: Duration,
    ) -> impl Future<Output = Result<Option<Item>, StoreError>> + Send;
}

impl<S: Store> Store for &S {
    fn update(&self, update: Update) -> impl Future<Output = Result<Item, StoreError>> + Send {
        (**self).update(update)
    }

    fn read_keyed(
        &self,
        table: Table,
        key: &Key,
        kept: &str,
        budget: Duration,
    ) -> impl Future<Output = Result<(Option<Item>, Option<Kept>), StoreError>> + Send {
        (**self).read_keyed(table, key, kept, budget)
    }

    fn update_keeping(
        &self,
        update: Update,
        kept: Kept,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).update_keeping(update, kept)
    }

    fn read(
        &self,
        table: Table,
        key: &Key,
        budget: Duration,
    ) -> impl Future<Output = Result<Option<Item>, StoreError>> + Send {
        (**self).read(table, key, budget)
    }
}

//! The calls a valid request makes, sealing and the conditional write(s)
//! that apply it, within one time budget: [`put()`] (a `PUT`, or a `PATCH`
//! merging no object), [`merge()`] (a `PATCH` merging into `headers` or
//! `parameters`), [`current()`] (a `PATCH` of `{}`). At most one KMS call,
//! nothing written unless the answer is 200: docs/ARCHITECTURE.md, The path
//! of a request, and docs/api.md, Update semantics.

mod keyed;
mod verify;

use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::AttributeValue;

use crate::App;
use crate::budget::Budget;
use crate::error::ApiError;
use crate::item::Item;
use crate::merge::{self, MergePatch};
use crate::metrics::Calls;
use crate::patch::{self, Patch};
use crate::records::{self, Resource, Sealing};
use crate::request::Preconditions;
use crate::seal::{self, DataKey, SealError, Sealed};
use crate::store::{Expected, Key, Store, StoreError, Update, VERSION};

pub use keyed::{IDEMPOTENCY_KEY, Keyed, Outcome, write as keyed};

/// What a request writes.
pub enum Write<'a> {
    /// A `PUT`, or a `PATCH` that merges no object: the fields to set and
    /// remove.
    Put(Patch, Vec<&'static str>),
    /// A `PATCH` that merges an object into a field.
    Merge(&'a MergePatch),
    /// A `PATCH` of `{}`: nothing, but the verification when it verifies.
    Nothing,
}

/// Applies `write` without an idempotency key: [`put()`], [`current()`],
/// or, for a merge and for any write that verifies (it needs the record
/// it would change), [`merge()`].
pub async fn write<R: Resource, S: Store>(
    app: &App<S>,
    context: &Context,
    write: Write<'_>,
    calls: &mut Calls,
) -> Result<Item, ApiError> {
    match write {
        Write::Nothing if !context.verify => current::<R, S>(app, context, calls).await,
        Write::Put(set, remove) if !context.verify => put::<R, S>(app, context, set, remove, calls).await,
        write => merge::<R, S>(app, context, &write, calls).await,
    }
}

/// What a write knows of the request besides its fields.
#[derive(Debug, Clone)]
pub struct Context {
    /// Which record.
    pub key: Key,
    /// The request's preconditions.
    pub preconditions: Preconditions,
    /// Who asked ([`crate::auth::Caller::principal`]).
    pub principal: Option<String>,
    /// What every call of the request may still take.
    pub budget: Budget,
    /// Whether the write waits on an MCP handshake (`verify=true`).
    pub verify: bool,
}

impl Context {
    /// An update of `set` and `remove` under this request's preconditions:
    /// a 500, with nothing written, if `set` holds a secret left unsealed.
    fn update<R: Resource>(&self, set: Patch, remove: Vec<&'static str>) -> Result<Update, ApiError> {
        // A write without a key leaves no earlier write's key on the record
        // (its change event would carry it); a keyed write sets it instead.
        let mut remove = remove;
        remove.push(IDEMPOTENCY_KEY);
        // A verification vouches for the values it saw: a write that sets
        // one of them without verifying removes it.
        if let Some((verification, of)) = records::verification(R::FIELDS) {
            let touches = |name: &&str| of.contains(name);
            let unverified = !set.iter().any(|(name, _)| *name == verification);
            if unverified && (set.iter().map(|(name, _)| name).any(touches) || remove.iter().any(touches)) {
                remove.push(verification);
            }
        }
        let set = patch::into_attributes(set).map_err(|error| {
            tracing::error!(%error, "nothing written");
            ApiError::Internal
        })?;
        Ok(Update {
            table: R::TABLE,
            key: self.key.clone(),
            set,
            remove,
            expected_versions: self.preconditions.if_match.clone(),
            none_match: self.preconditions.if_none_match.clone(),
            unmodified_before: self.preconditions.unmodified_before.clone(),
            now: timestamp(),
            write_id: Update::new_write_id(),
            fields: R::FIELDS,
            updated_by: self.principal.clone(),
            budget: self.budget.remaining(),
            unchanged: Vec::new(),
        })
    }

    /// An update of `set` and `remove` conditioned on the record as
    /// `stored` holds it (its version, and its sealed values and key), which
    /// stands for every precondition: they were judged on it.
    fn update_as_read<R: Resource>(
        &self,
        set: Patch,
        remove: Vec<&'static str>,
        stored: &Item,
    ) -> Result<Update, ApiError> {
        let mut update = self.update::<R>(set, remove)?;
        update.expected_versions = None;
        update.none_match = None;
        update.unmodified_before = None;
        update.unchanged = values_as_read::<R>(stored);
        update
            .unchanged
            .push((VERSION, Expected::as_read(stored.get(VERSION))));
        Ok(update)
    }

    /// Judges the request's preconditions on `stored`, as the write would
    /// (412 here); they then hold through the write's condition on it.
    fn judge<R: Resource>(&self, stored: &Item) -> Result<(), ApiError> {
        Ok(self.update::<R>(Patch::new(), Vec::new())?.check(stored)?)
    }

    /// Whether the request carries a precondition.
    fn guarded(&self) -> bool {
        self.preconditions.if_match.is_some()
            || self.preconditions.if_none_match.is_some()
            || self.preconditions.unmodified_before.is_some()
    }
}

/// Now, as stored: RFC 3339, UTC, millisecond precision, `Z` suffix.
pub fn timestamp() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Adds `started`'s time to `total`.
fn add_time(total: &mut Option<Duration>, started: Instant) {
    *total = Some(total.unwrap_or_default() + started.elapsed());
}

/// The field of `R` whose values are sealed under a data key, and the
/// attribute holding that key.
fn values_field<R: Resource>() -> Option<(&'static str, &'static str)> {
    R::FIELDS.iter().find_map(|field| match field.sealing() {
        Some(Sealing::Values { key }) => Some((field.name, key)),
        _ => None,
    })
}

/// Whether a write of `set` and `remove` keeps `R`'s sealed values as they
/// are (neither sets nor removes them).
fn keeps_values<R: Resource>(set: &Patch, remove: &[&'static str]) -> bool {
    values_field::<R>()
        .is_some_and(|(field, _)| !set.iter().any(|(name, _)| *name == field) && !remove.contains(&field))
}

/// The stored attributes a write that keeps `R`'s sealed values must find
/// as `stored` holds them: the values and their key.
fn values_as_read<R: Resource>(stored: &Item) -> Vec<(&'static str, Expected)> {
    values_field::<R>()
        .map(|(field, attribute)| {
            vec![
                (field, Expected::as_read(stored.get(field))),
                (attribute, Expected::as_read(stored.get(attribute))),
            ]
        })
        .unwrap_or_default()
}

/// What a first try that keeps `R`'s sealed values expects: none (no value,
/// no key), so that its answer needs nothing opened.
fn no_values<R: Resource>() -> Vec<(&'static str, Expected)> {
    values_field::<R>()
        .map(|(field, attribute)| vec![(field, Expected::AbsentOrEmpty), (attribute, Expected::Absent)])
        .unwrap_or_default()
}

/// Seals what `set` holds of secrets, timing the KMS call in `calls`.
async fn seal<R: Resource, S: Store>(
    app: &App<S>,
    key: &Key,
    set: &mut Patch,
    remove: &mut Vec<&'static str>,
    budget: &Budget,
    calls: &mut Calls,
) -> Result<Sealed, ApiError> {
    // A constant per record kind: the functions whose records seal nothing
    // never reach the KMS client, so their binaries do not carry it.
    if !R::SEALS {
        return Ok(Sealed::default());
    }
    let started = Instant::now();
    let sealed = seal::seal_request(
        app.sealer.as_ref(),
        R::FIELDS,
        key,
        set,
        remove,
        budget.remaining(),
    )
    .await;
    // Time in KMS, if it was called: a value sealed, or KMS's own failure
    // (not a missing sealer).
    if matches!(
        &sealed,
        Ok(Sealed { called_kms: true, .. }) | Err(SealError::Unavailable(_) | SealError::Refused(_))
    ) {
        add_time(&mut calls.kms, started);
    }
    Ok(sealed?)
}

/// Writes the fields of `set` (and removes those of `remove`) on the record
/// of `context`, under its preconditions, and returns the item as written,
/// its sealed values open.
///
/// A record whose sealed values the request keeps is answered with them
/// opened. The first try expects the record to hold none (no values, no
/// key: one `UpdateItem`, no KMS call). If it holds some, the refused try
/// returned the item, whose values are opened (KMS opens their key: the
/// request's one KMS call) before anything is written, and the next try
/// expects exactly those values and that key. Values that do not open are a
/// 500 with nothing written. Values changed again in between (another
/// write's) are opened again, after a jittered wait, while the budget lasts;
/// a key replaced in between is a 409 (opening it would be a second KMS
/// call).
pub async fn put<R: Resource, S: Store>(
    app: &App<S>,
    context: &Context,
    mut set: Patch,
    mut remove: Vec<&'static str>,
    calls: &mut Calls,
) -> Result<Item, ApiError> {
    let sealed = seal::<R, S>(app, &context.key, &mut set, &mut remove, &context.budget, calls).await?;
    let keeps_values = keeps_values::<R>(&set, &remove);
    let mut update = context.update::<R>(set, remove)?;
    if !keeps_values {
        let item = update_item(app, context, &update, calls).await?;
        return opened::<R>(&context.key, item, sealed.data_key.as_ref());
    }
    update.unchanged = no_values::<R>();
    // The record's data key, once opened.
    let mut data_key: Option<DataKey> = None;
    let mut refusals = 0;
    loop {
        let written = update_item(app, context, &update, calls).await;
        let stored = match written {
            Ok(item) => return opened::<R>(&context.key, item, data_key.as_ref()),
            Err(StoreError::Changed(stored)) => stored,
            Err(error) => return Err(error.into()),
        };
        // The first refusal is the record holding values; a later one,
        // another write changing them meanwhile.
        if refusals > 0 {
            let Some(wait) = context.budget.backoff(refusals - 1) else {
                return Err(conflict());
            };
            tokio::time::sleep(wait).await;
        }
        refusals += 1;
        open_stored::<R, S>(app, context, &stored, &mut data_key, calls).await?;
        update.unchanged = values_as_read::<R>(&stored);
        update.budget = context.budget.remaining();
        // The time of this try's write, not of the first: a retry may land
        // after another write, whose updated_at must not move backwards.
        update.now = timestamp();
    }
}

/// One `UpdateItem` of `update`, sent again after a jittered wait while a
/// keyed update's transaction holds the item ([`StoreError::Contended`])
/// and the budget lasts.
async fn update_item<S: Store>(
    app: &App<S>,
    context: &Context,
    update: &Update,
    calls: &mut Calls,
) -> Result<Item, StoreError> {
    let mut tries = 0;
    loop {
        // The time of this try's write: one that lands after the transaction
        // that held the item must not stamp an earlier updated_at.
        let attempt = Update {
            budget: context.budget.remaining(),
            now: if tries == 0 {
                update.now.clone()
            } else {
                timestamp()
            },
            ..update.clone()
        };
        let started = Instant::now();
        let written = app.store.update(attempt).await;
        add_time(&mut calls.dynamodb, started);
        let Err(StoreError::Contended) = written else {
            return written;
        };
        let Some(wait) = context.budget.backoff(tries) else {
            tracing::warn!("keyed updates held the record past the time budget: nothing written");
            return Err(StoreError::Contended);
        };
        tries += 1;
        tokio::time::sleep(wait).await;
    }
}

/// Holds in `held` the data key of `stored`'s sealed values: the one held
/// already, or opened by KMS (the request's one KMS call) if none is held
/// yet. Whether `stored` holds a key at all; a 409 if it holds another
/// than the one held (another write sealed its values since: opening that
/// one would be a second KMS call).
async fn hold_key<R: Resource, S: Store>(
    app: &App<S>,
    context: &Context,
    stored: &Item,
    held: &mut Option<DataKey>,
    calls: &mut Calls,
) -> Result<bool, ApiError> {
    let Some((field, attribute)) = values_field::<R>() else {
        return Ok(false);
    };
    let Some(AttributeValue::B(stored_key)) = stored.get(attribute) else {
        return Ok(false);
    };
    match held {
        Some(key) if key.sealed() == stored_key.as_ref() => {}
        Some(_) => return Err(conflict()),
        None => *held = Some(open_key::<S>(app, field, attribute, context, stored, calls).await?),
    }
    Ok(true)
}

/// `stored` with its sealed values opened, their data key held in `held`
/// ([`hold_key`]): a 500, before anything is written, if they are not as
/// this service writes them or do not open.
async fn open_stored<R: Resource, S: Store>(
    app: &App<S>,
    context: &Context,
    stored: &Item,
    held: &mut Option<DataKey>,
    calls: &mut Calls,
) -> Result<Item, ApiError> {
    stored_as_written::<R>(stored)?;
    let keyed = hold_key::<R, S>(app, context, stored, held, calls).await?;
    opened::<R>(&context.key, stored.clone(), held.as_ref().filter(|_| keyed))
}

/// Opens the data key `stored` holds in `attribute` for the record's
/// `field`: the request's one KMS call.
async fn open_key<S: Store>(
    app: &App<S>,
    field: &'static str,
    attribute: &'static str,
    context: &Context,
    stored: &Item,
    calls: &mut Calls,
) -> Result<DataKey, ApiError> {
    let started = Instant::now();
    let opened = seal::open_stored_key(
        app.sealer.as_ref(),
        field,
        attribute,
        &context.key,
        stored,
        context.budget.remaining(),
    )
    .await;
    add_time(&mut calls.kms, started);
    match opened? {
        Some(opened) => Ok(opened),
        None => {
            tracing::error!("stored data key is not binary: nothing written");
            Err(ApiError::Internal)
        }
    }
}

/// Refuses (500, before any write) a stored item whose sealed values are
/// not as this service writes them ([`seal::check_stored`]).
fn stored_as_written<R: Resource>(stored: &Item) -> Result<(), ApiError> {
    seal::check_stored(R::FIELDS, stored).map_err(|error| {
        tracing::error!(%error, "stored item left unchanged: it is not one this service wrote");
        ApiError::Internal
    })
}

/// `item` with its sealed values opened by `data_key`.
fn opened<R: Resource>(key: &Key, mut item: Item, data_key: Option<&DataKey>) -> Result<Item, ApiError> {
    seal::open_item(R::FIELDS, key, &mut item, data_key).map_err(|error| {
        tracing::error!(%error, "stored item left unchanged: its sealed values do not open");
        ApiError::Internal
    })?;
    Ok(item)
}

/// Reads the record of `context` (one consistent read) and judges the
/// request's preconditions on it, as the write would: 404 and 412 here.
async fn read_judged<R: Resource, S: Store>(
    app: &App<S>,
    context: &Context,
    calls: &mut Calls,
) -> Result<Item, ApiError> {
    let started = Instant::now();
    let stored = app
        .store
        .read(R::TABLE, &context.key, context.budget.remaining())
        .await;
    add_time(&mut calls.dynamodb, started);
    let stored = stored?.ok_or(ApiError::NotFound(R::NOUN))?;
    context.judge::<R>(&stored)?;
    Ok(stored)
}

/// The record as it is, after the preconditions, its sealed values opened:
/// what a `PATCH` of `{}` (a merge patch that changes nothing) answers.
/// One read, one KMS call where it has sealed values; nothing written.
pub async fn current<R: Resource, S: Store>(
    app: &App<S>,
    context: &Context,
    calls: &mut Calls,
) -> Result<Item, ApiError> {
    let stored = read_judged::<R, S>(app, context, calls).await?;
    open_stored::<R, S>(app, context, &stored, &mut None, calls).await
}

/// Applies a merge `patch` that merges an object into a field: reads the
/// record, opens its sealed values (one KMS call, if it has any), merges,
/// checks the result, seals what it sets (under the record's data key, or
/// a new one if it has none, each write under a key of its own), and
/// writes it conditioned on the record as read (its version, and its
/// sealed values and key). Preconditions are judged on the record read
/// (412 at once) and hold through that condition: if the write finds
/// another version, it is 412 with a precondition, and without one the
/// patch is read and applied again after a jittered wait, while the budget
/// lasts ([`Budget::backoff`]), then 409. A data key replaced between tries
/// is also a 409: opening it would be a second KMS call.
pub async fn merge<R: Resource, S: Store>(
    app: &App<S>,
    context: &Context,
    write: &Write<'_>,
    calls: &mut Calls,
) -> Result<Item, ApiError> {
    // The record's data key once opened, or the new one made for it: a
    // request makes one KMS call at most.
    let mut data_key: Option<DataKey> = None;
    // The handshake that passed, for a try after a conflict.
    let mut passed = None;
    let mut tries = 0;
    loop {
        let stored = read_judged::<R, S>(app, context, calls).await?;
        let (set, remove) =
            merged::<R, S>(app, context, write, &stored, &mut data_key, &mut passed, calls).await?;
        let update = context.update_as_read::<R>(set, remove, &stored)?;
        let written = update_item(app, context, &update, calls).await;
        match written {
            Ok(item) => {
                // The key the written values are under, if any are sealed.
                let item_key = values_field::<R>().and_then(|(_, attribute)| match item.get(attribute) {
                    Some(AttributeValue::B(_)) => data_key.as_ref(),
                    _ => None,
                });
                return opened::<R>(&context.key, item, item_key);
            }
            Err(StoreError::VersionMismatch { current }) if context.guarded() => {
                return Err(ApiError::PreconditionFailed {
                    current_version: current,
                });
            }
            Err(StoreError::VersionMismatch { .. } | StoreError::Changed(_)) => {
                let Some(wait) = context.budget.backoff(tries) else {
                    return Err(conflict());
                };
                tries += 1;
                tokio::time::sleep(wait).await;
            }
            Err(error) => return Err(error.into()),
        }
    }
}

/// `write` applied to `stored` (its sealed values opened, their key held
/// in `data_key`), checked, verified if the request asks, and what it sets
/// sealed.
async fn merged<R: Resource, S: Store>(
    app: &App<S>,
    context: &Context,
    write: &Write<'_>,
    stored: &Item,
    data_key: &mut Option<DataKey>,
    passed: &mut Option<verify::Passed>,
    calls: &mut Calls,
) -> Result<(Patch, Vec<&'static str>), ApiError> {
    let record = open_stored::<R, S>(app, context, stored, data_key, calls).await?;
    let (mut set, mut remove) = match write {
        Write::Merge(patch) => {
            let merged = merge::apply::<R>(patch, &record, app.settings.policy)?;
            (merged.set, merged.remove)
        }
        Write::Put(set, remove) => (set.clone(), remove.clone()),
        Write::Nothing => (Patch::new(), Vec::new()),
    };
    if context.verify {
        let policy = app.settings.policy;
        verify::verify::<R>(policy, context, &record, (&mut set, &remove), passed, calls).await?;
    }
    if let Some((field, attribute)) = values_field::<R>() {
        match seal::values_write(&set, &remove, field) {
            seal::ValuesWrite::Seal => {
                let key = match data_key {
                    Some(key) => key,
                    None => data_key.insert(new_key::<S>(app, field, context, calls).await?),
                };
                seal::seal_values(key, field, attribute, &context.key, &mut set)?;
            }
            seal::ValuesWrite::Clear => remove.push(attribute),
            seal::ValuesWrite::Keep => {}
        }
    }
    Ok((set, remove))
}

/// A new data key for the record's `field`: the request's one KMS call.
async fn new_key<S: Store>(
    app: &App<S>,
    field: &'static str,
    context: &Context,
    calls: &mut Calls,
) -> Result<DataKey, ApiError> {
    let sealer = app.sealer.as_ref().ok_or(SealError::NotConfigured)?;
    let started = Instant::now();
    let made = sealer
        .new_data_key(&seal::context(field, &context.key), context.budget.remaining())
        .await;
    add_time(&mut calls.kms, started);
    Ok(made?)
}

fn conflict() -> ApiError {
    tracing::warn!("the record kept changing during the update: nothing written");
    ApiError::Conflict
}

/// The answer to a call the store refused, with the log line that explains
/// a 5xx (the request's span names the route).
impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::NotFound(table) => Self::NotFound(table.noun()),
            StoreError::VersionMismatch { current } => Self::PreconditionFailed {
                current_version: current,
            },
            StoreError::Changed(_) | StoreError::Contended | StoreError::KeyTaken => Self::Conflict,
            StoreError::Unavailable(reason) => {
                tracing::warn!(%reason, "database unavailable");
                Self::Unavailable
            }
            StoreError::Unreadable(reason) => {
                tracing::error!(%reason, "stored item left unchanged: it is not one this service wrote");
                Self::Internal
            }
            StoreError::Internal(reason) => {
                tracing::error!(%reason, "database error");
                Self::Internal
            }
        }
    }
}

/// The answer to a secret that could not be sealed or opened, with the one
/// log line that explains it: the KMS code, never the key material or the
/// value.
impl From<SealError> for ApiError {
    fn from(error: SealError) -> Self {
        match error {
            SealError::Unavailable(reason) => {
                tracing::warn!(%reason, "KMS unavailable: nothing written");
                Self::Unavailable
            }
            SealError::Refused(_) | SealError::NotConfigured => {
                tracing::error!(%error, "sealing or opening a secret failed: nothing written");
                Self::Internal
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::timestamp;

    #[test]
    fn timestamps_have_milliseconds_and_z() {
        let now = timestamp();
        assert_eq!(now.len(), "2026-11-21T14:55:00.123Z".len(), "{now}");
        assert!(now.ends_with('Z'));
        assert_eq!(&now[19..20], ".");
        assert!(chrono::DateTime::parse_from_rfc3339(&now).is_ok());
    }
}

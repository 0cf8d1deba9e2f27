//! The calls a valid request makes: sealing, and the conditional write(s)
//! that apply it, within one time budget.
//!
//! - [`put`]: the fields a request sets (a `PUT`, or a `PATCH` that merges
//!   no object) in one `UpdateItem`; on a record whose sealed values it
//!   does not replace, a second `UpdateItem` once KMS has opened the
//!   record's data key, so the values it answers with are the stored ones.
//! - [`merge`]: a `PATCH` that merges an object into `headers` or
//!   `parameters`: a consistent read, the merge, one `UpdateItem`
//!   conditioned on the version read; re-read and re-applied a few times if
//!   another write came between ([`MERGE_TRIES`]), then 409.
//!
//! Either way a request makes at most one KMS call, at most two DynamoDB
//! calls per try, and writes nothing when its answer is not 200.

use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::AttributeValue;

use crate::App;
use crate::budget::Budget;
use crate::error::ApiError;
use crate::item::{self, Item};
use crate::merge::{self, MergePatch};
use crate::metrics::Calls;
use crate::patch::Patch;
use crate::records::{Resource, Sealing};
use crate::request::Preconditions;
use crate::seal::{self, DataKey, SealError, Sealed};
use crate::store::{DataKeyUse, ExpectedKey, Key, KeyWrite, Store, StoreError, Update};

/// How many times a merge patch is read and applied before a write that
/// kept changing under it is answered 409.
pub const MERGE_TRIES: usize = 3;

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
}

impl Context {
    /// An update of `set` and `remove` under this request's preconditions.
    fn update<R: Resource>(
        &self,
        set: Patch,
        remove: Vec<&'static str>,
        data_key: Option<DataKeyUse>,
    ) -> Update {
        Update {
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
            data_key,
        }
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

/// Seals what `set` holds of secrets (`remove`d fields need no key: the
/// write removes theirs), timing the KMS call in `calls`.
async fn seal<R: Resource, S: Store>(
    app: &App<S>,
    key: &Key,
    set: &mut Patch,
    remove: &[&'static str],
    budget: &Budget,
    calls: &mut Calls,
) -> Result<Sealed, ApiError> {
    // A constant per record kind: the functions whose records seal nothing
    // never reach the KMS client, so their binaries do not carry it.
    if !R::SEALS {
        return Ok(Sealed::default());
    }
    let started = Instant::now();
    let sealed = seal::seal_request(app.sealer.as_ref(), R::FIELDS, key, set, budget.remaining()).await;
    // Time in KMS, if it was called: a value sealed, or KMS's own failure
    // (not a missing sealer).
    if matches!(
        &sealed,
        Ok(Sealed { called_kms: true, .. }) | Err(SealError::Unavailable(_) | SealError::Refused(_))
    ) {
        add_time(&mut calls.kms, started);
    }
    let mut sealed = sealed.map_err(|error| sealing_failed(R::ROUTE, error))?;
    if let (Some(key_use), Some((field, _))) = (&mut sealed.key_use, values_field::<R>())
        && remove.contains(&field)
    {
        key_use.expected = ExpectedKey::Any;
        key_use.write = KeyWrite::Remove;
    }
    Ok(sealed)
}

/// Writes the fields of `set` (and removes those of `remove`) on the record
/// of `context`, under its preconditions, and returns the item as written,
/// its sealed values open.
///
/// A record whose sealed values the request does not replace is shown with
/// them opened, which takes its data key: the first try expects none (a
/// record with no sealed values is one `UpdateItem`, no KMS call); if the
/// record has one, the refused try returned it, KMS opens it (the request's
/// one KMS call) and the second try expects exactly that key, so the values
/// returned are the ones it opens. A key replaced in between is a 409:
/// opening another would be a second KMS call.
pub async fn put<R: Resource, S: Store>(
    app: &App<S>,
    context: &Context,
    mut set: Patch,
    remove: Vec<&'static str>,
    calls: &mut Calls,
) -> Result<Item, ApiError> {
    let sealed = seal::<R, S>(app, &context.key, &mut set, &remove, &context.budget, calls).await?;
    let mut update = context.update::<R>(set, remove, sealed.key_use);
    let mut data_key = sealed.data_key;
    loop {
        let may_open = data_key.is_none()
            && update
                .data_key
                .as_ref()
                .is_some_and(|key_use| key_use.expected == ExpectedKey::Absent);
        let retry = may_open.then(|| update.clone());
        let started = Instant::now();
        let written = app.store.update(update).await;
        add_time(&mut calls.dynamodb, started);
        match written {
            Ok(item) => return opened::<R>(&context.key, item, data_key.as_ref()),
            Err(StoreError::DataKeyChanged(stored)) => {
                let (Some(mut retry), Some((field, attribute))) = (retry, values_field::<R>()) else {
                    tracing::warn!(
                        route = R::ROUTE,
                        "the record's data key changed during the update"
                    );
                    return Err(ApiError::Conflict);
                };
                stored_as_written::<R>(&stored)?;
                let opened = open_key::<R, S>(app, field, attribute, context, &stored, calls).await?;
                if let Some(key_use) = &mut retry.data_key {
                    key_use.expected = ExpectedKey::Is(opened.sealed().to_vec());
                }
                retry.budget = context.budget.remaining();
                data_key = Some(opened);
                update = retry;
            }
            Err(error) => return Err(store_failed(R::ROUTE, R::NOUN, error)),
        }
    }
}

/// Opens the data key `stored` holds in `attribute` for the record's
/// `field`: the request's one KMS call.
async fn open_key<R: Resource, S: Store>(
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
    match opened.map_err(|error| sealing_failed(R::ROUTE, error))? {
        Some(opened) => Ok(opened),
        None => {
            tracing::error!(route = R::ROUTE, "stored data key is not binary: nothing written");
            Err(ApiError::Internal)
        }
    }
}

/// Refuses (500, before any write) a stored item whose sealed values are
/// not as this service writes them ([`seal::check_stored`]).
fn stored_as_written<R: Resource>(stored: &Item) -> Result<(), ApiError> {
    seal::check_stored(R::FIELDS, stored).map_err(|error| {
        tracing::error!(route = R::ROUTE, %error, "stored item left unchanged: it is not one this service wrote");
        ApiError::Internal
    })
}

/// `item` with its sealed values opened by `data_key`.
fn opened<R: Resource>(key: &Key, mut item: Item, data_key: Option<&DataKey>) -> Result<Item, ApiError> {
    seal::open_item(R::FIELDS, key, &mut item, data_key).map_err(|error| {
        tracing::error!(route = R::ROUTE, %error, "stored item is malformed");
        ApiError::Internal
    })?;
    Ok(item)
}

/// Applies a merge `patch` that merges an object into a field: reads the
/// record, opens its sealed values (one KMS call, if it has any), merges,
/// checks the result, seals what it sets (under the record's data key, or
/// a new one if it has none), and writes it conditioned on the version
/// read. Preconditions are judged on the record read (412 at once) and hold
/// through that condition: if the write finds another version, it is 412
/// with a precondition, and without one the patch is read and applied again,
/// up to [`MERGE_TRIES`] times, then 409. A data key replaced between tries
/// is also a 409: opening it would be a second KMS call.
pub async fn merge<R: Resource, S: Store>(
    app: &App<S>,
    context: &Context,
    patch: &MergePatch,
    calls: &mut Calls,
) -> Result<Item, ApiError> {
    let guarded = context.preconditions.if_match.is_some()
        || context.preconditions.if_none_match.is_some()
        || context.preconditions.unmodified_before.is_some();
    // The record's data key once opened, or the new one made for it: a
    // request makes one KMS call at most.
    let mut data_key: Option<DataKey> = None;
    for _ in 0..MERGE_TRIES {
        let started = Instant::now();
        let stored = app
            .store
            .read(R::TABLE, &context.key, context.budget.remaining())
            .await;
        add_time(&mut calls.dynamodb, started);
        let stored = stored
            .map_err(|error| store_failed(R::ROUTE, R::NOUN, error))?
            .ok_or(ApiError::NotFound(R::NOUN))?;
        // The preconditions, as the write would judge them now.
        let judged = context.update::<R>(Patch::new(), Vec::new(), None);
        judged
            .check(&stored)
            .map_err(|error| store_failed(R::ROUTE, R::NOUN, error))?;
        stored_as_written::<R>(&stored)?;
        let version = item::version(&stored).map_err(|error| {
            tracing::error!(route = R::ROUTE, %error, "stored item left unchanged: it is not one this service wrote");
            ApiError::Internal
        })?;
        let mut record = stored.clone();
        let mut key_write = None;
        if let Some((field, attribute)) = values_field::<R>() {
            let stored_key = match stored.get(attribute) {
                Some(AttributeValue::B(sealed)) => Some(sealed.as_ref().to_vec()),
                _ => None,
            };
            let held = data_key.as_ref().map(|key| key.sealed().to_vec());
            match (&stored_key, &held) {
                (Some(stored_key), Some(held)) if stored_key == held => {}
                (Some(_), None) => {
                    data_key = Some(open_key::<R, S>(app, field, attribute, context, &stored, calls).await?);
                }
                // Another write sealed the values under another key since.
                (Some(_), Some(_)) => return Err(conflict::<R>()),
                (None, _) => {}
            }
            let record_key = stored_key.as_ref().and(data_key.as_ref());
            record = opened::<R>(&context.key, record, record_key)?;
            key_write = Some((field, attribute, stored_key.is_some()));
        }
        let merged = merge::apply::<R>(patch, &record, app.settings.policy)?;
        let mut set = merged.set;
        let mut data_key_use = None;
        if let Some((field, attribute, had_key)) = key_write {
            let write = match set.iter_mut().find(|(name, _)| *name == field) {
                _ if merged.remove.contains(&field) => KeyWrite::Remove,
                Some((_, AttributeValue::M(members))) if members.is_empty() => KeyWrite::Remove,
                Some((_, AttributeValue::M(members))) => {
                    if data_key.is_none() {
                        data_key = Some(new_key::<R, S>(app, field, context, calls).await?);
                    }
                    let Some(key) = &data_key else {
                        return Err(ApiError::Internal);
                    };
                    seal::seal_members(key, field, &context.key, members)
                        .map_err(|error| sealing_failed(R::ROUTE, error))?;
                    if had_key {
                        KeyWrite::Keep
                    } else {
                        KeyWrite::Set(key.sealed().to_vec())
                    }
                }
                _ => KeyWrite::Keep,
            };
            data_key_use = Some(DataKeyUse {
                attribute,
                expected: ExpectedKey::Any,
                write,
            });
        }
        // The version read stands for every precondition: they held on it.
        let mut update = context.update::<R>(set, merged.remove, data_key_use);
        update.expected_versions = Some(vec![version]);
        update.none_match = None;
        update.unmodified_before = None;
        let started = Instant::now();
        let written = app.store.update(update).await;
        add_time(&mut calls.dynamodb, started);
        match written {
            Ok(item) => {
                // The key the written values are under, if any are sealed.
                let item_key = values_field::<R>().and_then(|(_, attribute)| match item.get(attribute) {
                    Some(AttributeValue::B(_)) => data_key.as_ref(),
                    _ => None,
                });
                return opened::<R>(&context.key, item, item_key);
            }
            Err(StoreError::VersionMismatch { current }) if guarded => {
                return Err(ApiError::PreconditionFailed {
                    current_version: current,
                });
            }
            Err(StoreError::VersionMismatch { .. }) => {}
            Err(error) => return Err(store_failed(R::ROUTE, R::NOUN, error)),
        }
    }
    Err(conflict::<R>())
}

/// A new data key for the record's `field`: the request's one KMS call.
async fn new_key<R: Resource, S: Store>(
    app: &App<S>,
    field: &'static str,
    context: &Context,
    calls: &mut Calls,
) -> Result<DataKey, ApiError> {
    let sealer = app
        .sealer
        .as_ref()
        .ok_or_else(|| sealing_failed(R::ROUTE, SealError::NotConfigured))?;
    let started = Instant::now();
    let made = sealer
        .new_data_key(&seal::context(field, &context.key), context.budget.remaining())
        .await;
    add_time(&mut calls.kms, started);
    made.map_err(|error| sealing_failed(R::ROUTE, error))
}

fn conflict<R: Resource>() -> ApiError {
    tracing::warn!(
        route = R::ROUTE,
        "the record kept changing during the update: nothing written"
    );
    ApiError::Conflict
}

/// The answer to a call the store refused, with the log line that explains
/// a 5xx.
pub fn store_failed(route: &str, noun: &'static str, error: StoreError) -> ApiError {
    match error {
        StoreError::NotFound => ApiError::NotFound(noun),
        StoreError::VersionMismatch { current } => ApiError::PreconditionFailed {
            current_version: current,
        },
        StoreError::DataKeyChanged(_) => ApiError::Conflict,
        StoreError::Unavailable(reason) => {
            tracing::warn!(route, %reason, "database unavailable");
            ApiError::Unavailable
        }
        StoreError::Unreadable(reason) => {
            tracing::error!(route, %reason, "stored item left unchanged: it is not one this service wrote");
            ApiError::Internal
        }
        StoreError::Internal(reason) => {
            tracing::error!(route, %reason, "database error");
            ApiError::Internal
        }
    }
}

/// The answer to a secret that could not be sealed or opened, with the one
/// log line that explains it: the KMS code, never the key material or the
/// value.
pub fn sealing_failed(route: &str, error: SealError) -> ApiError {
    match error {
        SealError::Unavailable(reason) => {
            tracing::warn!(route, %reason, "KMS unavailable: nothing written");
            ApiError::Unavailable
        }
        SealError::Refused(_) | SealError::NotConfigured => {
            tracing::error!(route, %error, "sealing or opening a secret failed: nothing written");
            ApiError::Internal
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

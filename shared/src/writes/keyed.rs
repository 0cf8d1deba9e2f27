//! A write under an `Idempotency-Key`: one read of the record and of the
//! key's kept outcome, then the update and its outcome in one transaction,
//! so an outcome is kept if and only if its update was written. A retry
//! answers the kept outcome and writes nothing.

use std::time::Instant;

use aws_sdk_dynamodb::types::AttributeValue;

use super::{
    Context, Write, add_time, conflict, keeps_values, merged, new_key, open_stored, opened, seal,
    values_field,
};
use crate::App;
use crate::error::ApiError;
use crate::item::Item;
use crate::metrics::Calls;
use crate::records::Resource;
use crate::request::idempotency::KEPT_SECONDS;
use crate::seal::DataKey;
use crate::store::{Kept, Store, StoreError, applied};

/// The stored attribute naming the key of the write that last wrote a
/// record (in its published form), for its change event; a write without
/// a key removes it.
pub const IDEMPOTENCY_KEY: &str = "idempotency_key";

/// What a keyed request brings besides its write.
#[derive(Debug, Clone)]
pub struct Keyed {
    /// Where its outcome is kept ([`crate::request::idempotency::kept_key`]).
    pub kept_key: String,
    /// What makes a retry the same request.
    pub fingerprint: String,
    /// The key as the record and its change event carry it.
    pub published: String,
}

/// The answer: the record (its sealed values open), and whether it is an
/// outcome kept earlier, replayed.
pub struct Outcome {
    /// The record as written.
    pub item: Item,
    /// Whether the answer is a kept outcome.
    pub replayed: bool,
}

/// Writes `write` under `keyed` and keeps its outcome, or answers the
/// outcome kept under the key: 422 if that was another request. Each try is
/// one read and one transaction, conditioned on the record as read; a try
/// that loses to another write reads again after a jittered wait while the
/// budget lasts (then 409), and one that loses the key to a concurrent
/// request with it answers that request's outcome. At most one KMS call.
pub async fn write<R: Resource, S: Store>(
    app: &App<S>,
    context: &Context,
    keyed: &Keyed,
    write: Write<'_>,
    calls: &mut Calls,
) -> Result<Outcome, ApiError> {
    if matches!(write, Write::Nothing) && !context.verify {
        return current::<R, S>(app, context, keyed, calls).await;
    }
    // The record's data key once opened, or the one made for this write.
    let mut data_key: Option<DataKey> = None;
    let mut write = write;
    // A PUT's own secrets, sealed once.
    let mut sealed = false;
    // The key that seals a kept copy of values the record holds as text.
    let mut copy_key: Option<DataKey> = None;
    // The handshake that passed, for a try after a conflict.
    let mut passed = None;
    let mut tries = 0;
    loop {
        let (stored, now) = match read::<R, S>(app, context, keyed, calls).await? {
            Read::Kept(outcome) => return Ok(outcome),
            Read::Record(stored, now) => (stored, now),
        };
        // The preconditions, judged on the record read: they hold through
        // the transaction's condition on it.
        context.judge::<R>(&stored)?;
        let (set, remove) = match &mut write {
            Write::Put(set, remove) if !context.verify => {
                // Sealed only once the key is known to be unused and the
                // preconditions hold: a replay, a 422 or a 412 seals nothing.
                if !sealed {
                    data_key = seal::<R, S>(app, &context.key, set, remove, &context.budget, calls)
                        .await?
                        .data_key;
                    sealed = true;
                }
                // Values the write keeps are answered opened.
                if keeps_values::<R>(set, remove) {
                    open_stored::<R, S>(app, context, &stored, &mut data_key, calls).await?;
                }
                (set.clone(), remove.clone())
            }
            // A merge, and any write that verifies: on the record as read.
            write => merged::<R, S>(app, context, write, &stored, &mut data_key, &mut passed, calls).await?,
        };
        let mut update = context.update_as_read::<R>(set, remove, &stored)?;
        update.remove.retain(|name| *name != IDEMPOTENCY_KEY);
        update
            .set
            .push((IDEMPOTENCY_KEY, AttributeValue::S(keyed.published.clone())));
        let written = applied(&update, &stored)?;
        let record = sealed_copy::<R, S>(app, context, shown::<R>(&written), &mut copy_key, calls).await?;
        let kept = Kept {
            key: keyed.kept_key.clone(),
            fingerprint: keyed.fingerprint.clone(),
            record,
            kept_at: now,
            expires_at: now + KEPT_SECONDS,
        };
        let started = Instant::now();
        let result = app.store.update_keeping(update, kept).await;
        add_time(&mut calls.dynamodb, started);
        match result {
            Ok(()) => {
                let key = values_field::<R>().and_then(|(_, attribute)| match written.get(attribute) {
                    Some(AttributeValue::B(_)) => data_key.as_ref(),
                    _ => None,
                });
                let item = opened::<R>(&context.key, written, key)?;
                return Ok(Outcome {
                    item,
                    replayed: false,
                });
            }
            // A concurrent request with the key won: its outcome is read next.
            Err(StoreError::KeyTaken) if tries == 0 => {}
            // The record changed since it was read (the preconditions were
            // judged on that read, so only its version can differ).
            Err(
                StoreError::KeyTaken
                | StoreError::Contended
                | StoreError::Changed(_)
                | StoreError::VersionMismatch { .. },
            ) => {
                let Some(wait) = context.budget.backoff(tries) else {
                    return Err(conflict());
                };
                tokio::time::sleep(wait).await;
            }
            Err(error) => return Err(error.into()),
        }
        tries += 1;
    }
}

/// What a keyed request finds: the outcome kept under its key (answered
/// as is), or the record to write, and the time it was read.
enum Read {
    Kept(Outcome),
    Record(Item, i64),
}

/// Reads the record and the outcome kept under `keyed` (one call): the kept
/// outcome opened, if it is this request's; 422 if it is another's; 404 if
/// there is neither it nor the record.
async fn read<R: Resource, S: Store>(
    app: &App<S>,
    context: &Context,
    keyed: &Keyed,
    calls: &mut Calls,
) -> Result<Read, ApiError> {
    let started = Instant::now();
    let read = app
        .store
        .read_keyed(
            R::TABLE,
            &context.key,
            &keyed.kept_key,
            context.budget.remaining(),
        )
        .await;
    add_time(&mut calls.dynamodb, started);
    let (stored, kept) = read?;
    let now = chrono::Utc::now().timestamp();
    if let Some(kept) = kept.filter(|kept| kept.expires_at > now) {
        if kept.fingerprint != keyed.fingerprint {
            return Err(ApiError::IdempotencyKeyReused);
        }
        let item = open_stored::<R, S>(app, context, &kept.record, &mut None, calls).await?;
        return Ok(Read::Kept(Outcome { item, replayed: true }));
    }
    Ok(Read::Record(stored.ok_or(ApiError::NotFound(R::NOUN))?, now))
}

/// A `PATCH {}` under a key: the record as it is, as [`super::current`]
/// answers it, after the key is judged (422 if another request used it);
/// nothing written and nothing kept. One read, as without a key.
async fn current<R: Resource, S: Store>(
    app: &App<S>,
    context: &Context,
    keyed: &Keyed,
    calls: &mut Calls,
) -> Result<Outcome, ApiError> {
    let stored = match read::<R, S>(app, context, keyed, calls).await? {
        Read::Kept(outcome) => return Ok(outcome),
        Read::Record(stored, _) => stored,
    };
    context.judge::<R>(&stored)?;
    let item = open_stored::<R, S>(app, context, &stored, &mut None, calls).await?;
    Ok(Outcome {
        item,
        replayed: false,
    })
}

/// `record` with the values it holds as text (written before sealing) sealed
/// under `copy_key` (made once, the request's one KMS call, as the write
/// makes none then): a kept outcome holds no secret in the clear.
async fn sealed_copy<R: Resource, S: Store>(
    app: &App<S>,
    context: &Context,
    mut record: Item,
    copy_key: &mut Option<DataKey>,
    calls: &mut Calls,
) -> Result<Item, ApiError> {
    let Some((field, attribute)) = values_field::<R>() else {
        return Ok(record);
    };
    let in_the_clear = !record.contains_key(attribute)
        && matches!(record.get(field), Some(AttributeValue::M(members))
            if !members.is_empty() && members.values().all(|value| matches!(value, AttributeValue::S(_))));
    if !in_the_clear {
        return Ok(record);
    }
    let key = match copy_key {
        Some(key) => key,
        None => copy_key.insert(new_key::<S>(app, field, context, calls).await?),
    };
    let from = record.clone();
    crate::seal::seal_text_values(key, field, attribute, &context.key, &from, &mut record)?;
    Ok(record)
}

/// What of the record as written a replay answers with: everything but
/// the write-only fields (`api_key`), which no answer shows.
fn shown<R: Resource>(written: &Item) -> Item {
    let write_only: Vec<&str> = R::FIELDS
        .iter()
        .filter(|field| matches!(field.access, crate::records::Access::WriteOnly(_)))
        .map(|field| field.name)
        .collect();
    written
        .iter()
        .filter(|(name, _)| !write_only.contains(&name.as_str()))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}

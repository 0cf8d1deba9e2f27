//! The last step of a write under an `Idempotency-Key`: the update and its
//! outcome in one transaction, so an outcome is kept if and only if its
//! update was written. The steps before it are the pipeline's own (its
//! read takes the kept outcome with the record, in one call).

use std::time::Instant;

use super::{Pipeline, Tried, add_time};
use crate::error::ApiError;
use crate::item::{Attr, Item};
use crate::records::{Access, Resource};
use crate::request::idempotency::{Fingerprint, KEPT_SECONDS};
use crate::store::{Kept, Store, StoreError, Update, applied};

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
    pub fingerprint: Fingerprint,
    /// The key as the record and its change event carry it.
    pub published: String,
}

impl<R: Resource, S: Store> Pipeline<'_, R, S> {
    /// Writes `update` (conditioned on `stored`, read at `now`) and keeps
    /// its outcome under the key, in one transaction: the record as written
    /// (its write-only fields left out, values it holds as text sealed
    /// under a key of the copy's own). A concurrent request with the key
    /// that won makes the first try read its outcome at once; a record that
    /// changed since it was read makes a try read again after a wait.
    pub(super) async fn write_keeping(
        &mut self,
        mut update: Update,
        keyed: Keyed,
        stored: &Item,
        now: i64,
        tries: u32,
    ) -> Result<Tried, ApiError> {
        update.remove.retain(|name| *name != IDEMPOTENCY_KEY);
        update
            .set
            .push((IDEMPOTENCY_KEY, Attr::S(keyed.published.clone())));
        let written = applied(&update, stored)?;
        let record = self.seals.seal_copy(kept_copy::<R>(&written, &update)).await?;
        let kept = Kept {
            key: keyed.kept_key,
            fingerprint: keyed.fingerprint.print().to_owned(),
            record,
            kept_at: now,
            expires_at: now + KEPT_SECONDS,
        };
        let started = Instant::now();
        let result = self.app.store.update_keeping(update, kept).await;
        add_time(&mut self.calls.dynamodb, started);
        match result {
            Ok(()) => Ok(Tried::Written(self.answer(written)?)),
            // A concurrent request with the key won: its outcome is read next.
            Err(StoreError::KeyTaken) if tries == 0 => Ok(Tried::AgainAtOnce),
            // The record changed since it was read (the preconditions were
            // judged on that read, so only its version can differ).
            Err(
                StoreError::KeyTaken
                | StoreError::Contended
                | StoreError::Changed(_)
                | StoreError::VersionMismatch { .. },
            ) => Ok(Tried::Again),
            Err(error) => Err(error.into()),
        }
    }
}

/// What of the record as written is kept: what a replay answers with (all
/// but the write-only fields, `api_key`, which no answer shows), and a
/// write-only field this update set, sealed as the record holds it, which a
/// retry's value is compared with ([`crate::request::idempotency::Fingerprint`]).
fn kept_copy<R: Resource>(written: &Item, update: &Update) -> Item {
    let write_only: Vec<&str> = R::FIELDS
        .iter()
        .filter(|field| matches!(field.access, Access::WriteOnly(_)))
        .filter(|field| !update.set.iter().any(|(name, _)| *name == field.name))
        .map(|field| field.name)
        .collect();
    written
        .iter()
        .filter(|(name, _)| !write_only.contains(&name.as_str()))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}

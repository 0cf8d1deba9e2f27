//! The write pipeline: one request's write as [`Pipeline`], each step a
//! method, in the order a request takes them: read the record when the
//! write needs it, judge the preconditions, change it (merge, verify,
//! seal), then write it, plainly or, under an `Idempotency-Key`, keeping
//! the outcome (`keyed.rs`). At most one KMS call, nothing written unless
//! the answer is 200: docs/ARCHITECTURE.md, The path of a request.

mod keyed;
mod verify;

use std::marker::PhantomData;
use std::time::{Duration, Instant};

use crate::App;
use crate::budget::Budget;
use crate::error::ApiError;
use crate::item::{Attr, Item};
use crate::merge::{self, MergePatch};
use crate::metrics::Calls;
use crate::patch::{self, Patch, Written};
use crate::records::{self, Resource, VerifyMode};
use crate::request::Preconditions;
use crate::request::idempotency::SecretAt;
use crate::seal::{OpenError, SealError, Session, Unopened};
use crate::secret::Secret;
use crate::store::{Expected, Key, Store, StoreError, Update, VERSION};

pub use keyed::{IDEMPOTENCY_KEY, Keyed};

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

/// What a request asks of its write besides its fields.
#[derive(Debug, Clone)]
pub struct Intent {
    /// Which record.
    pub key: Key,
    /// The request's preconditions.
    pub preconditions: Preconditions,
    /// Who asked ([`crate::auth::Caller::principal`]).
    pub principal: Option<String>,
    /// What every call of the request may take.
    pub budget: Budget,
    /// Whether the write waits on a verification (`verify`), and which.
    pub verify: Option<VerifyMode>,
    /// The request's `Idempotency-Key`, where it has one.
    pub keyed: Option<Keyed>,
}

/// The answer: the record as written (its sealed values open), and whether
/// it is an outcome kept earlier, replayed.
#[derive(Debug)]
pub struct Outcome {
    /// The record.
    pub item: Item,
    /// Whether the answer is a kept outcome.
    pub replayed: bool,
}

/// One request's write on a record of kind `R` in the store `S`: what
/// every step needs, and what the steps learn on the way (the record's
/// data key, in its [`Session`]; a handshake that passed; the time in each
/// call).
pub struct Pipeline<'a, R, S> {
    app: &'a App<S>,
    key: Key,
    preconditions: Preconditions,
    principal: Option<String>,
    budget: Budget,
    verify: Option<VerifyMode>,
    keyed: Option<Keyed>,
    /// What the write seals and opens, and the record's data key.
    seals: Session<'a>,
    /// The handshake that passed, for a try after a conflict.
    passed: Option<verify::Passed>,
    /// Whether a keyed `PUT`'s own secrets are sealed (once, whatever the
    /// tries).
    put_sealed: bool,
    /// Whether this try's write leaves what a verification vouches for as
    /// the record held it, and so keeps the verification.
    leaves_verified: bool,
    calls: Calls,
    kind: PhantomData<fn() -> R>,
}

/// What a read finds: the outcome kept under the request's key (answered
/// as is), or the record to write, and the time it was read.
enum Read {
    Kept(Outcome),
    Record(Item, i64),
}

/// What one try of a write came to.
enum Tried {
    /// Written: the answer.
    Written(Outcome),
    /// Another write came first: read and try again after a jittered wait.
    Again,
    /// A concurrent request with the key came first: read its outcome now.
    AgainAtOnce,
}

impl<'a, R: Resource, S: Store> Pipeline<'a, R, S> {
    /// The pipeline of a request asking `intent` of the app.
    pub fn new(app: &'a App<S>, intent: Intent) -> Self {
        let Intent {
            key,
            preconditions,
            principal,
            budget,
            verify,
            keyed,
        } = intent;
        Self {
            app,
            seals: Session::new(app.sealer.as_ref(), R::FIELDS, key.clone(), budget),
            key,
            preconditions,
            principal,
            budget,
            verify,
            keyed,
            passed: None,
            put_sealed: false,
            leaves_verified: false,
            calls: Calls::default(),
            kind: PhantomData,
        }
    }

    /// Runs `write` through the pipeline: its outcome, and the time it spent
    /// in each call (for the metrics line, whatever the outcome).
    pub async fn run(mut self, write: Write<'_>) -> (Result<Outcome, ApiError>, Calls) {
        let outcome = match write {
            Write::Nothing if self.verify.is_none() => self.current().await,
            Write::Put(set, remove) if self.verify.is_none() && self.keyed.is_none() => {
                self.put(set, remove).await
            }
            // A merge, a keyed write, and any write that verifies: on the
            // record as read.
            write => self.read_modify_write(write).await,
        };
        self.calls.kms = self.seals.kms_time();
        (outcome, self.calls)
    }

    /// A `PATCH {}`: the record as it is, after the preconditions, its
    /// sealed values opened (under a key: after the key is judged); one
    /// read, nothing written, nothing kept.
    async fn current(&mut self) -> Result<Outcome, ApiError> {
        let stored = match self.read().await? {
            Read::Kept(outcome) => return Ok(outcome),
            Read::Record(stored, _) => stored,
        };
        self.judge(&stored)?;
        let item = self.open(&stored).await?;
        Ok(Outcome {
            item,
            replayed: false,
        })
    }

    /// A `PUT` (or a `PATCH` merging no object) without a key or a verify:
    /// seal, then one `UpdateItem`, which reads nothing first.
    ///
    /// A record whose sealed values the request keeps is answered with them
    /// opened. The first try expects the record to hold none (no values, no
    /// key: one `UpdateItem`, no KMS call). If it holds some, the refused try
    /// returned the item, whose values are opened (the request's one KMS
    /// call) before anything is written, and the next try expects exactly
    /// those values and that key. Values that do not open are a 500 with
    /// nothing written; values changed again in between are opened again,
    /// after a jittered wait, while the budget lasts; a key replaced in
    /// between is a 409.
    async fn put(&mut self, mut set: Patch, mut remove: Vec<&'static str>) -> Result<Outcome, ApiError> {
        self.seal(&mut set, &mut remove).await?;
        let keeps_values = keeps_values::<R>(&set, &remove);
        let mut update = self.update(set, remove)?;
        if !keeps_values {
            let item = self.update_item(&update).await?;
            return self.answer(item);
        }
        update.unchanged = no_values::<R>();
        let mut refusals = 0;
        loop {
            let stored = match self.update_item(&update).await {
                Ok(item) => return self.answer(item),
                Err(StoreError::Changed(stored)) => stored,
                Err(error) => return Err(error.into()),
            };
            // The first refusal is the record holding values; a later one,
            // another write changing them meanwhile.
            if refusals > 0 {
                self.wait(refusals - 1).await?;
            }
            refusals += 1;
            self.open(&stored).await?;
            update.unchanged = values_as_read::<R>(&stored);
            // The time of this try's write, not of the first: a retry may
            // land after another write, whose updated_at must not go back.
            update.now = timestamp();
        }
    }

    /// A write on the record as read: read (with the outcome kept under
    /// the key, if any), judge, change, then write conditioned on the
    /// record as read. A try that loses to another write reads again after
    /// a jittered wait while the budget lasts (then 409); with a
    /// precondition, a plain write that finds another version is a 412.
    async fn read_modify_write(&mut self, mut write: Write<'_>) -> Result<Outcome, ApiError> {
        let mut tries = 0;
        loop {
            let (stored, now) = match self.read().await? {
                Read::Kept(outcome) => return Ok(outcome),
                Read::Record(stored, now) => (stored, now),
            };
            self.judge(&stored)?;
            let (set, remove) = self.change(&mut write, &stored).await?;
            let update = self.update_as_read(set, remove, &stored)?;
            let tried = match self.keyed.clone() {
                None => self.write_plain(update).await?,
                Some(keyed) => self.write_keeping(update, keyed, &stored, now, tries).await?,
            };
            match tried {
                Tried::Written(outcome) => return Ok(outcome),
                Tried::Again => self.wait(tries).await?,
                Tried::AgainAtOnce => {}
            }
            tries += 1;
        }
    }

    /// Reads the record, and under a key the outcome kept for it (in the
    /// same call): that outcome answers a retry of the same request, opened;
    /// another request's is a 422; no record is a 404.
    async fn read(&mut self) -> Result<Read, ApiError> {
        let budget = self.budget.remaining();
        let started = Instant::now();
        let read = match &self.keyed {
            None => (self.app.store.read(R::TABLE, &self.key, budget).await).map(|stored| (stored, None)),
            Some(keyed) => {
                self.app
                    .store
                    .read_keyed(R::TABLE, &self.key, &keyed.kept_key, budget)
                    .await
            }
        };
        add_time(&mut self.calls.dynamodb, started);
        let (stored, kept) = read?;
        let now = chrono::Utc::now().timestamp();
        if let (Some(keyed), Some(kept)) = (self.keyed.clone(), kept.filter(|kept| kept.expires_at > now)) {
            let Some(secrets) = keyed.fingerprint.matches(&kept.fingerprint) else {
                return Err(ApiError::IdempotencyKeyReused);
            };
            // Under the key its request held (another write's, if it won).
            let item = self.seals.open_apart(&kept.record).await?;
            if !self.holds(&kept.record, &item, secrets).await? {
                return Err(ApiError::IdempotencyKeyReused);
            }
            return Ok(Read::Kept(Outcome { item, replayed: true }));
        }
        Ok(Read::Record(stored.ok_or(ApiError::NotFound(R::NOUN))?, now))
    }

    /// Whether a kept outcome (`kept` as stored, `opened` with its values
    /// opened) holds each of `secrets`, the retry's: a whole secret it keeps
    /// sealed, opened (one KMS call); a member of a map of values, among its
    /// opened values under the name the request gave (a write keeps the
    /// request's spelling).
    async fn holds(
        &mut self,
        kept: &Item,
        opened: &Item,
        secrets: &[(SecretAt, Secret)],
    ) -> Result<bool, ApiError> {
        for (at, secret) in secrets {
            let held = match at {
                SecretAt::Whole(field) => match kept.get(*field) {
                    Some(Attr::B(sealed)) => self.seals.open_secret(field, sealed).await? == *secret,
                    _ => false,
                },
                SecretAt::Member(field, name) => {
                    let values = opened.get(*field).and_then(Attr::as_m);
                    let value = values.and_then(|values| values.get(name)).and_then(Attr::as_s);
                    value.is_some_and(|value| *secret == Secret::from(value))
                }
            };
            if !held {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Judges the request's preconditions on `stored`, as the write would
    /// (412 here); they then hold through the write's condition on it.
    fn judge(&self, stored: &Item) -> Result<(), ApiError> {
        Ok(self.update(Patch::new(), Vec::new())?.check(stored)?)
    }

    /// What the write sets and removes on `stored`: a keyed `PUT`'s own
    /// fields, sealed once the key is known unused and the preconditions
    /// hold (so a replay, a 422 or a 412 seals nothing); otherwise `write`
    /// applied to the record as read (its sealed values opened), checked,
    /// verified if the request asks, and sealed.
    async fn change(
        &mut self,
        write: &mut Write<'_>,
        stored: &Item,
    ) -> Result<(Patch, Vec<&'static str>), ApiError> {
        self.leaves_verified = false;
        if let Write::Put(set, remove) = write
            && self.verify.is_none()
        {
            if !self.put_sealed {
                self.seal(set, remove).await?;
                self.put_sealed = true;
            }
            // Values the write keeps are answered opened.
            if keeps_values::<R>(set, remove) {
                self.open(stored).await?;
            }
            return Ok((set.clone(), remove.clone()));
        }
        let record = self.open(stored).await?;
        let (mut set, mut remove) = match write {
            Write::Merge(patch) => {
                let merged = merge::apply::<R>(patch, &record, self.app.settings.policy)?;
                (merged.set, merged.remove)
            }
            Write::Put(set, remove) => (set.clone(), remove.clone()),
            Write::Nothing => (Patch::new(), Vec::new()),
        };
        if let Some(mode) = self.verify {
            self.verify_step(mode, &record, &mut set, &remove).await?;
        }
        self.leaves_verified = leaves_verified::<R>(&record, &set, &remove);
        self.seal(&mut set, &mut remove).await?;
        Ok((set, remove))
    }

    /// Seals what `set` holds of secrets ([`Session::seal`]).
    async fn seal(&mut self, set: &mut Patch, remove: &mut Vec<&'static str>) -> Result<(), ApiError> {
        // A constant per record kind: the functions whose records seal
        // nothing never reach the sealer.
        if R::SEALS {
            self.seals.seal(set, remove).await?;
        }
        Ok(())
    }

    /// `stored` with its sealed values opened ([`Session::open`]).
    async fn open(&mut self, stored: &Item) -> Result<Item, ApiError> {
        Ok(self.seals.open(stored).await?)
    }

    /// The answer to a write that left `item`: its sealed values opened.
    fn answer(&self, item: Item) -> Result<Outcome, ApiError> {
        let item = self.seals.opened(item)?;
        Ok(Outcome {
            item,
            replayed: false,
        })
    }

    /// The last step without a key: one `UpdateItem`.
    async fn write_plain(&mut self, update: Update) -> Result<Tried, ApiError> {
        match self.update_item(&update).await {
            Ok(item) => Ok(Tried::Written(self.answer(item)?)),
            Err(StoreError::VersionMismatch { current }) if self.guarded() => {
                Err(ApiError::PreconditionFailed {
                    current_version: current,
                })
            }
            Err(StoreError::VersionMismatch { .. } | StoreError::Changed(_)) => Ok(Tried::Again),
            Err(error) => Err(error.into()),
        }
    }

    /// One `UpdateItem` of `update`, sent again after a jittered wait while
    /// a keyed update's transaction holds the item ([`StoreError::Contended`])
    /// and the budget lasts.
    async fn update_item(&mut self, update: &Update) -> Result<Item, StoreError> {
        let mut tries = 0;
        loop {
            // The time of this try's write: one that lands after the
            // transaction that held the item must not stamp an earlier
            // updated_at.
            let attempt = Update {
                budget: self.budget.remaining(),
                now: if tries == 0 {
                    update.now.clone()
                } else {
                    timestamp()
                },
                ..update.clone()
            };
            let started = Instant::now();
            let written = self.app.store.update(attempt).await;
            add_time(&mut self.calls.dynamodb, started);
            let Err(StoreError::Contended) = written else {
                return written;
            };
            let Some(wait) = self.budget.backoff(tries) else {
                tracing::warn!("keyed updates held the record past the time budget: nothing written");
                return Err(StoreError::Contended);
            };
            tries += 1;
            tokio::time::sleep(wait).await;
        }
    }

    /// Waits before try `tries + 1` (jittered), or gives up when the budget
    /// would not last: 409.
    async fn wait(&self, tries: u32) -> Result<(), ApiError> {
        let Some(wait) = self.budget.backoff(tries) else {
            tracing::warn!("the record kept changing during the update: nothing written");
            return Err(ApiError::Conflict);
        };
        tokio::time::sleep(wait).await;
        Ok(())
    }

    /// An update of `set` and `remove` under this request's preconditions:
    /// a 500, with nothing written, if `set` holds a secret left unsealed.
    fn update(&self, set: Patch, mut remove: Vec<&'static str>) -> Result<Update, ApiError> {
        // A write without a key leaves no earlier write's key on the record
        // (its change event would carry it); a keyed write sets it instead.
        // Likewise the kind's own event sets (the tools an earlier
        // verification moved), unless this write sets them.
        remove.push(IDEMPOTENCY_KEY);
        let unset = R::TABLE
            .event_sets()
            .iter()
            .copied()
            .filter(|attribute| !set.iter().any(|(name, _)| name == attribute));
        remove.extend(unset);
        // A verification vouches for the values it saw: a write that changes
        // one of them without verifying removes it. Read first, a write knows
        // whether it changes them; without a read (a `PUT`), setting is changing.
        if let Some((verification, of)) = records::verification(R::FIELDS) {
            let touches = |name: &&str| of.contains(name);
            let unverified = !set.iter().any(|(name, _)| *name == verification);
            let touched = set.iter().map(|(name, _)| name).any(touches) || remove.iter().any(touches);
            if unverified && touched && !self.leaves_verified {
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
    /// `stored` holds it (its version, and its sealed values and key),
    /// which stands for every precondition: they were judged on it.
    fn update_as_read(
        &self,
        set: Patch,
        remove: Vec<&'static str>,
        stored: &Item,
    ) -> Result<Update, ApiError> {
        let mut update = self.update(set, remove)?;
        update.expected_versions = None;
        update.none_match = None;
        update.unmodified_before = None;
        update.unchanged = values_as_read::<R>(stored);
        update
            .unchanged
            .push((VERSION, Expected::as_read(stored.get(VERSION))));
        Ok(update)
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

/// Whether a write of `set` and `remove` leaves every field a verification
/// of `R` vouches for as `record` (opened) holds it: each it sets holds the
/// same value (a map of values, the same names and values), each it
/// removes is absent. A whole secret is never opened to compare, so setting
/// one is a change.
fn leaves_verified<R: Resource>(record: &Item, set: &Patch, remove: &[&'static str]) -> bool {
    let Some((_, of)) = records::verification(R::FIELDS) else {
        return false;
    };
    // A map of values absent and one empty hold the same: none.
    let no_values =
        |held: Option<&Attr>| held.is_none_or(|held| matches!(held, Attr::M(members) if members.is_empty()));
    let same_values = |values: &std::collections::BTreeMap<String, Secret>, held: &Item| {
        values.len() == held.len()
            && values.iter().all(|(name, value)| {
                held.get(name)
                    .and_then(Attr::as_s)
                    .is_some_and(|held| *value == Secret::from(held))
            })
    };
    let as_held = |name: &str, value: &Written| match (value, record.get(name)) {
        (Written::Plain(value), Some(held)) => value == held,
        (Written::Secrets(values), held) if values.is_empty() => no_values(held),
        (Written::Secrets(values), Some(Attr::M(held))) => same_values(values, held),
        _ => false,
    };
    set.iter()
        .filter(|(name, _)| of.contains(name))
        .all(|(name, value)| as_held(name, value))
        && remove
            .iter()
            .filter(|name| of.contains(*name))
            .all(|name| no_values(record.get(*name)))
}

/// Whether a `PATCH` setting `fields` is judged on the record as read even if
/// it merges no object: it sets a field a verification of `R` vouches for
/// whose value a read shows (not a whole secret), so it keeps the
/// verification if it leaves that value as it was (`leaves_verified`).
pub fn compares_verified<R: Resource>(mut fields: impl Iterator<Item = &'static str>) -> bool {
    let Some((_, of)) = records::verification(R::FIELDS) else {
        return false;
    };
    fields.any(|name| {
        of.contains(&name)
            && R::FIELDS
                .iter()
                .any(|field| field.name == name && !matches!(field.sealing(), Some(records::Sealing::Whole)))
    })
}

/// Whether a write of `set` and `remove` keeps `R`'s sealed values as they
/// are (neither sets nor removes them).
fn keeps_values<R: Resource>(set: &Patch, remove: &[&'static str]) -> bool {
    crate::seal::values_field(R::FIELDS)
        .is_some_and(|(field, _)| !set.iter().any(|(name, _)| *name == field) && !remove.contains(&field))
}

/// The stored attributes a write that keeps `R`'s sealed values must find
/// as `stored` holds them: the values and their key.
fn values_as_read<R: Resource>(stored: &Item) -> Vec<(&'static str, Expected)> {
    crate::seal::values_field(R::FIELDS)
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
    crate::seal::values_field(R::FIELDS)
        .map(|(field, attribute)| vec![(field, Expected::AbsentOrEmpty), (attribute, Expected::Absent)])
        .unwrap_or_default()
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

/// A stored item whose sealed values do not open: a 500 before anything is
/// written, with the line that says which member (never its value).
impl From<OpenError> for ApiError {
    fn from(error: OpenError) -> Self {
        tracing::error!(%error, "stored item left unchanged: its sealed values do not open");
        Self::Internal
    }
}

/// A record that could not be opened before a write.
impl From<Unopened> for ApiError {
    fn from(error: Unopened) -> Self {
        match error {
            Unopened::Malformed(error) => error.into(),
            Unopened::Seal(error) => error.into(),
            Unopened::KeyReplaced => {
                tracing::warn!("the record's data key was replaced during the update: nothing written");
                Self::Conflict
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

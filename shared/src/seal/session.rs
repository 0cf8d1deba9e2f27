//! One request's sealing: what it seals, what it opens, and the one data
//! key a record's values live under, made or opened at most once (the
//! request's one KMS call). A write hands it what it sets and the record
//! it read; the session decides which key that needs.

use std::time::{Duration, Instant};

use super::{
    DataKey, OpenError, SealError, Sealer, ValuesWrite, check_stored, context, open_item, seal_text_values,
    seal_values, values_write,
};
use crate::budget::Budget;
use crate::item::{Attr, Item};
use crate::patch::{Patch, Written};
use crate::records::{Field, Sealing};
use crate::secret::Secret;
use crate::store::Key;

/// Why a stored record could not be opened before a write.
#[derive(Debug, thiserror::Error)]
pub enum Unopened {
    /// Its values are not as this service writes them, or do not open.
    #[error("{0}")]
    Malformed(#[from] OpenError),
    /// KMS did not open its data key.
    #[error("{0}")]
    Seal(#[from] SealError),
    /// Its data key, or its sealed secret, is not the one this request
    /// opened: another write sealed it since (opening that one would be a
    /// second KMS call).
    #[error("the record's sealed key was replaced during the request")]
    KeyReplaced,
}

/// The sealing of one request's write on one record.
pub struct Session<'a> {
    sealer: Option<&'a Sealer>,
    fields: &'static [Field],
    key: Key,
    budget: Budget,
    /// The record's data key, opened, or the one made for this write.
    data_key: Option<DataKey>,
    /// A key of a kept copy's own, for values the record holds as text.
    copy_key: Option<DataKey>,
    /// The whole secret this session sealed, and its ciphertext: a try
    /// after a conflict seals the same text again without a KMS call.
    sealed_whole: Option<(Secret, Vec<u8>)>,
    /// The stored whole secret this session opened, as stored and opened.
    opened_whole: Option<(Vec<u8>, Secret)>,
    /// Time spent waiting on KMS.
    kms: Option<Duration>,
}

impl<'a> Session<'a> {
    /// A session for the record `key` of a kind with `fields`, its KMS
    /// calls within `budget`.
    pub fn new(sealer: Option<&'a Sealer>, fields: &'static [Field], key: Key, budget: Budget) -> Self {
        Self {
            sealer,
            fields,
            key,
            budget,
            data_key: None,
            copy_key: None,
            sealed_whole: None,
            opened_whole: None,
            kms: None,
        }
    }

    /// Time spent in KMS so far, if it was called.
    pub fn kms_time(&self) -> Option<Duration> {
        self.kms
    }

    /// The map of sealed values this kind has, and the attribute holding
    /// its data key.
    pub fn values_field(&self) -> Option<(&'static str, &'static str)> {
        values_field(self.fields)
    }

    /// Seals, in place, every secret `set` holds: a whole secret by one KMS
    /// `Encrypt`; a map of values under the data key this session holds (the
    /// record's, opened), else a new one from KMS, which joins `set` in its
    /// attribute. A map set empty or removed takes its key's attribute
    /// with it (into `remove`). At most one KMS call: a kind seals one field.
    pub async fn seal(&mut self, set: &mut Patch, remove: &mut Vec<&'static str>) -> Result<(), SealError> {
        for field in self.fields {
            match field.sealing() {
                None => {}
                Some(Sealing::Whole) => {
                    let Some((_, value)) = set.iter_mut().find(|(name, _)| *name == field.name) else {
                        continue;
                    };
                    let Written::Secret(plaintext) = &*value else {
                        continue;
                    };
                    let sealed = match &self.sealed_whole {
                        Some((text, sealed)) if text == plaintext => sealed.clone(),
                        _ => {
                            let sealer = self.sealer.ok_or(SealError::NotConfigured)?;
                            let started = Instant::now();
                            let sealed = sealer
                                .seal(
                                    &context(field.name, &self.key),
                                    plaintext.expose().as_bytes(),
                                    self.budget.remaining(),
                                )
                                .await;
                            self.add_time(started);
                            let sealed = sealed?;
                            self.sealed_whole = Some((plaintext.clone(), sealed.clone()));
                            sealed
                        }
                    };
                    *value = Written::Plain(Attr::B(sealed));
                }
                Some(Sealing::Values { key: attribute }) => match values_write(set, remove, field.name) {
                    ValuesWrite::Seal => {
                        // The key held, or a new one, held from now on.
                        let data_key = match self.data_key.take() {
                            Some(held) => held,
                            None => self.new_key(field.name).await?,
                        };
                        let sealed = seal_values(&data_key, field.name, attribute, &self.key, set);
                        self.data_key = Some(data_key);
                        sealed?;
                    }
                    ValuesWrite::Clear => remove.push(attribute),
                    // Not set: the stored values stay as they are, under their key.
                    ValuesWrite::Keep => {}
                },
            }
        }
        Ok(())
    }

    /// `stored` (a record as read, or as a refused write found it) with its
    /// sealed values opened, its data key held: the one held already, or
    /// opened by KMS if none is held yet. Refused before anything is
    /// written if its values are not as this service writes them or do not
    /// open, or if its key is another than the one held.
    pub async fn open(&mut self, stored: &Item) -> Result<Item, Unopened> {
        check_stored(self.fields, stored)?;
        if let Some((field, attribute)) = self.values_field()
            && let Some(Attr::B(sealed)) = stored.get(attribute)
        {
            match &self.data_key {
                Some(held) if held.sealed() == sealed.as_slice() => {}
                Some(_) => return Err(Unopened::KeyReplaced),
                None => {
                    let sealer = self.sealer.ok_or(SealError::NotConfigured)?;
                    let started = Instant::now();
                    let opened = sealer
                        .open_data_key(
                            sealed.as_ref(),
                            &context(field, &self.key),
                            self.budget.remaining(),
                        )
                        .await;
                    self.add_time(started);
                    self.data_key = Some(opened?);
                }
            }
        }
        Ok(self.opened(stored.clone())?)
    }

    /// `stored` opened as [`Self::open`] does, under a key held for it
    /// alone: a kept outcome, whose key (its own request's) may be another
    /// than the record's, which this session may hold already.
    pub async fn open_apart(&mut self, stored: &Item) -> Result<Item, Unopened> {
        let held = self.data_key.take();
        let opened = self.open(stored).await;
        self.data_key = held;
        opened
    }

    /// The whole secret `field` of the record, `sealed` as stored: one KMS
    /// `Decrypt` under the context it was sealed with, once a request (a
    /// try after a conflict finds it opened; another one there is 409).
    pub async fn open_secret(&mut self, field: &str, sealed: &[u8]) -> Result<Secret, Unopened> {
        if let Some((stored, opened)) = &self.opened_whole {
            return if stored.as_slice() == sealed {
                Ok(opened.clone())
            } else {
                Err(Unopened::KeyReplaced)
            };
        }
        let sealer = self.sealer.ok_or(SealError::NotConfigured)?;
        let started = Instant::now();
        let opened = sealer
            .open(sealed, &context(field, &self.key), self.budget.remaining())
            .await;
        self.add_time(started);
        let opened = opened?;
        let text = std::str::from_utf8(&opened)
            .map_err(|_| SealError::Refused("the opened secret is not text".into()))?;
        let secret = Secret::from(text);
        self.opened_whole = Some((sealed.to_vec(), secret.clone()));
        Ok(secret)
    }

    /// `item` (as written, or kept) with its sealed values opened by the
    /// key this session holds.
    pub fn opened(&self, mut item: Item) -> Result<Item, OpenError> {
        open_item(self.fields, &self.key, &mut item, self.data_key.as_ref())?;
        Ok(item)
    }

    /// `record` with the values it holds as text (written before sealing)
    /// sealed under a key of the copy's own, made once (a KMS call a write
    /// that seals nothing else has to spare): a kept outcome holds no
    /// secret in the clear.
    pub async fn seal_copy(&mut self, mut record: Item) -> Result<Item, SealError> {
        let Some((field, attribute)) = self.values_field() else {
            return Ok(record);
        };
        let in_the_clear = !record.contains_key(attribute)
            && matches!(record.get(field), Some(Attr::M(members))
                if !members.is_empty() && members.values().all(|value| matches!(value, Attr::S(_))));
        if !in_the_clear {
            return Ok(record);
        }
        // The copy's key, made once.
        let copy_key = match self.copy_key.take() {
            Some(made) => made,
            None => self.new_key(field).await?,
        };
        let from = record.clone();
        let sealed = seal_text_values(&copy_key, (field, attribute), &self.key, &from, &mut record);
        self.copy_key = Some(copy_key);
        sealed?;
        Ok(record)
    }

    /// Seals again, into `into`, the map of values `opened` holds opened
    /// ([`Self::open`]), under a new key of its own derived from the data
    /// key held, which stays as it is: what `seal-secrets` does to values
    /// sealed in an earlier layout. Whether there was such a map.
    pub fn reseal(&self, opened: &Item, into: &mut Item) -> Result<bool, SealError> {
        let (Some(values), Some(data_key)) = (self.values_field(), &self.data_key) else {
            return Ok(false);
        };
        seal_text_values(data_key, values, &self.key, opened, into)
    }

    /// A new data key for the record's `field`: one KMS call.
    async fn new_key(&mut self, field: &str) -> Result<DataKey, SealError> {
        let sealer = self.sealer.ok_or(SealError::NotConfigured)?;
        let started = Instant::now();
        let made = sealer
            .new_data_key(&context(field, &self.key), self.budget.remaining())
            .await;
        self.add_time(started);
        made
    }

    fn add_time(&mut self, started: Instant) {
        self.kms = Some(self.kms.unwrap_or_default() + started.elapsed());
    }
}

/// The map of sealed values among `fields`, and the attribute holding its
/// data key.
pub fn values_field(fields: &[Field]) -> Option<(&'static str, &'static str)> {
    fields.iter().find_map(|field| match field.sealing() {
        Some(Sealing::Values { key }) => Some((field.name, key)),
        _ => None,
    })
}

//! Sealing: a record's secrets are encrypted with AWS KMS before they reach
//! the table, so a reader of the table, its stream or a backup sees only
//! ciphertext. By field ([`crate::records::Sealing`]): whole (`api_key`, one
//! KMS `Encrypt` bound to [`context`]) or by value (`headers`, [`values`],
//! under the record's data key). Contexts, costs and who can read what:
//! docs/secrets.md.

mod kms;
#[cfg(feature = "memory-store")]
mod memory;
pub mod session;
pub mod values;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

pub use kms::KmsSealer;
#[cfg(feature = "memory-store")]
pub use memory::MemorySealer;
pub use session::{Session, Unopened, values_field};

use crate::budget::Budget;
use crate::config::ConfigError;
use crate::item::{Attr, Item};
use crate::patch::{Patch, Written, into_attributes};
use crate::records::{Field, Sealing};
use crate::secret::Secret;
use crate::store::Key;
pub use values::DataKey;

/// The variable naming the secrets key: a key id, key ARN, alias name or
/// alias ARN.
pub const KEY_ID_VAR: &str = "SECRETS_KEY_ID";

/// A KMS encryption context: pairs in the order they are documented.
pub type EncryptionContext<'a> = &'a [(&'static str, &'a str)];

/// The encryption context a sealed `field` of the record `key` is bound to
/// (the whole secret, or the record's data key for the field): the field,
/// the record's project where it has one, and its id. KMS authenticates it
/// with the ciphertext: `Decrypt` needs exactly it.
pub fn context<'a>(field: &'a str, key: &'a Key) -> Vec<(&'static str, &'a str)> {
    let mut context = vec![("field", field)];
    if let Some(project_id) = &key.project_id {
        context.push(("project_id", project_id));
    }
    context.push(("id", &key.id));
    context
}

/// Why a value could not be sealed: a KMS error code or a kind, never a
/// service message (it could quote request values) and never the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// Throttled, unreachable, or out of time: worth retrying later.
    #[error("KMS unavailable: {0}")]
    Unavailable(String),
    /// KMS refused for good: the key is disabled, pending deletion or not
    /// found, or the role may not use it.
    #[error("KMS refused: {0}")]
    Refused(String),
    /// The function was started without a secrets key.
    #[error("no secrets key is configured ({KEY_ID_VAR})")]
    NotConfigured,
}

/// What seals secrets for a running function.
#[derive(Debug, Clone)]
pub enum Sealer {
    /// AWS KMS (or an emulator at `AWS_ENDPOINT_URL_KMS`).
    Kms(KmsSealer),
    /// A reversible stand-in for handler tests (feature `memory-store`);
    /// the KMS sealer is tested against a KMS emulator.
    #[cfg(feature = "memory-store")]
    Memory(std::sync::Arc<MemorySealer>),
}

impl Sealer {
    /// The secrets key id from `SECRETS_KEY_ID`, read through `lookup`:
    /// required (a function that seals refuses to start without it).
    pub fn key_id(lookup: impl Fn(&str) -> Option<String>) -> Result<String, ConfigError> {
        lookup(KEY_ID_VAR)
            .map(|id| id.trim().to_owned())
            .filter(|id| !id.is_empty())
            .ok_or(ConfigError::Invalid {
                name: KEY_ID_VAR,
                expected: "set to the KMS key that seals api_key and MCP header values (key id, ARN or alias)",
            })
    }

    /// Encrypts `plaintext` under `context` within `budget`; returns the
    /// ciphertext to store.
    pub async fn seal(
        &self,
        context: EncryptionContext<'_>,
        plaintext: &[u8],
        budget: Duration,
    ) -> Result<Vec<u8>, SealError> {
        match self {
            Self::Kms(kms) => kms.seal(context, plaintext, budget).await,
            #[cfg(feature = "memory-store")]
            Self::Memory(memory) => memory.seal(context, plaintext),
        }
    }

    /// The plaintext KMS sealed under `context` (`Decrypt`), within
    /// `budget`: a whole secret, opened to be sent where it belongs.
    pub async fn open(
        &self,
        sealed: &[u8],
        context: EncryptionContext<'_>,
        budget: Duration,
    ) -> Result<zeroize::Zeroizing<Vec<u8>>, SealError> {
        match self {
            Self::Kms(kms) => kms.open(sealed, context, budget).await,
            #[cfg(feature = "memory-store")]
            Self::Memory(memory) => memory.open(sealed, context),
        }
    }

    /// A new data key bound to `context`, within `budget`.
    pub async fn new_data_key(
        &self,
        context: EncryptionContext<'_>,
        budget: Duration,
    ) -> Result<DataKey, SealError> {
        match self {
            Self::Kms(kms) => kms.new_data_key(context, budget).await,
            #[cfg(feature = "memory-store")]
            Self::Memory(memory) => memory.new_data_key(context),
        }
    }

    /// Opens the data key `sealed`, bound to `context`, within `budget`.
    pub async fn open_data_key(
        &self,
        sealed: &[u8],
        context: EncryptionContext<'_>,
        budget: Duration,
    ) -> Result<DataKey, SealError> {
        match self {
            Self::Kms(kms) => kms.open_data_key(sealed, context, budget).await,
            #[cfg(feature = "memory-store")]
            Self::Memory(memory) => memory.open_data_key(sealed, context),
        }
    }
}

/// What a write's `set` and `remove` do to a map of sealed values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValuesWrite {
    /// It sets the map, not empty: its values are to be sealed.
    Seal,
    /// It sets the map empty, or removes it: the data key goes with it.
    Clear,
    /// It leaves the map as stored.
    Keep,
}

/// What `set` and `remove` do to the map of sealed values `field`.
pub fn values_write(set: &Patch, remove: &[&'static str], field: &str) -> ValuesWrite {
    match set.iter().find(|(name, _)| *name == field) {
        Some((_, Written::Secrets(members))) if members.is_empty() => ValuesWrite::Clear,
        Some((_, Written::Secrets(_))) => ValuesWrite::Seal,
        _ if remove.contains(&field) => ValuesWrite::Clear,
        _ => ValuesWrite::Keep,
    }
}

/// Seals each value of the map `field` that `set` holds for the record
/// `key` under a key of this write's own, derived from `data_key`
/// ([`DataKey::for_write`]), and sets `attribute` to the data key as KMS
/// sealed it, beside the values.
pub fn seal_values(
    data_key: &DataKey,
    field: &str,
    attribute: &'static str,
    key: &Key,
    set: &mut Patch,
) -> Result<(), SealError> {
    let write_key = data_key
        .for_write()
        .map_err(|error| SealError::Refused(error.to_string()))?;
    for (name, value) in set.iter_mut() {
        let (true, Written::Secrets(members)) = (*name == field, &*value) else {
            continue;
        };
        let mut sealed = HashMap::with_capacity(members.len());
        for (member, plaintext) in members {
            let ciphertext = write_key
                .seal(field, key, member, plaintext.expose())
                .map_err(|error| SealError::Refused(error.to_string()))?;
            sealed.insert(member.clone(), Attr::B(ciphertext));
        }
        *value = Written::Plain(Attr::M(sealed));
    }
    set.push((attribute, Written::Plain(Attr::B(data_key.sealed().to_vec()))));
    Ok(())
}

/// Why a stored item's sealed values could not be shown: a stored item
/// this service did not write, or one altered since. Never a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("stored member `{field}.{name}` cannot be opened: {reason}")]
pub struct OpenError {
    /// The field.
    pub field: &'static str,
    /// The member's name (a header name: not secret).
    pub name: String,
    /// Why.
    pub reason: values::ValueError,
}

/// Whether the stored `item`'s sealed-values fields are as this service
/// writes them: a map whose values are all sealed (B) when the item holds a
/// data key, all text (S, stored before sealing) when it holds none. Anything
/// else was written by another hand (a text value planted beside sealed
/// ones would be shown, and re-sealed, as if genuine): refused before a
/// write, so nothing is written.
pub fn check_stored(fields: &[Field], item: &Item) -> Result<(), OpenError> {
    for field in fields {
        let Some(Sealing::Values { key }) = field.sealing() else {
            continue;
        };
        let members = match item.get(field.name) {
            None | Some(Attr::Null) => continue,
            Some(Attr::M(members)) => members,
            Some(_) => {
                return Err(OpenError {
                    field: field.name,
                    name: String::new(),
                    reason: values::ValueError::Malformed,
                });
            }
        };
        let sealed = matches!(item.get(key), Some(Attr::B(_)));
        for (name, value) in members {
            let fits = match value {
                Attr::B(_) => sealed,
                Attr::S(_) => !sealed,
                _ => false,
            };
            if !fits {
                return Err(OpenError {
                    field: field.name,
                    name: name.clone(),
                    reason: values::ValueError::Malformed,
                });
            }
        }
    }
    Ok(())
}

/// Opens, in place, every sealed member value of `item` (a record `key` of
/// a kind with `fields`) with `data_key`, so the record reads as it was
/// written; text values (stored before sealing) stay as they are.
pub fn open_item(
    fields: &[Field],
    key: &Key,
    item: &mut Item,
    data_key: Option<&DataKey>,
) -> Result<(), OpenError> {
    for field in fields {
        if !matches!(field.sealing(), Some(Sealing::Values { .. })) {
            continue;
        }
        let Some(Attr::M(members)) = item.get_mut(field.name) else {
            continue;
        };
        for (name, value) in members.iter_mut() {
            let Attr::B(sealed) = &*value else {
                continue;
            };
            let failed = |reason| OpenError {
                field: field.name,
                name: name.clone(),
                reason,
            };
            let data_key = data_key.ok_or_else(|| failed(values::ValueError::Malformed))?;
            let opened = data_key
                .open(field.name, key, name, sealed.as_ref())
                .map_err(failed)?;
            *value = Attr::S(opened);
        }
    }
    Ok(())
}

/// Seals, in place, every secret of a stored `item` (of a record kind
/// with `fields`) that is still plain text, as a write that sets it would
/// have: a whole secret stored as text (S), a map of values stored as text
/// (a new data key, set on the item). Returns the names of the fields it
/// sealed. An item with no key is left as it is. What the sample loader and
/// the `seal-secrets` command do.
pub async fn seal_stored(
    sealer: &Sealer,
    table: crate::records::Table,
    fields: &'static [Field],
    item: &mut Item,
) -> Result<Vec<&'static str>, SealError> {
    let Some(key) = Key::of_item(table, item) else {
        return Ok(Vec::new());
    };
    let mut plain: Patch = fields
        .iter()
        .filter_map(|field| {
            let plain = match (field.sealing()?, item.get(field.name)?) {
                (Sealing::Whole, Attr::S(text)) => Written::Secret(Secret::from(text.as_str())),
                (Sealing::Values { key: attribute }, Attr::M(members))
                    if !item.contains_key(attribute) && !members.is_empty() =>
                {
                    Written::Secrets(secrets_of(members)?)
                }
                _ => return None,
            };
            Some((field.name, plain))
        })
        .collect();
    if plain.is_empty() {
        return Ok(Vec::new());
    }
    let names = plain.iter().map(|(name, _)| *name).collect();
    // The new data key joins `plain` in its own attribute.
    Session::new(Some(sealer), fields, key, Budget::start(None))
        .seal(&mut plain, &mut Vec::new())
        .await?;
    for (name, value) in into_attributes(plain)
        .map_err(|error| SealError::Refused(error.to_string()))?
        .iter()
    {
        item.insert((*name).to_owned(), value.clone());
    }
    Ok(names)
}

/// Seals the map `field` that `from` holds as text (values stored before
/// sealing, or opened) under a key of this write's own derived from
/// `data_key`, and sets it in `into` with the data key as `attribute`
/// beside it ([`seal_values`]). Whether `from` held such a map.
pub fn seal_text_values(
    data_key: &DataKey,
    (field, attribute): (&'static str, &'static str),
    key: &Key,
    from: &Item,
    into: &mut Item,
) -> Result<bool, SealError> {
    let Some(secrets) = from
        .get(field)
        .and_then(|value| secrets_of(value.as_m()?))
        .filter(|secrets| !secrets.is_empty())
    else {
        return Ok(false);
    };
    let mut set: Patch = vec![(field, Written::Secrets(secrets))];
    seal_values(data_key, field, attribute, key, &mut set)?;
    for (name, value) in into_attributes(set)
        .map_err(|error| SealError::Refused(error.to_string()))?
        .iter()
    {
        into.insert((*name).to_owned(), value.clone());
    }
    Ok(true)
}

/// `members` as secrets, if each is text (S): values stored before sealing.
fn secrets_of(members: &HashMap<String, Attr>) -> Option<BTreeMap<String, Secret>> {
    members
        .iter()
        .map(|(name, value)| Some((name.clone(), Secret::from(value.as_s()?))))
        .collect()
}

/// Whether `members` hold a value sealed in an earlier layout than the
/// current one ([`values::VERSION`]).
pub fn has_earlier_layout(members: &HashMap<String, Attr>) -> bool {
    members
        .values()
        .any(|value| matches!(value, Attr::B(sealed) if sealed.first() == Some(&values::FIRST_VERSION)))
}

/// Re-seals, in place, every map of `item` (a stored record of `table`)
/// holding values sealed in an earlier layout, under a new key of its own
/// derived from the record's data key, which stays as it is: one KMS
/// `Decrypt`. Returns the names of the fields it re-sealed. What
/// `seal-secrets` does to values a write has not touched since.
pub async fn reseal_stored(
    sealer: &Sealer,
    table: crate::records::Table,
    fields: &'static [Field],
    item: &mut Item,
) -> Result<Vec<&'static str>, SealError> {
    let (Some(key), Some((field, attribute))) = (Key::of_item(table, item), values_field(fields)) else {
        return Ok(Vec::new());
    };
    let earlier = matches!(item.get(field), Some(Attr::M(members)) if has_earlier_layout(members));
    if !earlier || !matches!(item.get(attribute), Some(Attr::B(_))) {
        return Ok(Vec::new());
    }
    let mut session = Session::new(Some(sealer), fields, key, Budget::start(None));
    let opened = session.open(item).await.map_err(|error| match error {
        Unopened::Seal(error) => error,
        error => SealError::Refused(error.to_string()),
    })?;
    Ok(if session.reseal(&opened, item)? {
        vec![field]
    } else {
        Vec::new()
    })
}

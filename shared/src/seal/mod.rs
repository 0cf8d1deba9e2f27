//! Sealing: a secret field (`api_key`) is encrypted with AWS KMS before it
//! reaches the table, so a reader of the table, its stream or a backup sees
//! only ciphertext.
//!
//! Each value is sealed with one KMS `Encrypt` under the secrets key
//! (`SECRETS_KEY_ID`) and the encryption context [`context`]
//! (`{"field": "api_key", "id": "<record id>"}`), and the `CiphertextBlob`
//! is stored as is, a Binary attribute. Any language opens it with one
//! `Decrypt` call and the same context; a ciphertext copied to another
//! record does not decrypt. A request that sets no secret makes no KMS
//! call, and a function whose records have no secret has no KMS client.

mod kms;
#[cfg(feature = "memory-store")]
mod memory;

use std::time::Duration;

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;

pub use kms::KmsSealer;
#[cfg(feature = "memory-store")]
pub use memory::MemorySealer;

use crate::budget::TIME_BUDGET;
use crate::config::ConfigError;
use crate::item::Item;
use crate::patch::Patch;
use crate::records::Field;

/// The variable naming the secrets key: a key id, key ARN, alias name or
/// alias ARN.
pub const KEY_ID_VAR: &str = "SECRETS_KEY_ID";

/// The encryption context a sealed `field` of record `id` is bound to.
/// KMS authenticates it with the ciphertext: `Decrypt` needs exactly it.
pub fn context<'a>(field: &'a str, id: &'a str) -> [(&'static str, &'a str); 2] {
    [("field", field), ("id", id)]
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
                expected: "set to the KMS key that seals api_key (key id, ARN or alias)",
            })
    }

    /// Encrypts `plaintext`, the value of `field` on record `id`, within
    /// `budget`; returns the ciphertext to store.
    pub async fn seal(
        &self,
        field: &str,
        id: &str,
        plaintext: &[u8],
        budget: Duration,
    ) -> Result<Vec<u8>, SealError> {
        match self {
            Self::Kms(kms) => kms.seal(field, id, plaintext, budget).await,
            #[cfg(feature = "memory-store")]
            Self::Memory(memory) => memory.seal(field, id, plaintext),
        }
    }
}

/// Seals every secret field `set` holds, in place: its text becomes the
/// ciphertext, a Binary attribute. Returns whether anything was sealed
/// (and so whether KMS was called). The fields are `fields` (a record
/// kind's [`crate::Resource::FIELDS`]); `budget` is shared by all calls.
pub async fn seal_secrets(
    sealer: Option<&Sealer>,
    fields: &[Field],
    id: &str,
    set: &mut Patch,
    budget: Duration,
) -> Result<bool, SealError> {
    let started = std::time::Instant::now();
    let mut sealed = false;
    for (name, value) in set.iter_mut() {
        if !fields
            .iter()
            .any(|field| field.name == *name && field.is_sealed())
        {
            continue;
        }
        // Validation only lets a string through for a secret field.
        let AttributeValue::S(plaintext) = &*value else {
            continue;
        };
        let sealer = sealer.ok_or(SealError::NotConfigured)?;
        let remaining = budget.saturating_sub(started.elapsed());
        let ciphertext = sealer.seal(name, id, plaintext.as_bytes(), remaining).await?;
        *value = AttributeValue::B(Blob::new(ciphertext));
        sealed = true;
    }
    Ok(sealed)
}

/// Seals, in place, every secret attribute of a stored `item` (of a record
/// kind with `fields`) that is still plain text (S), as a write that sets it
/// would have; returns the names of those it sealed. An item with no `id`
/// is left as it is. What the sample loader and `seal-api-keys` do.
pub async fn seal_stored(
    sealer: &Sealer,
    fields: &[Field],
    item: &mut Item,
) -> Result<Vec<&'static str>, SealError> {
    let Some(AttributeValue::S(id)) = item.get("id").cloned() else {
        return Ok(Vec::new());
    };
    let mut plain: Patch = fields
        .iter()
        .filter(|field| field.is_sealed())
        .filter_map(|field| match item.get(field.name) {
            Some(value @ AttributeValue::S(_)) => Some((field.name, value.clone())),
            _ => None,
        })
        .collect();
    seal_secrets(Some(sealer), fields, &id, &mut plain, TIME_BUDGET).await?;
    let sealed = plain.iter().map(|(name, _)| *name).collect();
    for (name, value) in plain {
        item.insert(name.to_owned(), value);
    }
    Ok(sealed)
}

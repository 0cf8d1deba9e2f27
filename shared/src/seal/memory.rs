//! A reversible stand-in for KMS in handler tests (feature
//! `memory-store`): it binds each value to its context as KMS does, so a
//! test can open what a handler stored, and it can be told to fail.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use zeroize::Zeroizing;

use super::values::{DataKey, KEY_BYTES};
use super::{EncryptionContext, SealError};

/// What every memory-sealed value starts with.
const MARK: &[u8] = b"memory-sealed:";

/// Seals by masking the value behind its context; counts its calls.
#[derive(Debug, Default)]
pub struct MemorySealer {
    failure: Mutex<Option<SealError>>,
    calls: AtomicUsize,
}

impl MemorySealer {
    /// A sealer that works.
    pub fn new() -> Self {
        Self::default()
    }

    /// From now on every call fails with `failure` (`None`: works again).
    pub fn fail_with(&self, failure: Option<SealError>) {
        *self
            .failure
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = failure;
    }

    /// How many values it was asked to seal.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// Counts a call, and fails it if told to.
    fn call(&self) -> Result<(), SealError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let failure = self
            .failure
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        failure.map_or(Ok(()), Err)
    }

    pub(super) fn seal(
        &self,
        context: EncryptionContext<'_>,
        plaintext: &[u8],
    ) -> Result<Vec<u8>, SealError> {
        self.call()?;
        let mut sealed = [MARK, header(context).as_bytes()].concat();
        sealed.extend(plaintext.iter().map(|byte| byte ^ 0xA5));
        Ok(sealed)
    }

    pub(super) fn new_data_key(&self, context: EncryptionContext<'_>) -> Result<DataKey, SealError> {
        self.call()?;
        let mut plaintext = Zeroizing::new(vec![0; KEY_BYTES]);
        aws_lc_rs::rand::fill(&mut plaintext).map_err(|_| SealError::Refused("no random key".into()))?;
        let mut sealed = [MARK, header(context).as_bytes()].concat();
        sealed.extend(plaintext.iter().map(|byte| byte ^ 0xA5));
        DataKey::new(plaintext, sealed).map_err(|error| SealError::Refused(error.to_string()))
    }

    pub(super) fn open_data_key(
        &self,
        sealed: &[u8],
        context: EncryptionContext<'_>,
    ) -> Result<DataKey, SealError> {
        self.call()?;
        let plaintext = Self::unseal(context, sealed)
            .ok_or_else(|| SealError::Refused("InvalidCiphertextException".into()))?;
        DataKey::new(Zeroizing::new(plaintext), sealed.to_vec())
            .map_err(|error| SealError::Refused(error.to_string()))
    }

    pub(super) fn open(
        &self,
        sealed: &[u8],
        context: EncryptionContext<'_>,
    ) -> Result<Zeroizing<Vec<u8>>, SealError> {
        self.call()?;
        Self::unseal(context, sealed)
            .map(Zeroizing::new)
            .ok_or_else(|| SealError::Refused("InvalidCiphertextException".into()))
    }

    /// The value `sealed` holds if it was sealed under `context`; `None`
    /// for any other context, as KMS's `Decrypt` refuses.
    pub fn unseal(context: EncryptionContext<'_>, sealed: &[u8]) -> Option<Vec<u8>> {
        let rest = sealed.strip_prefix(MARK)?;
        let masked = rest.strip_prefix(header(context).as_bytes())?;
        Some(masked.iter().map(|byte| byte ^ 0xA5).collect())
    }
}

fn header(context: EncryptionContext<'_>) -> String {
    let mut header = String::new();
    for (key, value) in context {
        header.push_str(&format!("{key}={value};"));
    }
    header
}

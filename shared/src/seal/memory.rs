//! A reversible stand-in for KMS in handler tests (feature
//! `memory-store`): it binds each value to its context as KMS does, so a
//! test can open what a handler stored, and it can be told to fail.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{SealError, context};

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

    pub(super) fn seal(&self, field: &str, id: &str, plaintext: &[u8]) -> Result<Vec<u8>, SealError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let failure = self
            .failure
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if let Some(failure) = failure {
            return Err(failure);
        }
        let mut sealed = [MARK, header(field, id).as_bytes()].concat();
        sealed.extend(plaintext.iter().map(|byte| byte ^ 0xA5));
        Ok(sealed)
    }

    /// The value `sealed` holds if it was sealed for `field` of record
    /// `id`; `None` for any other context, as KMS's `Decrypt` refuses.
    pub fn unseal(field: &str, id: &str, sealed: &[u8]) -> Option<Vec<u8>> {
        let rest = sealed.strip_prefix(MARK)?;
        let masked = rest.strip_prefix(header(field, id).as_bytes())?;
        Some(masked.iter().map(|byte| byte ^ 0xA5).collect())
    }
}

fn header(field: &str, id: &str) -> String {
    let mut header = String::new();
    for (key, value) in context(field, id) {
        header.push_str(&format!("{key}={value};"));
    }
    header
}

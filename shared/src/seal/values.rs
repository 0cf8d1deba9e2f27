//! Member values sealed under a record's own data key (envelope
//! encryption): what keeps MCP `headers` values secret at rest while their
//! names stay readable.
//!
//! KMS `Encrypt` takes at most 4,096 bytes and a `headers` map may hold 64
//! values of 8,192 characters, so KMS seals a key, not the values: each
//! record has a data key from KMS `GenerateDataKey` (AES-256) under the
//! secrets key with the encryption context `{"field": "<field>",
//! "project_id": "<project>", "id": "<record id>"}`, stored as KMS returned
//! it (`CiphertextBlob`) beside the map, and each value is sealed with that
//! key here, AES-256-GCM (aws-lc, the TLS library's own crypto):
//!
//! ```text
//! sealed value  = 0x01 || nonce (12 bytes, random) || ciphertext || tag (16 bytes)
//! associated    = 0x01 || field || 0x00 || project_id || 0x00 || id || 0x00 || member name
//! ```
//!
//! (strings as UTF-8; `0x01` is the layout's version). The associated data
//! binds a value to its record and its member's name, so a value moved to
//! another member or another record does not open. docs/secrets.md says the
//! same for consumers in other languages.

use aws_lc_rs::aead::{AES_256_GCM, Aad, NONCE_LEN, Nonce, RandomizedNonceKey};
use zeroize::Zeroizing;

use crate::store::Key;

/// The first byte of every sealed value and of its associated data: the
/// layout's version, so the format can change without guessing.
pub const VERSION: u8 = 1;
/// The bytes of a data key (AES-256).
pub const KEY_BYTES: usize = 32;
/// The bytes of a GCM tag.
const TAG_BYTES: usize = 16;

/// Why a value could not be sealed or opened: never the value, never the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// The data key KMS returned is not an AES-256 key.
    #[error("the data key is not {KEY_BYTES} bytes")]
    BadKey,
    /// The stored bytes are not a value sealed by this layout's version.
    #[error("not a sealed value of layout version {VERSION}")]
    Malformed,
    /// The value does not open under this key and binding: another record's
    /// or member's value, or altered.
    #[error("the value does not open for this record and name")]
    Forged,
    /// The opened value is not UTF-8 text.
    #[error("the opened value is not text")]
    NotText,
    /// The system's random source failed.
    #[error("no random nonce could be drawn")]
    Random,
}

/// A record's data key, open: seals and opens that record's values. Holds
/// the key only inside aws-lc's context (cleared when dropped); its
/// sealed form is what the item stores.
pub struct DataKey {
    key: RandomizedNonceKey,
    sealed: Vec<u8>,
}

impl std::fmt::Debug for DataKey {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key; its sealed form's size says which one it is not.
        formatter
            .debug_struct("DataKey")
            .field("sealed_bytes", &self.sealed.len())
            .finish_non_exhaustive()
    }
}

impl DataKey {
    /// The data key `plaintext` (wiped once read), whose KMS-sealed form is
    /// `sealed`.
    pub fn new(plaintext: Zeroizing<Vec<u8>>, sealed: Vec<u8>) -> Result<Self, ValueError> {
        if plaintext.len() != KEY_BYTES {
            return Err(ValueError::BadKey);
        }
        let key = RandomizedNonceKey::new(&AES_256_GCM, &plaintext).map_err(|_| ValueError::BadKey)?;
        Ok(Self { key, sealed })
    }

    /// The key as KMS sealed it: what the item stores beside the values.
    pub fn sealed(&self) -> &[u8] {
        &self.sealed
    }

    /// Seals `value`, the member `name` of `field` on the record `key`.
    pub fn seal(&self, field: &str, key: &Key, name: &str, value: &str) -> Result<Vec<u8>, ValueError> {
        let mut sealed = Vec::with_capacity(1 + NONCE_LEN + value.len() + TAG_BYTES);
        let mut in_out = value.as_bytes().to_vec();
        let nonce = self
            .key
            .seal_in_place_append_tag(Aad::from(associated(field, key, name)), &mut in_out)
            .map_err(|_| ValueError::Random)?;
        sealed.push(VERSION);
        sealed.extend_from_slice(nonce.as_ref());
        sealed.append(&mut in_out);
        Ok(sealed)
    }

    /// Opens `sealed`, stored as the member `name` of `field` on the record
    /// `key`.
    pub fn open(&self, field: &str, key: &Key, name: &str, sealed: &[u8]) -> Result<String, ValueError> {
        let rest = match sealed.split_first() {
            Some((&VERSION, rest)) if rest.len() >= NONCE_LEN + TAG_BYTES => rest,
            _ => return Err(ValueError::Malformed),
        };
        let (nonce, ciphertext) = rest.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| ValueError::Malformed)?;
        let mut in_out = ciphertext.to_vec();
        let opened = self
            .key
            .open_in_place(nonce, Aad::from(associated(field, key, name)), &mut in_out)
            .map_err(|_| ValueError::Forged)?;
        let length = opened.len();
        in_out.truncate(length);
        String::from_utf8(in_out).map_err(|_| ValueError::NotText)
    }
}

/// The associated data of member `name` of `field` on the record `key`.
/// NUL separates the parts: no UUID, field name or header name holds one.
fn associated(field: &str, key: &Key, name: &str) -> Vec<u8> {
    let project = key.project_id.as_deref().unwrap_or_default();
    let mut data = Vec::with_capacity(4 + field.len() + project.len() + key.id.len() + name.len());
    data.push(VERSION);
    for (index, part) in [field, project, &key.id, name].into_iter().enumerate() {
        if index > 0 {
            data.push(0);
        }
        data.extend_from_slice(part.as_bytes());
    }
    data
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(project: &str, id: &str) -> Key {
        Key {
            project_id: Some(project.into()),
            id: id.into(),
        }
    }

    fn data_key(byte: u8) -> DataKey {
        DataKey::new(Zeroizing::new(vec![byte; KEY_BYTES]), vec![byte]).unwrap()
    }

    #[test]
    fn a_value_opens_only_for_its_record_name_and_key() {
        let key = data_key(7);
        let here = record("p", "r");
        let sealed = key
            .seal("headers", &here, "Authorization", "Bearer SENTINEL")
            .unwrap_or_default();
        assert_eq!(sealed[0], VERSION);
        assert_eq!(sealed.len(), 1 + NONCE_LEN + "Bearer SENTINEL".len() + TAG_BYTES);
        assert!(!sealed.windows(8).any(|w| w == b"SENTINEL"));
        assert_eq!(
            key.open("headers", &here, "Authorization", &sealed),
            Ok("Bearer SENTINEL".into())
        );
        // Another name (case counts: the name is stored as written), record,
        // project, field or key: nothing opens.
        for (field, at, name) in [
            ("headers", record("p", "r"), "authorization"),
            ("headers", record("p", "r"), "X-Api-Key"),
            ("headers", record("p", "other"), "Authorization"),
            ("headers", record("other", "r"), "Authorization"),
            ("parameters", record("p", "r"), "Authorization"),
            // The parts cannot slide into each other across the separators.
            ("headers", record("p\0r", ""), "Authorization"),
        ] {
            assert_eq!(
                key.open(field, &at, name, &sealed),
                Err(ValueError::Forged),
                "{field} {at:?} {name}"
            );
        }
        assert_eq!(
            data_key(8).open("headers", &here, "Authorization", &sealed),
            Err(ValueError::Forged)
        );
    }

    #[test]
    fn nonces_are_fresh_and_damage_is_detected() {
        let key = data_key(1);
        let here = record("p", "r");
        let first = key.seal("headers", &here, "A", "same").unwrap_or_default();
        let second = key.seal("headers", &here, "A", "same").unwrap_or_default();
        assert_ne!(first, second, "a nonce was reused");
        for index in 0..first.len() {
            let mut damaged = first.clone();
            damaged[index] ^= 1;
            assert!(key.open("headers", &here, "A", &damaged).is_err(), "byte {index}");
        }
        for short in [&[][..], &[VERSION][..], &first[..first.len() - 1]] {
            assert!(key.open("headers", &here, "A", short).is_err());
        }
        assert_eq!(
            key.open("headers", &here, "A", &[2; 40]),
            Err(ValueError::Malformed)
        );
        // An empty value seals and opens too.
        let empty = key.seal("headers", &here, "A", "").unwrap_or_default();
        assert_eq!(key.open("headers", &here, "A", &empty), Ok(String::new()));
    }

    #[test]
    fn a_key_must_be_256_bits_and_never_shows() {
        assert!(DataKey::new(Zeroizing::new(vec![0; 16]), vec![]).is_err());
        let shown = format!("{:?}", data_key(0x5a));
        assert!(!shown.contains("90") && !shown.contains("5a"), "{shown}");
    }
}

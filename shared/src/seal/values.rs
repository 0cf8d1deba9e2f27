//! Member values sealed under a record's own data key (envelope
//! encryption): what keeps MCP `headers` values secret at rest while their
//! names stay readable. Each write seals its values (at most 64) under a key
//! of its own, HKDF-SHA256 of the data key and a random salt, AES-256-GCM.
//! The byte layouts (2, and 1 still opened) and why: docs/secrets.md, How an
//! MCP header value is stored.

use aws_lc_rs::aead::{AES_256_GCM, Aad, NONCE_LEN, Nonce, RandomizedNonceKey};
use aws_lc_rs::hkdf::{HKDF_SHA256, Salt};
use zeroize::Zeroizing;

use crate::store::Key;

/// The layout every value is sealed in now: its first byte, and the first
/// byte of its associated data.
pub const VERSION: u8 = 2;
/// The layout written before, sealed under the data key itself: still
/// opened, re-sealed in [`VERSION`] by the next write that sets the values.
pub const FIRST_VERSION: u8 = 1;
/// The bytes of a data key (AES-256).
pub const KEY_BYTES: usize = 32;
/// The bytes of a write's random salt.
pub const SALT_BYTES: usize = 32;
/// HKDF's `info` for a write key.
pub const WRITE_KEY_INFO: &[u8] = b"agent-server sealed values v2";
/// The bytes of a GCM tag.
const TAG_BYTES: usize = 16;

/// Why a value could not be sealed or opened: never the value, never the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// The data key KMS returned is not an AES-256 key.
    #[error("the data key is not {KEY_BYTES} bytes")]
    BadKey,
    /// The stored bytes are not a value sealed in a known layout.
    #[error("not a sealed value of layout version {FIRST_VERSION} or {VERSION}")]
    Malformed,
    /// The value does not open under this key and binding: another record's
    /// or member's value, or altered.
    #[error("the value does not open for this record and name")]
    Forged,
    /// The opened value is not UTF-8 text.
    #[error("the opened value is not text")]
    NotText,
    /// The system's random source failed.
    #[error("no random salt or nonce could be drawn")]
    Random,
}

/// A record's data key, open: derives each write's key, and opens the
/// record's values. The plaintext is wiped when dropped; its sealed form
/// is what the item stores.
pub struct DataKey {
    plaintext: Zeroizing<Vec<u8>>,
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

/// The key one write seals its values with, derived from the record's data
/// key and a fresh salt ([`DataKey::for_write`]).
pub struct WriteKey {
    salt: [u8; SALT_BYTES],
    key: RandomizedNonceKey,
}

impl std::fmt::Debug for WriteKey {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("WriteKey").finish_non_exhaustive()
    }
}

impl DataKey {
    /// The data key `plaintext` (wiped once dropped), whose KMS-sealed form
    /// is `sealed`.
    pub fn new(plaintext: Zeroizing<Vec<u8>>, sealed: Vec<u8>) -> Result<Self, ValueError> {
        if plaintext.len() != KEY_BYTES {
            return Err(ValueError::BadKey);
        }
        Ok(Self { plaintext, sealed })
    }

    /// The key as KMS sealed it: what the item stores beside the values.
    pub fn sealed(&self) -> &[u8] {
        &self.sealed
    }

    /// A new key for one write's values, under a fresh random salt.
    pub fn for_write(&self) -> Result<WriteKey, ValueError> {
        let mut salt = [0; SALT_BYTES];
        aws_lc_rs::rand::fill(&mut salt).map_err(|_| ValueError::Random)?;
        Ok(WriteKey {
            key: self.derived(&salt)?,
            salt,
        })
    }

    /// The write key of `salt`.
    fn derived(&self, salt: &[u8]) -> Result<RandomizedNonceKey, ValueError> {
        let mut bytes = Zeroizing::new([0; KEY_BYTES]);
        Salt::new(HKDF_SHA256, salt)
            .extract(&self.plaintext)
            .expand(&[WRITE_KEY_INFO], HKDF_SHA256)
            .and_then(|okm| okm.fill(bytes.as_mut()))
            .map_err(|_| ValueError::BadKey)?;
        RandomizedNonceKey::new(&AES_256_GCM, bytes.as_ref()).map_err(|_| ValueError::BadKey)
    }

    /// Opens `sealed`, stored as the member `name` of `field` on the record
    /// `key`, in either layout.
    pub fn open(&self, field: &str, key: &Key, name: &str, sealed: &[u8]) -> Result<String, ValueError> {
        let (layout, key_bytes, rest) = match sealed.split_first() {
            Some((&VERSION, rest)) if rest.len() >= SALT_BYTES + NONCE_LEN + TAG_BYTES => {
                let (salt, rest) = rest.split_at(SALT_BYTES);
                (VERSION, self.derived(salt)?, rest)
            }
            Some((&FIRST_VERSION, rest)) if rest.len() >= NONCE_LEN + TAG_BYTES => (
                FIRST_VERSION,
                RandomizedNonceKey::new(&AES_256_GCM, &self.plaintext).map_err(|_| ValueError::BadKey)?,
                rest,
            ),
            _ => return Err(ValueError::Malformed),
        };
        let (nonce, ciphertext) = rest.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| ValueError::Malformed)?;
        let mut in_out = ciphertext.to_vec();
        let opened = key_bytes
            .open_in_place(
                nonce,
                Aad::from(associated(layout, field, key, name)),
                &mut in_out,
            )
            .map_err(|_| ValueError::Forged)?;
        let length = opened.len();
        in_out.truncate(length);
        String::from_utf8(in_out).map_err(|_| ValueError::NotText)
    }
}

impl WriteKey {
    /// Seals `value`, the member `name` of `field` on the record `key`.
    pub fn seal(&self, field: &str, key: &Key, name: &str, value: &str) -> Result<Vec<u8>, ValueError> {
        let mut in_out = value.as_bytes().to_vec();
        let nonce = self
            .key
            .seal_in_place_append_tag(Aad::from(associated(VERSION, field, key, name)), &mut in_out)
            .map_err(|_| ValueError::Random)?;
        let mut sealed = Vec::with_capacity(1 + SALT_BYTES + NONCE_LEN + in_out.len());
        sealed.push(VERSION);
        sealed.extend_from_slice(&self.salt);
        sealed.extend_from_slice(nonce.as_ref());
        sealed.append(&mut in_out);
        Ok(sealed)
    }
}

/// The associated data of member `name` of `field` on the record `key`, in
/// `layout`. NUL separates the parts: no UUID, field name or header name
/// holds one.
fn associated(layout: u8, field: &str, key: &Key, name: &str) -> Vec<u8> {
    let project = key.project_id.as_deref().unwrap_or_default();
    let mut data = Vec::with_capacity(4 + field.len() + project.len() + key.id.len() + name.len());
    data.push(layout);
    for (index, part) in [field, project, &key.id, name].into_iter().enumerate() {
        if index > 0 {
            data.push(0);
        }
        data.extend_from_slice(part.as_bytes());
    }
    data
}

/// A value sealed in layout 1 (under the data key itself, as written
/// before layout 2): what tests and the migration's tests start from.
pub fn seal_first_layout(
    data_key: &DataKey,
    field: &str,
    key: &Key,
    name: &str,
    value: &str,
) -> Result<Vec<u8>, ValueError> {
    let sealer =
        RandomizedNonceKey::new(&AES_256_GCM, &data_key.plaintext).map_err(|_| ValueError::BadKey)?;
    let mut in_out = value.as_bytes().to_vec();
    let nonce = sealer
        .seal_in_place_append_tag(
            Aad::from(associated(FIRST_VERSION, field, key, name)),
            &mut in_out,
        )
        .map_err(|_| ValueError::Random)?;
    let mut sealed = vec![FIRST_VERSION];
    sealed.extend_from_slice(nonce.as_ref());
    sealed.append(&mut in_out);
    Ok(sealed)
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
            .for_write()
            .and_then(|write| write.seal("headers", &here, "Authorization", "Bearer SENTINEL"))
            .unwrap_or_default();
        assert_eq!(sealed[0], VERSION);
        assert_eq!(
            sealed.len(),
            1 + SALT_BYTES + NONCE_LEN + "Bearer SENTINEL".len() + TAG_BYTES
        );
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
    fn each_write_has_its_own_key_and_damage_is_detected() {
        let key = data_key(1);
        let here = record("p", "r");
        let write = key.for_write().unwrap();
        let first = write.seal("headers", &here, "A", "same").unwrap_or_default();
        let second = write.seal("headers", &here, "A", "same").unwrap_or_default();
        assert_ne!(first, second, "a nonce was reused");
        // One write's values share its salt; another write draws another.
        assert_eq!(first[1..=SALT_BYTES], second[1..=SALT_BYTES]);
        let other = key
            .for_write()
            .unwrap()
            .seal("headers", &here, "A", "same")
            .unwrap_or_default();
        assert_ne!(first[1..=SALT_BYTES], other[1..=SALT_BYTES], "a salt was reused");
        // A value whose salt was swapped for another write's does not open.
        let mut swapped = first.clone();
        swapped[1..=SALT_BYTES].copy_from_slice(&other[1..=SALT_BYTES]);
        assert_eq!(key.open("headers", &here, "A", &swapped), Err(ValueError::Forged));
        for index in 0..first.len() {
            let mut damaged = first.clone();
            damaged[index] ^= 1;
            assert!(key.open("headers", &here, "A", &damaged).is_err(), "byte {index}");
        }
        for short in [&[][..], &[VERSION][..], &first[..first.len() - 1], &first[..60]] {
            assert!(key.open("headers", &here, "A", short).is_err());
        }
        assert_eq!(
            key.open("headers", &here, "A", &[3; 80]),
            Err(ValueError::Malformed)
        );
        // An empty value seals and opens too.
        let empty = write.seal("headers", &here, "A", "").unwrap_or_default();
        assert_eq!(key.open("headers", &here, "A", &empty), Ok(String::new()));
    }

    #[test]
    fn the_first_layout_still_opens_and_layouts_do_not_mix() {
        let key = data_key(4);
        let here = record("p", "r");
        let old = seal_first_layout(&key, "headers", &here, "A", "legacy").unwrap_or_default();
        assert_eq!(old[0], FIRST_VERSION);
        assert_eq!(key.open("headers", &here, "A", &old), Ok("legacy".into()));
        assert_eq!(key.open("headers", &here, "B", &old), Err(ValueError::Forged));
        // The layout byte is bound too: a layout-1 body relabelled 2 (or the
        // reverse) does not open.
        let mut relabelled = old.clone();
        relabelled[0] = VERSION;
        assert!(key.open("headers", &here, "A", &relabelled).is_err());
        let new = key
            .for_write()
            .unwrap()
            .seal("headers", &here, "A", "v")
            .unwrap_or_default();
        let mut relabelled = new.clone();
        relabelled[0] = FIRST_VERSION;
        assert!(key.open("headers", &here, "A", &relabelled).is_err());
    }

    #[test]
    fn a_key_must_be_256_bits_and_never_shows() {
        assert!(DataKey::new(Zeroizing::new(vec![0; 16]), vec![]).is_err());
        let shown = format!("{:?}", data_key(0x5a));
        assert!(!shown.contains("90") && !shown.contains("5a"), "{shown}");
    }
}

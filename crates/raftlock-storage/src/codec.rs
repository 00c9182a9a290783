//! On-disk encoding: bincode values, and the seal of sled values.
//!
//! Values are bincode 1.3 with fixed-width
//! integers (the layout of `bincode::serialize`), decoded with a byte limit
//! equal to the input length, so a corrupt length prefix yields an error
//! instead of a huge allocation.
//!
//! Every value stored in sled is *sealed*: a CRC32 (IEEE, `crc32fast`,
//! little-endian) of the key followed by the payload, then the payload.
//! Covering the key catches a value found under another key; the check
//! runs on every read, so corrupt bytes are never decoded, let alone served.

use bincode::Options;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::StoreError;

/// Bytes of the checksum in front of every stored value.
pub(crate) const SEAL_LEN: usize = 4;

/// A stored value whose checksum does not match (or that is too short to
/// hold one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BadSeal {
    /// The checksum stored in front of the value (`None`: too short).
    pub(crate) stored: Option<u32>,
    /// The checksum of what follows it.
    pub(crate) computed: u32,
}

impl std::fmt::Display for BadSeal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.stored {
            Some(stored) => write!(
                f,
                "checksum mismatch (stored {stored:#010x}, computed {:#010x})",
                self.computed
            ),
            None => write!(f, "too short to hold its checksum"),
        }
    }
}

fn checksum(key: &[u8], payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(key);
    hasher.update(payload);
    hasher.finalize()
}

/// `payload` with its checksum (over `key` and `payload`) in front.
pub(crate) fn seal(key: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(SEAL_LEN + payload.len());
    out.extend_from_slice(&checksum(key, payload).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// The payload of a value [`seal`]ed under `key`, if its checksum holds.
pub(crate) fn unseal<'a>(key: &[u8], stored: &'a [u8]) -> Result<&'a [u8], BadSeal> {
    let Some((sum, payload)) = stored.split_first_chunk::<SEAL_LEN>() else {
        return Err(BadSeal {
            stored: None,
            computed: 0,
        });
    };
    let stored = u32::from_le_bytes(*sum);
    let computed = checksum(key, payload);
    if stored == computed {
        Ok(payload)
    } else {
        Err(BadSeal {
            stored: Some(stored),
            computed,
        })
    }
}

/// Serializes `value` and seals it under `key`.
pub(crate) fn encode_sealed<T: Serialize>(
    what: &'static str,
    key: &[u8],
    value: &T,
) -> Result<Vec<u8>, StoreError> {
    Ok(seal(key, &encode(what, value)?))
}

/// Checks the seal of a value stored under `key`, then decodes it.
pub(crate) fn decode_sealed<T: DeserializeOwned>(
    what: &'static str,
    key: &[u8],
    stored: &[u8],
) -> Result<T, StoreError> {
    let payload = unseal(key, stored).map_err(|seal| StoreError::Checksum {
        what,
        detail: seal.to_string(),
    })?;
    decode(what, payload)
}

/// The bincode configuration shared by encode and decode: fixed-width
/// integers (as `bincode::serialize`), trailing bytes rejected (they can only
/// mean corruption).
fn options() -> impl Options {
    bincode::DefaultOptions::new().with_fixint_encoding()
}

/// Serializes `value`; `what` names it in the error.
pub(crate) fn encode<T: Serialize>(what: &'static str, value: &T) -> Result<Vec<u8>, StoreError> {
    options()
        .serialize(value)
        .map_err(|source| StoreError::Encode { what, source })
}

/// Deserializes bytes read from disk; `what` names the value in the error.
pub(crate) fn decode<T: DeserializeOwned>(
    what: &'static str,
    bytes: &[u8],
) -> Result<T, StoreError> {
    decode_raw(bytes).map_err(|source| StoreError::Decode { what, source })
}

/// [`decode`] for callers that build their own error (log entries report
/// their index).
pub(crate) fn decode_raw<T: DeserializeOwned>(bytes: &[u8]) -> bincode::Result<T> {
    options().with_limit(bytes.len() as u64).deserialize(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_bincode_serialize() {
        let v = (7u64, String::from("x"), vec![1u32, 2]);
        assert_eq!(encode("t", &v).unwrap(), bincode::serialize(&v).unwrap());
    }

    #[test]
    fn seals_catch_flipped_bits_short_values_and_other_keys() {
        let sealed = encode_sealed("t", b"k", &(1u64, 2u64)).unwrap();
        assert_eq!(
            decode_sealed::<(u64, u64)>("t", b"k", &sealed).unwrap(),
            (1, 2)
        );
        for bit in 0..sealed.len() * 8 {
            let mut bad = sealed.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(unseal(b"k", &bad).is_err(), "bit {bit}");
        }
        assert!(unseal(b"other", &sealed).is_err());
        assert!(unseal(b"k", &sealed[..3]).is_err());
        assert!(unseal(b"k", &sealed[..5]).is_err());
    }

    #[test]
    fn corrupt_bytes_are_errors_not_panics() {
        // A length prefix claiming 2^64-1 bytes must not allocate.
        let bogus = [0xffu8; 16];
        assert!(decode::<String>("s", &bogus).is_err());
        assert!(decode::<Vec<u64>>("v", &bogus).is_err());
        // Truncated and trailing input.
        let good = encode("t", &(1u64, 2u64)).unwrap();
        assert!(decode::<(u64, u64)>("t", &good[..10]).is_err());
        let mut long = good.clone();
        long.push(0);
        assert!(decode::<(u64, u64)>("t", &long).is_err());
    }
}

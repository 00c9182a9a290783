//! On-disk encoding: log keys and bincode values.
//!
//! Log keys are the entry index as 8 big-endian bytes, so sled's
//! lexicographic key order is numeric order and range scans, `last()` and
//! prefix deletions need no decoding. Values are bincode 1.3 with fixed-width
//! integers (the layout of `bincode::serialize`), decoded with a byte limit
//! equal to the input length, so a corrupt length prefix yields an error
//! instead of a huge allocation.

use bincode::Options;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::StoreError;

/// Key under which the entry with `index` is stored.
pub(crate) fn index_key(index: u64) -> [u8; 8] {
    index.to_be_bytes()
}

/// Inverse of [`index_key`]; any other key length is corruption.
pub(crate) fn key_index(key: &[u8]) -> Result<u64, StoreError> {
    let bytes: [u8; 8] = key
        .try_into()
        .map_err(|_| StoreError::CorruptKey { len: key.len() })?;
    Ok(u64::from_be_bytes(bytes))
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
    fn keys_sort_numerically() {
        let mut keys: Vec<[u8; 8]> = [300u64, 2, 1 << 40, 0, 255, 256]
            .iter()
            .map(|i| index_key(*i))
            .collect();
        keys.sort();
        let back: Vec<u64> = keys.iter().map(|k| key_index(k).unwrap()).collect();
        assert_eq!(back, vec![0, 2, 255, 256, 300, 1 << 40]);
    }

    #[test]
    fn short_key_is_an_error() {
        assert!(matches!(
            key_index(&[1, 2, 3]),
            Err(StoreError::CorruptKey { len: 3 })
        ));
    }

    #[test]
    fn layout_matches_bincode_serialize() {
        let v = (7u64, String::from("x"), vec![1u32, 2]);
        assert_eq!(encode("t", &v).unwrap(), bincode::serialize(&v).unwrap());
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

//! Versioned snapshot encoding: `RLSM`, a little-endian u32 format
//! version, then the state in bincode 1. Ordered maps make the bytes a
//! function of the state alone, so equal states give equal snapshots.

use crate::state::StateMachine;

const MAGIC: &[u8; 4] = b"RLSM";
/// Format written by this build. Bump it (and keep a reader for the old
/// one) whenever the encoded state changes shape.
pub const SNAPSHOT_FORMAT: u32 = 1;

/// Why snapshot bytes could not become a state.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("not a raftlock snapshot (bad magic bytes)")]
    BadMagic,
    #[error("snapshot format {0} is not supported by this build (it reads {SNAPSHOT_FORMAT})")]
    UnsupportedFormat(u32),
    #[error("snapshot could not be encoded: {0}")]
    Encode(String),
    #[error("snapshot could not be decoded: {0}")]
    Decode(String),
    #[error("snapshot decoded to an inconsistent state: {0}")]
    Inconsistent(String),
}

impl StateMachine {
    /// Encodes the whole state.
    pub fn to_snapshot(&self) -> Result<Vec<u8>, SnapshotError> {
        let body = bincode::serialize(self).map_err(|e| SnapshotError::Encode(e.to_string()))?;
        let mut bytes = Vec::with_capacity(8 + body.len());
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&SNAPSHOT_FORMAT.to_le_bytes());
        bytes.extend_from_slice(&body);
        Ok(bytes)
    }

    /// Decodes a snapshot and checks the state's invariants, so corrupt
    /// but decodable bytes are refused instead of serving wrong answers.
    pub fn from_snapshot(bytes: &[u8]) -> Result<Self, SnapshotError> {
        let rest = bytes.strip_prefix(MAGIC).ok_or(SnapshotError::BadMagic)?;
        let (version, body) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| SnapshotError::Decode("truncated header".into()))?;
        let version = u32::from_le_bytes(*version);
        if version != SNAPSHOT_FORMAT {
            return Err(SnapshotError::UnsupportedFormat(version));
        }
        let state: StateMachine =
            bincode::deserialize(body).map_err(|e| SnapshotError::Decode(e.to_string()))?;
        state
            .check_invariants()
            .map_err(SnapshotError::Inconsistent)?;
        Ok(state)
    }
}

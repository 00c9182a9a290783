//! Versioned snapshot encoding: `RLSM`, a little-endian u32 format
//! version, then the state in bincode 1. Ordered maps make the bytes a
//! function of the state alone, so equal states give equal snapshots.
//!
//! Formats: 1, the first; 2 adds each session's `principal` (the bearer
//! token that opened it, docs/security.md); 3 appends the locks'
//! lock-delays (`lock_delay.rs`). This build writes 3 and reads all
//! three, so a member upgraded in place restarts from its old snapshot and
//! a backup taken before the upgrade still restores; a format-1 session
//! has no principal, and a format-1 or 2 state has no lock-delays (and so
//! no held-off lock).

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::node_set::NodeSet;
use crate::queue::LockQueue;
use crate::state::StateMachine;
use crate::types::{Node, Session, SessionId};

const MAGIC: &[u8; 4] = b"RLSM";
/// Format written by this build. Bump it (and keep a reader for the old
/// one) whenever the encoded state changes shape.
pub const SNAPSHOT_FORMAT: u32 = 3;

/// The state as format 2 encoded it: no lock-delays.
#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
struct StateV2 {
    revision: u64,
    nodes: BTreeMap<Box<str>, Node>,
    sessions: BTreeMap<SessionId, Session>,
    queues: BTreeMap<Box<str>, LockQueue>,
}

impl From<StateV2> for StateMachine {
    fn from(old: StateV2) -> Self {
        StateMachine {
            revision: old.revision,
            nodes: old.nodes,
            sessions: old.sessions,
            queues: old.queues,
            lock_delays: BTreeMap::new(),
        }
    }
}

/// The state as format 1 encoded it: sessions without a principal.
/// Field order is the encoding (bincode), so it mirrors `StateMachine`.
#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
struct StateV1 {
    revision: u64,
    nodes: BTreeMap<Box<str>, Node>,
    sessions: BTreeMap<SessionId, SessionV1>,
    queues: BTreeMap<Box<str>, LockQueue>,
}

/// A format-1 session: `Session` up to, without, `principal`.
#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
struct SessionV1 {
    owner: Box<str>,
    ttl_ms: u64,
    nodes: NodeSet,
    checkpoint_remaining_ms: Option<u64>,
}

impl From<StateV1> for StateMachine {
    fn from(old: StateV1) -> Self {
        let sessions = old
            .sessions
            .into_iter()
            .map(|(id, s)| {
                let session = Session {
                    owner: s.owner,
                    ttl_ms: s.ttl_ms,
                    nodes: s.nodes,
                    checkpoint_remaining_ms: s.checkpoint_remaining_ms,
                    principal: None,
                };
                (id, session)
            })
            .collect();
        StateMachine {
            revision: old.revision,
            nodes: old.nodes,
            sessions,
            queues: old.queues,
            lock_delays: BTreeMap::new(),
        }
    }
}

/// Why snapshot bytes could not become a state.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// The bytes do not start with a raftlock snapshot's magic number.
    #[error("not a raftlock snapshot (bad magic bytes)")]
    BadMagic,
    /// Written by a newer build, in a format this one cannot read.
    #[error(
        "snapshot format {0} is not supported by this build (it reads 1 to {SNAPSHOT_FORMAT})"
    )]
    UnsupportedFormat(u32),
    /// Serializing the state failed (a bug: every state encodes).
    #[error("snapshot could not be encoded: {0}")]
    Encode(String),
    /// The bytes are truncated or corrupt.
    #[error("snapshot could not be decoded: {0}")]
    Decode(String),
    /// Decoded, but breaks an invariant (e.g. a node owned by an unknown
    /// session), so it is refused rather than served.
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
        let decode_error = |e: bincode::Error| SnapshotError::Decode(e.to_string());
        let state: StateMachine = match u32::from_le_bytes(*version) {
            1 => bincode::deserialize::<StateV1>(body)
                .map_err(decode_error)?
                .into(),
            2 => bincode::deserialize::<StateV2>(body)
                .map_err(decode_error)?
                .into(),
            SNAPSHOT_FORMAT => bincode::deserialize(body).map_err(decode_error)?,
            other => return Err(SnapshotError::UnsupportedFormat(other)),
        };
        state
            .check_invariants()
            .map_err(SnapshotError::Inconsistent)?;
        Ok(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Command;
    use crate::types::QueueKind;

    /// A state with a lock holder, a waiter and an ephemeral node.
    fn state(principal: Option<&str>) -> StateMachine {
        let mut sm = StateMachine::new();
        for id in [SessionId(1), SessionId(2)] {
            let open = match principal {
                None => Command::OpenSession {
                    id,
                    owner: "w".into(),
                    ttl_ms: 5_000,
                },
                Some(p) => Command::OpenSessionAs {
                    id,
                    principal: p.into(),
                    owner: "w".into(),
                    ttl_ms: 5_000,
                },
            };
            assert!(sm.apply(&open).result.is_ok());
            let acquire = Command::Acquire {
                kind: QueueKind::Lock,
                name: "a/b".into(),
                session: id,
                data: vec![],
                wait: true,
            };
            assert!(sm.apply(&acquire).result.is_ok());
        }
        sm
    }

    /// Encodes `sm` as format 1 did (it must have no principals).
    fn format_1(sm: &StateMachine) -> Vec<u8> {
        let old = StateV1 {
            revision: sm.revision,
            nodes: sm.nodes.clone(),
            sessions: sm
                .sessions
                .iter()
                .map(|(id, s)| {
                    assert!(s.principal.is_none());
                    let v1 = SessionV1 {
                        owner: s.owner.clone(),
                        ttl_ms: s.ttl_ms,
                        nodes: s.nodes.clone(),
                        checkpoint_remaining_ms: s.checkpoint_remaining_ms,
                    };
                    (*id, v1)
                })
                .collect(),
            queues: sm.queues.clone(),
        };
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&1u32.to_le_bytes());
        bytes.extend(bincode::serialize(&old).expect("encode v1"));
        bytes
    }

    /// Encodes `sm` as format 2 did (it must have no lock-delays).
    fn format_2(sm: &StateMachine) -> Vec<u8> {
        assert!(sm.lock_delays.is_empty());
        let old = StateV2 {
            revision: sm.revision,
            nodes: sm.nodes.clone(),
            sessions: sm.sessions.clone(),
            queues: sm.queues.clone(),
        };
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&2u32.to_le_bytes());
        bytes.extend(bincode::serialize(&old).expect("encode v2"));
        bytes
    }

    #[test]
    fn format_2_still_decodes_without_lock_delays() {
        let sm = state(Some("billing-jobs"));
        let old = format_2(&sm);
        // The old encoding really is shorter: the empty map's length.
        assert_eq!(old.len() + 8, sm.to_snapshot().expect("encode").len());
        let back = StateMachine::from_snapshot(&old).expect("decode v2");
        assert_eq!(back, sm);
    }

    #[test]
    fn format_3_round_trips_a_held_off_lock() {
        let mut sm = state(None);
        for id in [SessionId(7), SessionId(8)] {
            let open = Command::OpenSession {
                id,
                owner: "d".into(),
                ttl_ms: 5_000,
            };
            assert!(sm.apply(&open).result.is_ok());
            let acquire = Command::AcquireWithDelay {
                name: "delayed".into(),
                session: id,
                wait: true,
                lock_delay_ms: 2_500,
            };
            assert!(sm.apply(&acquire).result.is_ok());
        }
        let expired = sm.apply(&Command::ExpireSession { id: SessionId(7) });
        assert_eq!(expired.effects.held_off.len(), 1);
        let bytes = sm.to_snapshot().expect("encode");
        assert_eq!(bytes[4..8], 3u32.to_le_bytes());
        let back = StateMachine::from_snapshot(&bytes).expect("decode");
        assert_eq!(back, sm);
        assert_eq!(back.held_off(), sm.held_off());
        assert_eq!(back.lock_delay("delayed"), 2_500);
    }

    #[test]
    fn format_3_round_trips_principals() {
        let sm = state(Some("billing-jobs"));
        let bytes = sm.to_snapshot().expect("encode");
        assert_eq!(bytes[4..8], 3u32.to_le_bytes());
        let back = StateMachine::from_snapshot(&bytes).expect("decode");
        assert_eq!(back, sm);
        assert_eq!(
            back.session_principal(SessionId(1)),
            Some(Some("billing-jobs"))
        );
    }

    #[test]
    fn format_1_still_decodes_without_principals() {
        let sm = state(None);
        let old = format_1(&sm);
        // The old encoding really is shorter: one `None` per session less,
        // and no lock-delay map (its 8-byte length).
        assert_eq!(old.len() + 2 + 8, sm.to_snapshot().expect("encode").len());
        let back = StateMachine::from_snapshot(&old).expect("decode v1");
        assert_eq!(back, sm);
        assert_eq!(back.session_principal(SessionId(2)), Some(None));
    }

    #[test]
    fn unknown_formats_are_refused() {
        let mut bytes = state(None).to_snapshot().expect("encode");
        bytes[4..8].copy_from_slice(&4u32.to_le_bytes());
        assert!(matches!(
            StateMachine::from_snapshot(&bytes),
            Err(SnapshotError::UnsupportedFormat(4))
        ));
    }
}

//! Versioned snapshot encoding: `RLSM`, a little-endian u32 format
//! version, then the state in bincode 1. Ordered maps make the bytes a
//! function of the state alone, so equal states give equal snapshots.
//!
//! Formats: 1, the first; 2 adds each session's `principal` (the bearer
//! token that opened it, docs/security.md); 3 appends the locks'
//! lock-delays (`lock_delay.rs`); 4 appends each node's `meta` (times,
//! child and ACL versions) and the state's clock. This build writes 4 and
//! reads all four, so a member upgraded in place restarts from its old
//! snapshot and a backup taken before the upgrade still restores; a
//! format-1 session has no principal, a format-1 or 2 state has no
//! lock-delays (and so no held-off lock), and a node from formats 1 to 3
//! gets times 0, its mod revision as child revision and its sequence
//! counter as child version (so strict sequential names continue above
//! the ones already given). Format 5 appends the etcd-style key space
//! (`kv/`: keys, their lease index and the kept history); a state from
//! formats 1 to 4 has no keys. Format 6 appends each node's stored ACL
//! (`Node::acl`); a node from formats 1 to 5 has none, which reads as
//! the open ACL, as those builds answered.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::kv::KvStore;
use crate::node_set::NodeSet;
use crate::queue::LockQueue;
use crate::state::StateMachine;
use crate::types::{Node, NodeMeta, Session, SessionId};

const MAGIC: &[u8; 4] = b"RLSM";
/// Format written by this build. Bump it (and keep a reader for the old
/// one) whenever the encoded state changes shape.
pub const SNAPSHOT_FORMAT: u32 = 6;

/// A node as formats 4 and 5 encoded it: `Node` without `acl`.
#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
struct NodeV5 {
    data: Box<[u8]>,
    version: u64,
    create_revision: u64,
    mod_revision: u64,
    ephemeral_owner: Option<SessionId>,
    next_child_sequence: u64,
    meta: NodeMeta,
}

impl From<NodeV5> for Node {
    fn from(old: NodeV5) -> Self {
        Node {
            data: old.data,
            version: old.version,
            create_revision: old.create_revision,
            mod_revision: old.mod_revision,
            ephemeral_owner: old.ephemeral_owner,
            next_child_sequence: old.next_child_sequence,
            meta: old.meta,
            acl: None,
        }
    }
}

/// A node as formats 1 to 3 encoded it: `Node` without `meta`.
#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
struct NodeV3 {
    data: Box<[u8]>,
    version: u64,
    create_revision: u64,
    mod_revision: u64,
    ephemeral_owner: Option<SessionId>,
    next_child_sequence: u64,
}

impl From<NodeV3> for Node {
    fn from(old: NodeV3) -> Self {
        let meta = NodeMeta {
            child_revision: old.mod_revision,
            child_version: u32::try_from(old.next_child_sequence).unwrap_or(u32::MAX),
            ..NodeMeta::default()
        };
        NodeV5 {
            data: old.data,
            version: old.version,
            create_revision: old.create_revision,
            mod_revision: old.mod_revision,
            ephemeral_owner: old.ephemeral_owner,
            next_child_sequence: old.next_child_sequence,
            meta,
        }
        .into()
    }
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

impl From<SessionV1> for Session {
    fn from(old: SessionV1) -> Self {
        Session {
            owner: old.owner,
            ttl_ms: old.ttl_ms,
            nodes: old.nodes,
            checkpoint_remaining_ms: old.checkpoint_remaining_ms,
            principal: None,
        }
    }
}

type LockDelays = BTreeMap<Box<str>, u64>;

/// A state as an older format encoded it: the fields every format begins
/// with, in `StateMachine`'s order, then `rest`, the format's later fields
/// as a tuple. bincode writes a struct or a tuple as its fields in order
/// with nothing around them, so the nesting leaves the bytes as they were.
#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
struct OldState<N, S, R> {
    revision: u64,
    nodes: BTreeMap<Box<str>, N>,
    sessions: BTreeMap<SessionId, S>,
    queues: BTreeMap<Box<str>, LockQueue>,
    rest: R,
}

/// Format 1: sessions without a principal.
type StateV1 = OldState<NodeV3, SessionV1, ()>;
/// Format 2: as format 3 without lock-delays.
type StateV2 = OldState<NodeV3, Session, ()>;
/// Format 3: nodes without `meta`, no clock.
type StateV3 = OldState<NodeV3, Session, (LockDelays,)>;
/// Format 4: as format 5 without the key space.
type StateV4 = OldState<NodeV5, Session, (LockDelays, u64)>;
/// Format 5: nodes without their ACL.
type StateV5 = OldState<NodeV5, Session, (LockDelays, u64, KvStore)>;

/// The fields after `queues` as this build has them; those an older
/// format lacks are empty (no lock-delays, clock 0, no keys).
#[derive(Default)]
struct Rest {
    lock_delays: LockDelays,
    clock_ms: u64,
    kv: KvStore,
}

impl From<()> for Rest {
    fn from((): ()) -> Self {
        Rest::default()
    }
}

impl From<(LockDelays,)> for Rest {
    fn from((lock_delays,): (LockDelays,)) -> Self {
        Rest {
            lock_delays,
            ..Rest::default()
        }
    }
}

impl From<(LockDelays, u64)> for Rest {
    fn from((lock_delays, clock_ms): (LockDelays, u64)) -> Self {
        Rest {
            lock_delays,
            clock_ms,
            ..Rest::default()
        }
    }
}

impl From<(LockDelays, u64, KvStore)> for Rest {
    fn from((lock_delays, clock_ms, kv): (LockDelays, u64, KvStore)) -> Self {
        Rest {
            lock_delays,
            clock_ms,
            kv,
        }
    }
}

/// Converts every value of an old map to this build's type.
fn upgrade<K: Ord, V, Old: Into<V>>(map: BTreeMap<K, Old>) -> BTreeMap<K, V> {
    map.into_iter().map(|(k, v)| (k, v.into())).collect()
}

impl<N: Into<Node>, S: Into<Session>, R: Into<Rest>> From<OldState<N, S, R>> for StateMachine {
    fn from(old: OldState<N, S, R>) -> Self {
        let rest = old.rest.into();
        StateMachine {
            revision: old.revision,
            nodes: upgrade(old.nodes),
            sessions: upgrade(old.sessions),
            queues: old.queues,
            lock_delays: rest.lock_delays,
            clock_ms: rest.clock_ms,
            kv: rest.kv,
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
        let state = match u32::from_le_bytes(*version) {
            1 => decode::<StateV1>(body)?,
            2 => decode::<StateV2>(body)?,
            3 => decode::<StateV3>(body)?,
            4 => decode::<StateV4>(body)?,
            5 => decode::<StateV5>(body)?,
            SNAPSHOT_FORMAT => decode::<StateMachine>(body)?,
            other => return Err(SnapshotError::UnsupportedFormat(other)),
        };
        state
            .check_invariants()
            .map_err(SnapshotError::Inconsistent)?;
        Ok(state)
    }
}

/// Decodes one format's body and brings it to this build's state.
fn decode<T: DeserializeOwned + Into<StateMachine>>(
    body: &[u8],
) -> Result<StateMachine, SnapshotError> {
    bincode::deserialize::<T>(body)
        .map(Into::into)
        .map_err(|e| SnapshotError::Decode(e.to_string()))
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

    /// `sm`'s nodes as formats 1 to 3 encoded them.
    fn old_nodes(sm: &StateMachine) -> BTreeMap<Box<str>, NodeV3> {
        nodes_as_v5(sm)
            .into_iter()
            .map(|(path, n)| {
                let old = NodeV3 {
                    data: n.data,
                    version: n.version,
                    create_revision: n.create_revision,
                    mod_revision: n.mod_revision,
                    ephemeral_owner: n.ephemeral_owner,
                    next_child_sequence: n.next_child_sequence,
                };
                (path, old)
            })
            .collect()
    }

    /// `sm` as an older format's decoding rebuilds it: no clock, and
    /// each node's meta as `NodeV3` converts it.
    fn as_upgraded(sm: &StateMachine) -> StateMachine {
        let mut up = sm.clone();
        up.clock_ms = 0;
        up.kv = KvStore::default();
        up.nodes = upgrade(old_nodes(sm));
        up
    }

    /// Encodes `sm` as format 1 did (it must have no principals).
    fn format_1(sm: &StateMachine) -> Vec<u8> {
        let sessions = sm
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
            .collect::<BTreeMap<_, _>>();
        encode_as(1, sm, old_nodes(sm), sessions, ())
    }

    /// Encodes `sm` as format 2 did (it must have no lock-delays).
    fn format_2(sm: &StateMachine) -> Vec<u8> {
        assert!(sm.lock_delays.is_empty());
        encode_as(2, sm, old_nodes(sm), sm.sessions.clone(), ())
    }

    #[test]
    fn format_2_still_decodes_without_lock_delays() {
        let sm = state(Some("billing-jobs"));
        let old = format_2(&sm);
        let back = StateMachine::from_snapshot(&old).expect("decode v2");
        assert_eq!(back, as_upgraded(&sm));
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
        assert_eq!(bytes[4..8], SNAPSHOT_FORMAT.to_le_bytes());
        let back = StateMachine::from_snapshot(&bytes).expect("decode");
        assert_eq!(back, sm);
        assert_eq!(back.held_off(), sm.held_off());
        assert_eq!(back.lock_delay("delayed"), 2_500);
    }

    #[test]
    fn format_3_round_trips_principals() {
        let sm = state(Some("billing-jobs"));
        let bytes = sm.to_snapshot().expect("encode");
        assert_eq!(bytes[4..8], SNAPSHOT_FORMAT.to_le_bytes());
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
        let back = StateMachine::from_snapshot(&old).expect("decode v1");
        assert_eq!(back, as_upgraded(&sm));
        assert_eq!(back.session_principal(SessionId(2)), Some(None));
    }

    #[test]
    fn unknown_formats_are_refused() {
        let mut bytes = state(None).to_snapshot().expect("encode");
        bytes[4..8].copy_from_slice(&7u32.to_le_bytes());
        assert!(matches!(
            StateMachine::from_snapshot(&bytes),
            Err(SnapshotError::UnsupportedFormat(7))
        ));
    }

    /// Encodes `sm` as format 3 did: nodes without meta, no clock.
    fn format_3(sm: &StateMachine) -> Vec<u8> {
        let rest = (sm.lock_delays.clone(),);
        encode_as(3, sm, old_nodes(sm), sm.sessions.clone(), rest)
    }

    #[test]
    fn format_3_still_decodes_and_sequences_continue() {
        let mut sm = state(None);
        let put = Command::Put {
            path: "/q/job".into(),
            data: vec![],
            session: None,
            sequential: true,
            expected_version: None,
        };
        for _ in 0..3 {
            assert!(sm.apply(&put).result.is_ok());
        }
        let back = StateMachine::from_snapshot(&format_3(&sm)).expect("decode v3");
        assert_eq!(back, as_upgraded(&sm));
        let q = back.node("/q").expect("parent");
        assert_eq!((q.meta.child_version, q.meta.created_ms), (3, 0));
    }

    #[test]
    fn format_4_round_trips_times_and_counters() {
        let mut sm = state(None);
        let stamped = Command::Stamped {
            time_ms: 1_700_000_000_123,
            command: Box::new(Command::Put {
                path: "/t/a".into(),
                data: b"x".to_vec(),
                session: None,
                sequential: false,
                expected_version: None,
            }),
        };
        assert!(sm.apply(&stamped).result.is_ok());
        let bytes = sm.to_snapshot().expect("encode");
        let back = StateMachine::from_snapshot(&bytes).expect("decode");
        assert_eq!(back, sm);
        assert_eq!(back.clock_ms(), 1_700_000_000_123);
        let t = back.node("/t").expect("parent");
        assert_eq!(t.meta.child_version, 1);
        assert_eq!(
            back.node("/t/a").map(|n| n.meta.created_ms),
            Some(1_700_000_000_123)
        );
    }
}

/// Encodes `sm` as format `format` did: its revision and queues, with
/// `nodes`, `sessions` and `rest` in that format's shapes.
#[cfg(test)]
fn encode_as<N: serde::Serialize, S: serde::Serialize, R: serde::Serialize>(
    format: u32,
    sm: &StateMachine,
    nodes: BTreeMap<Box<str>, N>,
    sessions: BTreeMap<SessionId, S>,
    rest: R,
) -> Vec<u8> {
    let old = OldState {
        revision: sm.revision,
        nodes,
        sessions,
        queues: sm.queues.clone(),
        rest,
    };
    let mut bytes = MAGIC.to_vec();
    bytes.extend_from_slice(&format.to_le_bytes());
    bytes.extend(bincode::serialize(&old).expect("encode an old format"));
    bytes
}

/// `sm`'s nodes as formats 4 and 5 encoded them (without ACLs).
#[cfg(test)]
fn nodes_as_v5(sm: &StateMachine) -> BTreeMap<Box<str>, NodeV5> {
    sm.nodes
        .iter()
        .map(|(path, n)| {
            let old = NodeV5 {
                data: n.data.clone(),
                version: n.version,
                create_revision: n.create_revision,
                mod_revision: n.mod_revision,
                ephemeral_owner: n.ephemeral_owner,
                next_child_sequence: n.next_child_sequence,
                meta: n.meta,
            };
            (path.clone(), old)
        })
        .collect()
}

#[cfg(test)]
mod acl_tests {
    use super::*;
    use crate::command::Command;
    use crate::tree_ops::TreeOp;
    use crate::types::{AclEntry, NodeAcl};

    fn digest() -> Vec<AclEntry> {
        vec![
            AclEntry {
                perms: 1,
                scheme: "world".into(),
                id: "anyone".into(),
            },
            AclEntry {
                perms: 31,
                scheme: "digest".into(),
                id: "bob:pNOt6DXaHBS4k5ZrxQq0tLXK1nk=".into(),
            },
        ]
    }

    /// `/open` with the open ACL, `/acl` with `digest()`.
    fn with_acls() -> StateMachine {
        let mut sm = StateMachine::new();
        let ops = vec![
            TreeOp::Create {
                path: "/open".into(),
                data: vec![],
                session: None,
                sequential: false,
            },
            TreeOp::CreateWithAcl {
                path: "/acl".into(),
                data: b"d".to_vec(),
                session: None,
                sequential: false,
                acl: digest(),
            },
        ];
        assert!(sm.apply(&Command::TreeOps { ops }).result.is_ok());
        sm
    }

    #[test]
    fn stored_acls_round_trip() {
        let sm = with_acls();
        let bytes = sm.to_snapshot().expect("encode");
        assert_eq!(bytes[4..8], 6u32.to_le_bytes());
        let back = StateMachine::from_snapshot(&bytes).expect("decode");
        assert_eq!(back, sm);
        let acl = back.node("/acl").and_then(|n| n.acl.as_deref());
        assert_eq!(NodeAcl::entries_of(acl), digest());
        assert_eq!(back.node("/open").map(|n| n.acl.is_none()), Some(true));
    }

    #[test]
    fn format_5_still_decodes_with_open_acls() {
        let sm = with_acls();
        let rest = (sm.lock_delays.clone(), sm.clock_ms, sm.kv.clone());
        let bytes = encode_as(5, &sm, nodes_as_v5(&sm), sm.sessions.clone(), rest);
        let back = StateMachine::from_snapshot(&bytes).expect("decode v5");
        let mut expected = sm.clone();
        for node in expected.nodes.values_mut() {
            node.acl = None;
        }
        assert_eq!(back, expected);
        let acl = back.node("/acl").and_then(|n| n.acl.as_deref());
        assert_eq!(NodeAcl::entries_of(acl), vec![AclEntry::open()]);
        assert_eq!(
            back.node("/acl").map(|n| n.data.to_vec()),
            Some(b"d".to_vec())
        );
    }
}

#[cfg(test)]
mod kv_tests {
    use super::*;
    use crate::command::Command;
    use crate::kv::{KvOp, PutRequest};

    fn with_keys() -> StateMachine {
        let mut sm = StateMachine::new();
        let open = Command::OpenSession {
            id: SessionId(9),
            owner: "etcd".into(),
            ttl_ms: 5_000,
        };
        assert!(sm.apply(&open).result.is_ok());
        for (key, lease) in [(&b"a"[..], None), (b"b", Some(SessionId(9)))] {
            let put = Command::Kv(KvOp::Put(PutRequest {
                key: key.to_vec(),
                value: b"v".to_vec(),
                lease,
                ..PutRequest::default()
            }));
            assert!(sm.apply(&put).result.is_ok());
        }
        sm
    }

    #[test]
    fn keys_leases_and_history_round_trip() {
        let sm = with_keys();
        let bytes = sm.to_snapshot().expect("encode");
        assert_eq!(bytes[4..8], SNAPSHOT_FORMAT.to_le_bytes());
        let back = StateMachine::from_snapshot(&bytes).expect("decode");
        assert_eq!(back, sm);
        assert_eq!(back.kv().lease_keys(SessionId(9)), vec![b"b".to_vec()]);
        let events = back.kv().events_since(1, b"\0", b"\0").expect("kept");
        assert_eq!(events.len(), 2);
    }

    #[test]
    fn format_4_still_decodes_with_an_empty_key_space() {
        let sm = with_keys();
        let rest = (sm.lock_delays.clone(), sm.clock_ms);
        let bytes = encode_as(4, &sm, nodes_as_v5(&sm), sm.sessions.clone(), rest);
        let back = StateMachine::from_snapshot(&bytes).expect("decode v4");
        let mut expected = sm.clone();
        expected.kv = KvStore::default();
        assert_eq!(back, expected);
        assert!(back.kv().is_empty());
    }
}

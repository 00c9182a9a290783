//! Typed errors of this crate, and their one mapping into openraft's
//! [`StorageError`].

use std::io;
use std::path::PathBuf;

use openraft::{ErrorSubject, ErrorVerb, NodeId, StorageError, StorageIOError};

/// Everything that can go wrong below the openraft traits.
///
/// Decoding failures are errors, never panics: bytes read from disk may be
/// corrupt, and a node must stop cleanly (openraft shuts the node down on a
/// storage error) rather than crash in the middle of a write.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// sled refused to open the database (lock held by another process,
    /// incompatible format, unreadable files, ...).
    #[error("cannot open sled database at {path}: {source}")]
    Open {
        /// The configured database directory.
        path: PathBuf,
        /// sled's reason.
        source: EngineError,
    },

    /// A read or write of the storage engine failed.
    #[error("sled: {0}")]
    Engine(EngineError),

    /// A file-system operation of the durability barrier failed.
    #[error("i/o: {0}")]
    Io(#[from] io::Error),

    /// A value could not be serialized (should not happen for well-formed
    /// openraft types; reported rather than unwrapped).
    #[error("cannot encode {what}: {source}")]
    Encode {
        /// What was being encoded (`"log entry"`, `"vote"`, ...).
        what: &'static str,
        /// bincode's reason.
        source: bincode::Error,
    },

    /// Bytes read from disk do not decode: corruption, or a format written
    /// by an incompatible version.
    #[error("corrupt {what} on disk: {source}")]
    Decode {
        /// What was being decoded.
        what: &'static str,
        /// bincode's reason.
        source: bincode::Error,
    },

    /// A stored value's checksum does not match: corruption on disk.
    #[error("corrupt {what} on disk: {detail}")]
    Checksum {
        /// What was being read.
        what: &'static str,
        /// The checksums, or why there is none.
        detail: String,
    },

    /// Found at open: this member's stored Raft state is damaged or
    /// incomplete, so it refuses to start rather than serve or vote from
    /// it. The message names the file or sled tree and the index or offset.
    #[error("refusing to start from {path}: {reason}. {REPAIR}", REPAIR = REPAIR)]
    Refused {
        /// The log store's directory.
        path: PathBuf,
        /// What is wrong, and where.
        reason: String,
    },

    /// A key in the log tree is not an 8-byte big-endian index.
    #[error("corrupt log key on disk: expected 8 bytes, found {len}")]
    CorruptKey {
        /// Length of the key found.
        len: usize,
    },

    /// A log entry's bytes do not decode.
    #[error("corrupt log entry at index {index}: {source}")]
    CorruptEntry {
        /// Index (from the key) of the entry.
        index: u64,
        /// bincode's reason.
        source: bincode::Error,
    },

    /// A log entry's checksum does not match.
    #[error("corrupt log entry at index {index}: {detail}")]
    EntryChecksum {
        /// Index (from the key) of the entry.
        index: u64,
        /// The checksums.
        detail: String,
    },

    /// A log entry is stored under a key that is not its own index.
    #[error("log entry stored under index {key} claims index {entry}")]
    IndexMismatch {
        /// Index encoded in the key.
        key: u64,
        /// Index found inside the decoded entry.
        entry: u64,
    },

    /// A durability barrier failed (this one or an earlier one: after a
    /// failed `fsync` no later sync is trusted). Shared by all the requests
    /// the barrier served.
    #[error("durability barrier failed: {0}")]
    Barrier(#[source] std::sync::Arc<StoreError>),

    /// A write of this member's other durable state failed (its snapshot
    /// file, or the log purge a snapshot allows): the member stops as it
    /// does after a failed log barrier
    /// ([`DurableIndex::fail_beside_log`](crate::DurableIndex::fail_beside_log)).
    #[error("a write beside the log failed: {0}")]
    BesideLog(#[source] std::sync::Arc<StoreError>),

    /// The durability worker thread is gone (it panicked): nothing written
    /// from now on can be made durable.
    #[error("durability worker thread has stopped")]
    SyncWorkerGone,

    /// Found at start ([`SnapshotFloor::start`](crate::SnapshotFloor::start)):
    /// the log was purged past the newest snapshot, so the entries between
    /// the snapshot and the log, needed to rebuild the state, exist nowhere
    /// on this member.
    #[error(
        "the log was purged through index {purged}, but {}: log entries {}..={purged} \
         are gone and this member cannot rebuild its state. {REPAIR}",
        snapshot_coverage(*.snapshot),
        .snapshot.map_or(0, |s| s + 1),
        REPAIR = REPAIR
    )]
    PurgedPastSnapshot {
        /// Index of the last purged entry (the log's purge pointer).
        purged: u64,
        /// Last log index the newest snapshot covers; `None`: no snapshot.
        snapshot: Option<u64>,
    },

    /// Found at start: entries after the newest snapshot are missing from
    /// the middle of the log.
    #[error(
        "log entries {first_missing}..={last_missing} are missing, and {}: \
         this member cannot rebuild its state. {REPAIR}",
        snapshot_coverage(*.snapshot),
        REPAIR = REPAIR
    )]
    LogHole {
        /// Last log index the newest snapshot covers; `None`: no snapshot.
        snapshot: Option<u64>,
        /// First missing index.
        first_missing: u64,
        /// Last missing index (the next entry present follows it).
        last_missing: u64,
    },

    /// An append had to wait for a snapshot to become durable (the log was
    /// purged past its last entry by a snapshot still being written) and
    /// the snapshot did not become durable in time.
    #[error(
        "the snapshot through log index {index} did not become durable within {waited:?}; \
         the log cannot take the entries after it without a hole"
    )]
    SnapshotNotDurable {
        /// Last log index of the awaited snapshot.
        index: u64,
        /// How long the append waited.
        waited: std::time::Duration,
    },
}

/// How a member whose log cannot be replayed gets back into the cluster.
/// A wiped member is refused until re-added as a new incarnation
/// (docs/design.md, "Member identity").
const REPAIR: &str = "Move this member's data directory away and start it again, then on \
    the cluster run `raftlock member remove ID` and `raftlock member add ID --api-addr ... \
    --raft-addr ...`: it comes back as a new incarnation and re-syncs from the leader by snapshot";

/// "the newest snapshot covers ..." for the gap errors.
fn snapshot_coverage(snapshot: Option<u64>) -> String {
    match snapshot {
        Some(index) => format!("the newest snapshot covers the log only through index {index}"),
        None => "there is no snapshot".to_string(),
    }
}

/// An error of the storage engine (sled), kept opaque so that sled's types
/// are not part of this crate's API and the engine can be replaced.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct EngineError(sled::Error);

impl From<sled::Error> for EngineError {
    fn from(e: sled::Error) -> Self {
        Self(e)
    }
}

impl From<sled::Error> for StoreError {
    fn from(e: sled::Error) -> Self {
        Self::Engine(EngineError(e))
    }
}

impl StoreError {
    /// True when the file system is full (`ENOSPC`) or the quota is
    /// exhausted (`EDQUOT`), here or in the failure this one wraps.
    pub fn is_out_of_space(&self) -> bool {
        const ENOSPC: i32 = 28;
        const EDQUOT: i32 = 122;
        // sled 0.34 hands out its sticky error as a copy that keeps only
        // the kind and the text (`io::Error::new(kind, format!("{e:?}"))`),
        // not the errno: the kind says it too.
        let full = |e: &io::Error| {
            matches!(e.raw_os_error(), Some(ENOSPC | EDQUOT))
                || matches!(
                    e.kind(),
                    io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
                )
        };
        match self {
            StoreError::Io(e) => full(e),
            StoreError::Engine(EngineError(sled::Error::Io(e))) => full(e),
            StoreError::Open { source, .. } => {
                matches!(&source.0, sled::Error::Io(e) if full(e))
            }
            StoreError::Barrier(inner) | StoreError::BesideLog(inner) => inner.is_out_of_space(),
            _ => false,
        }
    }

    /// Wraps this error into openraft's error type, naming what was being
    /// done to what, so openraft's log line says where storage failed.
    pub fn into_storage<NID: NodeId>(
        self,
        subject: ErrorSubject<NID>,
        verb: ErrorVerb,
    ) -> StorageError<NID> {
        StorageIOError::new(subject, verb, &self).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_is_recognised_also_in_sleds_copy_of_the_error() {
        let enospc = io::Error::from_raw_os_error(28);
        // What sled 0.34 returns after its first failed write (its `Clone`).
        let copied = io::Error::new(enospc.kind(), format!("{enospc:?}"));
        assert_eq!(copied.raw_os_error(), None);
        for e in [enospc, copied] {
            let engine = StoreError::from(sled::Error::Io(e));
            assert!(engine.is_out_of_space(), "{engine}");
            let barrier = StoreError::Barrier(std::sync::Arc::new(engine));
            assert!(barrier.is_out_of_space(), "{barrier}");
        }
        let eio = StoreError::from(sled::Error::Io(io::Error::from_raw_os_error(5)));
        assert!(!eio.is_out_of_space());
    }

    #[test]
    fn maps_into_openraft_io_error_with_subject() {
        let err = StoreError::CorruptKey { len: 3 };
        let sto: StorageError<u64> = err.into_storage(ErrorSubject::Logs, ErrorVerb::Read);
        let text = sto.to_string();
        assert!(text.contains("Read"), "{text}");
        assert!(text.contains("expected 8 bytes"), "{text}");
    }
}

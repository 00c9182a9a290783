//! Backups: a consistent copy of a live cluster's state, and seeding the
//! members of a new cluster from one.
//!
//! A backup file is a fixed 44-byte header and a body; integers are
//! little-endian:
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 8 | magic `RLBACKUP` |
//! | 8 | 4 | backup format ([`BACKUP_FORMAT`]) |
//! | 12 | 8 | revision of the state |
//! | 20 | 8 | Raft log index the state is as of (applied index) |
//! | 28 | 8 | body length |
//! | 36 | 4 | CRC-32 of the body |
//! | 40 | 4 | CRC-32 of bytes 0..40 (the header above) |
//! | 44 | n | body: the core state's snapshot encoding (`RLSM`, its own format number, bincode) |
//!
//! CRC-32 is the IEEE polynomial (zlib's, gzip's), through `crc32fast`,
//! which sled already builds into every node. The header has a checksum of
//! its own so a flipped bit in the revision or the index is caught too;
//! the state is also decoded and its invariants checked before a backup is
//! reported good or restored.
//!
//! A backup holds no Raft history: restoring one writes the member's
//! snapshot file as if the member had installed that snapshot from a
//! leader, with the *new* cluster's membership and a log id that every
//! restored member shares (see [`restore`]).

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use openraft::{CommittedLeaderId, Membership};
use raftlock_core::{QueueKind, SnapshotError, StateMachine};
use serde::Serialize;

use crate::config::{ConfigError, NodeConfig};
use crate::disk::identity::{self, Identity};
use crate::disk::snapshot_file::{self, SnapshotFileError};
use crate::error::NodeError;
use crate::node::Node;
use crate::raft::typ::{LogId, SnapshotMeta, StoredMembership};

/// Format of the backup files this build writes and reads.
pub const BACKUP_FORMAT: u32 = 1;

const MAGIC: &[u8; 8] = b"RLBACKUP";
/// Bytes before the body.
const HEADER_LEN: usize = 44;
/// The header bytes its own checksum covers.
const CHECKED_HEADER: usize = 40;

/// The fields of a backup's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BackupHeader {
    /// Backup file format ([`BACKUP_FORMAT`]).
    pub format: u32,
    /// The state's global revision.
    pub revision: u64,
    /// The Raft log index the state is as of on the cluster it came from.
    pub applied_index: u64,
    /// Length of the body (the core snapshot) in bytes.
    pub body_len: u64,
    /// CRC-32 of the body.
    pub body_crc: u32,
}

impl BackupHeader {
    fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[0..8].copy_from_slice(MAGIC);
        out[8..12].copy_from_slice(&self.format.to_le_bytes());
        out[12..20].copy_from_slice(&self.revision.to_le_bytes());
        out[20..28].copy_from_slice(&self.applied_index.to_le_bytes());
        out[28..36].copy_from_slice(&self.body_len.to_le_bytes());
        out[36..40].copy_from_slice(&self.body_crc.to_le_bytes());
        let crc = crc32fast::hash(&out[..CHECKED_HEADER]);
        out[40..44].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// Parses and checks the header (magic, format, its own checksum).
    fn decode(bytes: &[u8]) -> Result<Self, BackupError> {
        let header: &[u8; HEADER_LEN] = bytes
            .get(..HEADER_LEN)
            .and_then(|h| h.try_into().ok())
            .ok_or(BackupError::Truncated {
                expected: HEADER_LEN as u64,
                actual: bytes.len() as u64,
            })?;
        if &header[0..8] != MAGIC {
            return Err(BackupError::NotABackup);
        }
        // Constant offsets into the fixed-size array: no index can fail.
        let u32_at = |at: usize| {
            u32::from_le_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]])
        };
        let u64_at = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&header[at..at + 8]);
            u64::from_le_bytes(b)
        };
        let stored = u32_at(40);
        let computed = crc32fast::hash(&header[..CHECKED_HEADER]);
        if stored != computed {
            return Err(BackupError::HeaderChecksum { stored, computed });
        }
        // Checked after the checksum: a corrupt format field is corruption,
        // not a file from a newer build.
        let format = u32_at(8);
        if format != BACKUP_FORMAT {
            return Err(BackupError::UnsupportedFormat(format));
        }
        Ok(BackupHeader {
            format,
            revision: u64_at(12),
            applied_index: u64_at(20),
            body_len: u64_at(28),
            body_crc: u32_at(36),
        })
    }
}

/// A backup file's bytes, with its header parsed. Built by
/// [`Node::backup`] or read back with [`Backup::from_bytes`], which checks
/// both checksums.
#[derive(Clone)]
pub struct Backup {
    header: BackupHeader,
    /// The whole file: header, then body.
    bytes: Vec<u8>,
}

impl std::fmt::Debug for Backup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backup")
            .field("header", &self.header)
            .field("bytes", &self.bytes.len())
            .finish()
    }
}

impl Backup {
    /// Encodes `state`, as of log index `applied_index`. The state is
    /// streamed into the buffer that becomes the file (no second copy).
    pub(crate) fn capture(state: &StateMachine, applied_index: u64) -> Result<Self, BackupError> {
        let mut bytes = vec![0u8; HEADER_LEN];
        snapshot_file::encode_state(&mut bytes, state)
            .map_err(|e| BackupError::Encode(e.to_string()))?;
        Ok(Self::seal(bytes, state.revision(), applied_index))
    }

    /// Fills in the header of `bytes` (a reserved header, then the body).
    fn seal(mut bytes: Vec<u8>, revision: u64, applied_index: u64) -> Self {
        let body = &bytes[HEADER_LEN..];
        let header = BackupHeader {
            format: BACKUP_FORMAT,
            revision,
            applied_index,
            body_len: body.len() as u64,
            body_crc: crc32fast::hash(body),
        };
        bytes[..HEADER_LEN].copy_from_slice(&header.encode());
        Backup { header, bytes }
    }

    /// Parses a backup file's bytes and verifies both checksums and the
    /// length. Does not decode the state: see [`Backup::state`].
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self, BackupError> {
        let header = BackupHeader::decode(&bytes)?;
        let actual = (bytes.len() - HEADER_LEN) as u64;
        if actual != header.body_len {
            return Err(BackupError::Truncated {
                expected: HEADER_LEN as u64 + header.body_len,
                actual: bytes.len() as u64,
            });
        }
        let computed = crc32fast::hash(&bytes[HEADER_LEN..]);
        if computed != header.body_crc {
            return Err(BackupError::BodyChecksum {
                stored: header.body_crc,
                computed,
            });
        }
        Ok(Backup { header, bytes })
    }

    /// Reads and verifies a backup file (as [`Backup::from_bytes`]).
    pub fn read_file(path: &Path) -> Result<Self, BackupError> {
        let bytes = fs::read(path).map_err(|error| BackupError::Io {
            path: path.to_path_buf(),
            error,
        })?;
        Self::from_bytes(bytes)
    }

    /// The header.
    pub fn header(&self) -> &BackupHeader {
        &self.header
    }

    /// The whole file, header included: what to write to disk or send.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The file's bytes, without a copy.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// The core snapshot the body holds.
    fn body(&self) -> &[u8] {
        &self.bytes[HEADER_LEN..]
    }

    /// Decodes the state and checks its invariants and that it is the
    /// revision the header names.
    pub fn state(&self) -> Result<StateMachine, BackupError> {
        let state = StateMachine::from_snapshot(self.body())?;
        if state.revision() != self.header.revision {
            return Err(BackupError::RevisionMismatch {
                header: self.header.revision,
                state: state.revision(),
            });
        }
        Ok(state)
    }

    /// Decodes the state (fully verified) and counts what it holds.
    pub fn summary(&self) -> Result<BackupSummary, BackupError> {
        let state = self.state()?;
        let counts = state.counts();
        Ok(BackupSummary {
            format: self.header.format,
            revision: self.header.revision,
            applied_index: self.header.applied_index,
            bytes: self.bytes.len() as u64,
            checksum: format!("crc32:{:08x}", self.header.body_crc),
            sessions: counts.sessions,
            nodes: counts.nodes,
            locks: state.queues(QueueKind::Lock, "").len(),
            elections: state.queues(QueueKind::Election, "").len(),
            waiters: counts.waiters,
        })
    }
}

/// What a backup holds, for `raftlock snapshot inspect`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BackupSummary {
    /// Backup file format.
    pub format: u32,
    /// The state's global revision.
    pub revision: u64,
    /// The log index the state is as of on its source cluster.
    pub applied_index: u64,
    /// Size of the file.
    pub bytes: u64,
    /// The body's checksum, `crc32:` and eight hex digits.
    pub checksum: String,
    /// Open sessions.
    pub sessions: usize,
    /// Nodes in the tree (the root excluded, lock and election nodes
    /// included).
    pub nodes: usize,
    /// Locks with a holder (a lock with nobody queued does not exist).
    pub locks: usize,
    /// Elections with a leader.
    pub elections: usize,
    /// Queued nodes, in locks and elections, that do not hold.
    pub waiters: usize,
}

/// Why a backup could not be taken, read or verified.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// Reading the file failed.
    #[error("backup file {}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said (in the message, so not also a `source`,
        /// which would print it twice in a cause chain).
        error: std::io::Error,
    },
    /// The file does not start with the backup magic bytes.
    #[error("not a raftlock backup (bad magic bytes)")]
    NotABackup,
    /// A backup of a format this build does not read.
    #[error("backup format {0} is not supported by this build (it reads {BACKUP_FORMAT})")]
    UnsupportedFormat(u32),
    /// Shorter or longer than its header says.
    #[error("backup is {actual} bytes, its header says {expected}: truncated or corrupt")]
    Truncated {
        /// Bytes the header promises.
        expected: u64,
        /// Bytes present.
        actual: u64,
    },
    /// The header's own checksum does not match.
    #[error("backup header is corrupt: checksum {computed:08x}, stored {stored:08x}")]
    HeaderChecksum {
        /// Checksum in the file.
        stored: u32,
        /// Checksum of the bytes read.
        computed: u32,
    },
    /// The body's checksum does not match.
    #[error("backup body is corrupt: checksum {computed:08x}, stored {stored:08x}")]
    BodyChecksum {
        /// Checksum in the header.
        stored: u32,
        /// Checksum of the bytes read.
        computed: u32,
    },
    /// The body does not decode to a consistent state.
    #[error("backup state: {0}")]
    State(#[from] SnapshotError),
    /// The state decodes but is not the revision the header names.
    #[error("backup header names revision {header}, its state is at revision {state}")]
    RevisionMismatch {
        /// Revision in the header.
        header: u64,
        /// Revision of the decoded state.
        state: u64,
    },
    /// The state could not be encoded.
    #[error("encoding the backup: {0}")]
    Encode(String),
}

impl Node {
    /// A consistent copy of the state as of a linearizable point: after a
    /// read-index barrier (every write acknowledged before the call is in
    /// it), the state and the log index it is as of are read under one
    /// lock. Encoding holds the state's read lock (applies wait, as for a
    /// snapshot build) and runs off the async workers; the file is built
    /// in memory (the caller sends or writes it).
    pub async fn backup(&self) -> Result<Backup, NodeError> {
        self.replica.linearizable_barrier().await?;
        let shared = self.replica.shared.clone();
        tokio::task::spawn_blocking(move || {
            let (state, applied) = shared.read_applied();
            Backup::capture(&state, applied.map_or(0, |l| l.index))
        })
        .await
        .map_err(NodeError::internal)?
        .map_err(NodeError::internal)
    }
}

/// What [`restore`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restored {
    /// The member's data directory.
    pub data_dir: PathBuf,
    /// The restored state's revision.
    pub revision: u64,
    /// The log index the member starts from.
    pub applied_index: u64,
    /// The voters of the new cluster (every member of the config).
    pub members: Vec<u64>,
}

/// Why a member's data directory could not be seeded.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// The backup is corrupt or unreadable; nothing was written.
    #[error(transparent)]
    Backup(#[from] BackupError),
    /// The cluster config is not usable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The data directory holds something: restore only seeds a new
    /// member, never overwrites one.
    #[error(
        "data directory {} is not empty: restore seeds a new member only; \
         move it away or point the config's data_dir elsewhere",
        path.display()
    )]
    NotEmpty {
        /// The member's data directory.
        path: PathBuf,
    },
    /// Creating or inspecting the data directory failed.
    #[error("data directory {}: {error}", path.display())]
    Io {
        /// The directory.
        path: PathBuf,
        /// What the OS said (in the message only, as for `BackupError`).
        error: std::io::Error,
    },
    /// Writing the snapshot file failed.
    #[error(transparent)]
    Write(#[from] SnapshotFileError),
}

/// Seeds the data directory of member `config.id` of a new cluster with
/// `backup`, so that it starts from the backup's state. Run it for every
/// member of the new cluster, with the same file and the same config
/// (the config's members become the cluster's voters), then start them.
///
/// What openraft 0.9 then sees on each member: a snapshot whose last log
/// id is `(term 0, node 0, index = the backup's applied index)` with the
/// new members as its membership, and an empty log and vote. At start it
/// purges the empty log up to the snapshot ("snapshot installed, log not
/// cleaned"), so the log's last id is the snapshot's: the member counts
/// as initialized and `initialize` is neither needed nor called, and every
/// member has the same last log id, so any of them can win the first
/// election. Term 0 matters: a candidate's term is its vote's term + 1,
/// whatever its log holds, so with the source cluster's term (say 7) the
/// first leader would write entries at term 1 *after* an entry of term 7,
/// and log ids would go backwards. The applied index is kept, so indexes
/// in the new cluster continue from the backup's.
///
/// Refuses (before writing anything) a corrupt backup and a data
/// directory that exists and is not empty.
pub fn restore(backup: &Backup, config: &NodeConfig) -> Result<Restored, RestoreError> {
    config.validate()?;
    // Fully verified (checksums, decoding, invariants) before any write.
    backup.state()?;
    let dir = &config.data_dir;
    let io = |error| RestoreError::Io {
        path: dir.clone(),
        error,
    };
    match fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(RestoreError::NotEmpty { path: dir.clone() });
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            fs::create_dir_all(dir).map_err(io)?;
            // The new directory's own entry must survive a crash too.
            if let Some(parent) = dir.parent() {
                snapshot_file::sync_dir(parent)?;
            }
        }
        Err(e) => return Err(io(e)),
    }
    let header = backup.header();
    // Identities every member restored from this backup and config
    // agrees on (docs/design.md, "Member identity"): the membership names
    // them, and a member wiped later is refused like any other.
    let mut seed = backup.header().encode().to_vec();
    for (id, member) in &config.members {
        seed.extend_from_slice(format!("{id}={};", member.raft_addr).as_bytes());
    }
    let mut members = config.members.clone();
    for (id, member) in members.iter_mut() {
        member.incarnation = identity::derived(&seed, &format!("member {id}"));
    }
    let me = Identity {
        member_id: config.id,
        incarnation: identity::derived(&seed, &format!("member {}", config.id)),
        cluster_id: Some(identity::derived(&seed, "cluster")),
    };
    identity::write_new(dir, &me).map_err(io)?;
    let log_id = LogId::new(CommittedLeaderId::new(0, 0), header.applied_index);
    let voters: BTreeSet<u64> = config.members.keys().copied().collect();
    let membership = Membership::new(vec![voters.clone()], members);
    let meta = SnapshotMeta {
        last_log_id: Some(log_id),
        last_membership: StoredMembership::new(Some(log_id), membership),
        snapshot_id: format!("restored-{}-{}", header.applied_index, header.revision),
    };
    snapshot_file::save(dir, &meta, backup.body())?;
    Ok(Restored {
        data_dir: dir.clone(),
        revision: header.revision,
        applied_index: header.applied_index,
        members: voters.into_iter().collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::snapshot_file::tests::state;

    #[test]
    fn a_backup_round_trips_and_counts_what_it_holds() {
        let sm = state();
        let backup = Backup::capture(&sm, 77).expect("capture");
        assert_eq!(backup.body(), sm.to_snapshot().expect("encode"));
        let back = Backup::from_bytes(backup.clone().into_bytes()).expect("verify");
        assert_eq!(back.header(), backup.header());
        assert_eq!(back.state().expect("state"), sm);
        let summary = back.summary().expect("summary");
        assert_eq!(
            (summary.revision, summary.applied_index, summary.sessions),
            (sm.revision(), 77, 50)
        );
        assert_eq!((summary.locks, summary.waiters), (7, 43));
    }

    #[test]
    fn every_flipped_byte_is_refused() {
        let bytes = Backup::capture(&state(), 5).expect("capture").into_bytes();
        for at in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[at] ^= 0x10;
            assert!(
                Backup::from_bytes(bad).is_err(),
                "a flipped byte at {at} of {} passed",
                bytes.len()
            );
        }
    }

    #[test]
    fn truncated_and_extended_files_are_refused() {
        let bytes = Backup::capture(&state(), 5).expect("capture").into_bytes();
        for cut in [0, 7, HEADER_LEN - 1, HEADER_LEN, bytes.len() - 1] {
            assert!(matches!(
                Backup::from_bytes(bytes[..cut].to_vec()),
                Err(BackupError::Truncated { .. } | BackupError::NotABackup)
            ));
        }
        let mut longer = bytes;
        longer.push(0);
        assert!(matches!(
            Backup::from_bytes(longer),
            Err(BackupError::Truncated { .. })
        ));
    }
}

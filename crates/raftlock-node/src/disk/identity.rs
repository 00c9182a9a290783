//! Who this data directory is: the member id it was created for, an
//! incarnation drawn at random when it was created, and the id of the
//! cluster it belongs to (drawn by the founder, learnt by the others).
//!
//! The Raft membership names each member's incarnation (`Member`), and
//! every Raft RPC carries the incarnation the sender expects of its
//! receiver (`peer_guard`). A member whose disk was wiped starts with a
//! new incarnation, so it is recognised and refused: it has forgotten its
//! vote and its log, and must not vote or accept entries under its old
//! identity until it is removed and added again (docs/design.md,
//! "Member identity").
//!
//! The file (`identity` in the data directory) is small: a magic, the
//! bincode record, and a CRC32 of the record. It is replaced atomically
//! (temp file, fsync, rename, fsync of the directory).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use serde::{Deserialize, Serialize};

use crate::raft::typ::NodeId;

/// The file's name inside the data directory.
pub(crate) const FILE: &str = "identity";
/// First bytes of the file: format and version.
const MAGIC: &[u8; 8] = b"RLIDENT1";

/// One data directory's identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// The member id the directory was created for.
    pub member_id: NodeId,
    /// Random, drawn when the directory was created; never 0 (0 means
    /// "not known" in a `Member`).
    pub incarnation: u64,
    /// The cluster this member belongs to; `None` until the founder draws
    /// it or, on any other member, until the first RPC from a leader that
    /// names this incarnation.
    pub cluster_id: Option<u64>,
}

/// Why the identity file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// The file could not be read or written.
    #[error("identity file {path}: {source}")]
    Io {
        /// The identity file.
        path: PathBuf,
        /// The IO error.
        source: std::io::Error,
    },
    #[error("identity file {path} is damaged ({why}); if this member's data is lost, wipe its data directory, run `raftlock member remove {id}` on the cluster, then add it again")]
    /// The file exists but cannot be trusted.
    Damaged {
        /// The identity file.
        path: PathBuf,
        /// What is wrong with its contents.
        why: String,
        /// The member id this node was started as.
        id: NodeId,
    },
    #[error("data directory {dir} belongs to member {found}, not member {id}")]
    /// The data directory was made by another member.
    OtherMember {
        /// The data directory.
        dir: PathBuf,
        /// The member id its identity file names.
        found: NodeId,
        /// The member id this node was started as.
        id: NodeId,
    },
    #[error("data directory {dir} holds a Raft log but no identity file (written by an older raftlock, or the file was deleted); move the directory away, run `raftlock member remove {id}` on the cluster, then add this member again")]
    /// A Raft log without an identity file.
    Missing {
        /// The data directory.
        dir: PathBuf,
        /// The member id this node was started as.
        id: NodeId,
    },
}

/// The identity of this member's data directory, loaded once at start.
pub(crate) struct IdentityFile {
    path: PathBuf,
    current: RwLock<Identity>,
}

impl IdentityFile {
    /// Loads the directory's identity, or creates one with a fresh
    /// incarnation when the directory is new. `has_log`: the directory
    /// already holds a Raft log, so a missing file is not a new directory.
    pub(crate) fn open(dir: &Path, id: NodeId, has_log: bool) -> Result<Self, IdentityError> {
        let path = dir.join(FILE);
        let io = |source| IdentityError::Io {
            path: path.clone(),
            source,
        };
        let identity = match fs::read(&path) {
            Ok(bytes) => decode(&bytes).map_err(|why| IdentityError::Damaged {
                path: path.clone(),
                why,
                id,
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if has_log {
                    return Err(IdentityError::Missing {
                        dir: dir.to_path_buf(),
                        id,
                    });
                }
                let fresh = Identity {
                    member_id: id,
                    incarnation: rand::random::<u64>().max(1),
                    cluster_id: None,
                };
                write_atomically(&path, &encode(&fresh)).map_err(io)?;
                tracing::info!(id, incarnation = %hex(fresh.incarnation), "new data directory");
                fresh
            }
            Err(e) => return Err(io(e)),
        };
        if identity.member_id != id {
            return Err(IdentityError::OtherMember {
                dir: dir.to_path_buf(),
                found: identity.member_id,
                id,
            });
        }
        Ok(IdentityFile {
            path,
            current: RwLock::new(identity),
        })
    }

    pub(crate) fn get(&self) -> Identity {
        *self.current.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Records the cluster this member belongs to (once; a second,
    /// different id is refused by the caller before it gets here).
    pub(crate) fn join_cluster(&self, cluster_id: u64) -> Result<(), IdentityError> {
        let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
        if current.cluster_id == Some(cluster_id) {
            return Ok(());
        }
        let next = Identity {
            cluster_id: Some(cluster_id),
            ..*current
        };
        write_atomically(&self.path, &encode(&next)).map_err(|source| IdentityError::Io {
            path: self.path.clone(),
            source,
        })?;
        tracing::info!(cluster = %hex(cluster_id), "this member belongs to cluster");
        *current = next;
        Ok(())
    }
}

/// Writes the identity of a data directory being seeded (a restore).
pub(crate) fn write_new(dir: &Path, identity: &Identity) -> std::io::Result<()> {
    write_atomically(&dir.join(FILE), &encode(identity))
}

/// A non-zero id derived from `seed` and `salt`: members restored one by
/// one from the same backup and config derive the same incarnations and
/// cluster id without talking to each other (`backup::restore`).
pub(crate) fn derived(seed: &[u8], salt: &str) -> u64 {
    let half = |part: &str| {
        let mut h = crc32fast::Hasher::new();
        h.update(part.as_bytes());
        h.update(salt.as_bytes());
        h.update(seed);
        h.finalize() as u64
    };
    ((half("hi") << 32) | half("lo")).max(1)
}

/// An id as people read it in logs, the API and the CLI.
pub fn hex(id: u64) -> String {
    format!("{id:016x}")
}

fn encode(identity: &Identity) -> Vec<u8> {
    // A struct of integers: bincode cannot fail on it.
    let record = bincode::serialize(identity).unwrap_or_default();
    let mut out = Vec::with_capacity(MAGIC.len() + record.len() + 4);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&record);
    out.extend_from_slice(&crc32fast::hash(&record).to_le_bytes());
    out
}

fn decode(bytes: &[u8]) -> Result<Identity, String> {
    let record = bytes
        .strip_prefix(MAGIC.as_slice())
        .ok_or("not an identity file (bad magic)")?;
    if record.len() < 4 {
        return Err("truncated".into());
    }
    let (record, crc) = record.split_at(record.len() - 4);
    let mut stored = [0u8; 4];
    stored.copy_from_slice(crc);
    if crc32fast::hash(record) != u32::from_le_bytes(stored) {
        return Err("checksum mismatch".into());
    }
    let identity: Identity =
        bincode::deserialize(record).map_err(|e| format!("undecodable record: {e}"))?;
    if identity.incarnation == 0 {
        return Err("incarnation 0".into());
    }
    Ok(identity)
}

/// Temp file, fsync, rename over `path`, fsync of the directory: a crash
/// leaves the old file or the new one, never a torn one.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let temp = path.with_extension("tmp");
    {
        let mut file = fs::File::create(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    fs::rename(&temp, path)?;
    fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_directory_gets_an_identity_that_survives_a_restart() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = IdentityFile::open(dir.path(), 3, false).expect("create");
        let created = first.get();
        assert_eq!(created.member_id, 3);
        assert_ne!(created.incarnation, 0);
        assert_eq!(created.cluster_id, None);
        first.join_cluster(77).expect("join");
        let again = IdentityFile::open(dir.path(), 3, true).expect("reload");
        assert_eq!(again.get().incarnation, created.incarnation);
        assert_eq!(again.get().cluster_id, Some(77));
    }

    #[test]
    fn damage_another_member_and_a_missing_file_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        IdentityFile::open(dir.path(), 1, false).expect("create");
        let err = IdentityFile::open(dir.path(), 2, true)
            .err()
            .expect("other member");
        assert!(err.to_string().contains("belongs to member 1"), "{err}");

        let path = dir.path().join(FILE);
        let mut bytes = fs::read(&path).expect("read");
        let last = bytes.len() - 6;
        bytes[last] ^= 0xff;
        fs::write(&path, &bytes).expect("write");
        let err = IdentityFile::open(dir.path(), 1, true)
            .err()
            .expect("damaged");
        let message = err.to_string();
        assert!(message.contains("checksum mismatch"), "{message}");
        assert!(message.contains("raftlock member remove 1"), "{message}");

        fs::remove_file(&path).expect("remove");
        let err = IdentityFile::open(dir.path(), 1, true)
            .err()
            .expect("missing");
        assert!(err.to_string().contains("no identity file"), "{err}");
    }
}

//! The newest snapshot on disk: `snapshot.bin` in the data directory,
//! replaced atomically (write to a temp file, fsync, rename, fsync the
//! directory), so a crash leaves either the old or the new one whole.
//!
//! Layout: u64 little-endian length of the bincode `SnapshotMeta`, the
//! meta, then the state machine's own snapshot bytes.
//!
//! The file is the only copy: nothing keeps a snapshot's bytes in memory
//! between snapshots. A build streams the state into a [`SnapshotWriter`]
//! (no encoded copy in memory at all); the bytes are read back only to
//! send them to a peer and once at start.

use std::fs::{self, File};
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use raftlock_core::{StateMachine, SNAPSHOT_FORMAT};

use crate::typ::SnapshotMeta;

const FILE: &str = "snapshot.bin";
const TEMP: &str = "snapshot.bin.tmp";

/// The core's snapshot header (`raftlock_core::snapshot`): magic bytes,
/// then the format version. Written here so a build can stream the state
/// instead of holding `StateMachine::to_snapshot`'s bytes; a test checks
/// that both give the same bytes.
const MAGIC: &[u8; 4] = b"RLSM";

/// A snapshot's Raft metadata and encoded state, read from the file.
#[derive(Debug, Clone)]
pub struct StoredSnapshot {
    pub meta: SnapshotMeta,
    pub data: Vec<u8>,
}

#[derive(Debug, thiserror::Error)]
pub enum SnapshotFileError {
    #[error("snapshot file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("snapshot file {path} is corrupt: {reason}")]
    Corrupt { path: PathBuf, reason: String },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SnapshotFileError + '_ {
    move |source| SnapshotFileError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A snapshot being written to the temp file. Nothing replaces the current
/// snapshot until [`commit`](Self::commit); dropped uncommitted, it removes
/// its temp file. One writer per directory at a time: the caller
/// serializes them (both would write the same temp file).
pub struct SnapshotWriter {
    dir: PathBuf,
    temp: PathBuf,
    /// `None` once committed.
    file: Option<BufWriter<File>>,
}

impl SnapshotWriter {
    /// Starts a snapshot with `meta`; the state's bytes follow through
    /// [`write_state`](Self::write_state) or [`Write`].
    pub fn create(dir: &Path, meta: &SnapshotMeta) -> Result<Self, SnapshotFileError> {
        let temp = dir.join(TEMP);
        let meta = bincode::serialize(meta).map_err(|e| SnapshotFileError::Corrupt {
            path: temp.clone(),
            reason: e.to_string(),
        })?;
        let file = File::create(&temp).map_err(io(&temp))?;
        let mut writer = SnapshotWriter {
            dir: dir.to_path_buf(),
            temp,
            file: Some(BufWriter::with_capacity(64 * 1024, file)),
        };
        writer
            .write_all(&(meta.len() as u64).to_le_bytes())
            .and_then(|_| writer.write_all(&meta))
            .map_err(io(&writer.temp))?;
        Ok(writer)
    }

    /// Streams `state` in the core's snapshot format: exactly the bytes of
    /// `state.to_snapshot()`, without holding them in memory.
    pub fn write_state(&mut self, state: &StateMachine) -> Result<(), SnapshotFileError> {
        self.write_all(MAGIC)
            .and_then(|_| self.write_all(&SNAPSHOT_FORMAT.to_le_bytes()))
            .map_err(io(&self.temp))?;
        bincode::serialize_into(&mut *self, state).map_err(|e| match *e {
            bincode::ErrorKind::Io(source) => SnapshotFileError::Io {
                path: self.temp.clone(),
                source,
            },
            other => SnapshotFileError::Corrupt {
                path: self.temp.clone(),
                reason: other.to_string(),
            },
        })
    }

    /// Makes the written snapshot durable and the directory's current one.
    /// Returns its size in bytes. On error the current snapshot stays.
    pub fn commit(mut self) -> Result<u64, SnapshotFileError> {
        let file = self.file.take().map(BufWriter::into_inner);
        let synced = match file {
            Some(Ok(file)) => file
                .sync_all()
                .and_then(|_| file.metadata())
                .map(|m| m.len())
                .map_err(io(&self.temp)),
            Some(Err(e)) => Err(io(&self.temp)(e.into_error())),
            None => Err(io(&self.temp)(committed())),
        };
        let bytes = match synced {
            Ok(bytes) => bytes,
            Err(e) => {
                let _ = fs::remove_file(&self.temp);
                return Err(e);
            }
        };
        let target = self.dir.join(FILE);
        fs::rename(&self.temp, &target).map_err(io(&target))?;
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(io(&self.dir))?;
        Ok(bytes)
    }
}

fn committed() -> std::io::Error {
    std::io::Error::other("snapshot writer already committed")
}

impl Write for SnapshotWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match &mut self.file {
            Some(file) => file.write(buf),
            None => Err(committed()),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match &mut self.file {
            Some(file) => file.flush(),
            None => Ok(()),
        }
    }
}

impl Drop for SnapshotWriter {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            // Abandoned: the current snapshot stays; the partial one goes
            // (best effort: the next writer truncates it anyway).
            let _ = fs::remove_file(&self.temp);
        }
    }
}

/// Writes `meta` and already encoded `data` as the directory's current
/// snapshot, durably (a snapshot received from the leader).
pub fn save(dir: &Path, meta: &SnapshotMeta, data: &[u8]) -> Result<u64, SnapshotFileError> {
    let mut writer = SnapshotWriter::create(dir, meta)?;
    writer.write_all(data).map_err(io(&writer.temp))?;
    writer.commit()
}

/// Reads the directory's snapshot, if it has one: into memory, for as long
/// as the caller keeps it (to decode it at start, or to send it).
pub fn load(dir: &Path) -> Result<Option<StoredSnapshot>, SnapshotFileError> {
    let path = dir.join(FILE);
    let file = match File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(&path)(e)),
    };
    let corrupt = |reason: String| SnapshotFileError::Corrupt {
        path: path.clone(),
        reason,
    };
    let size = file.metadata().map_err(io(&path))?.len();
    let mut file = std::io::BufReader::new(file);
    let mut len = [0u8; 8];
    file.read_exact(&mut len).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => corrupt("shorter than its header".into()),
        _ => io(&path)(e),
    })?;
    let len = u64::from_le_bytes(len);
    let data_len = size
        .checked_sub(8)
        .and_then(|rest| rest.checked_sub(len))
        .ok_or_else(|| corrupt(format!("meta length {len} exceeds the file")))?;
    let to_usize = |n: u64| usize::try_from(n).map_err(|e| corrupt(e.to_string()));
    let (len, data_len) = (to_usize(len)?, to_usize(data_len)?);
    let mut meta = vec![0u8; len];
    file.read_exact(&mut meta).map_err(io(&path))?;
    let meta = bincode::deserialize(&meta).map_err(|e| corrupt(e.to_string()))?;
    // One allocation of the exact size: no doubling, no copy.
    let mut data = Vec::with_capacity(data_len);
    file.read_to_end(&mut data).map_err(io(&path))?;
    Ok(Some(StoredSnapshot { meta, data }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use raftlock_core::{Command, QueueKind, SessionId};

    fn meta(index: u64) -> SnapshotMeta {
        SnapshotMeta {
            last_log_id: Some(openraft::LogId::new(
                openraft::CommittedLeaderId::new(1, 1),
                index,
            )),
            last_membership: Default::default(),
            snapshot_id: format!("1-{index}"),
        }
    }

    fn state() -> StateMachine {
        let mut sm = StateMachine::new();
        for i in 0..50u128 {
            let id = SessionId(1_000 + i);
            sm.apply(&Command::OpenSession {
                id,
                owner: "test".into(),
                ttl_ms: 5_000,
            });
            sm.apply(&Command::Acquire {
                kind: QueueKind::Lock,
                name: format!("l{}", i % 7),
                session: id,
                data: vec![i as u8],
                wait: true,
            });
        }
        sm
    }

    #[test]
    fn a_streamed_state_is_the_cores_snapshot_byte_for_byte() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sm = state();
        let mut writer = SnapshotWriter::create(dir.path(), &meta(7)).expect("create");
        writer.write_state(&sm).expect("stream");
        let bytes = writer.commit().expect("commit");
        let loaded = load(dir.path()).expect("load").expect("a snapshot");
        assert_eq!(loaded.meta, meta(7));
        assert_eq!(
            loaded.data,
            sm.to_snapshot().expect("encode"),
            "the core's format changed: update SnapshotWriter::write_state"
        );
        assert!(bytes > loaded.data.len() as u64);
        let back = StateMachine::from_snapshot(&loaded.data).expect("decode");
        assert_eq!(back, sm);
    }

    #[test]
    fn an_uncommitted_snapshot_leaves_the_current_one_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(load(dir.path()).expect("load").is_none());
        save(dir.path(), &meta(1), b"first").expect("save");
        let mut writer = SnapshotWriter::create(dir.path(), &meta(2)).expect("create");
        writer.write_all(b"half of the sec").expect("write");
        drop(writer);
        assert!(!dir.path().join(TEMP).exists(), "temp file removed");
        let loaded = load(dir.path()).expect("load").expect("a snapshot");
        assert_eq!((loaded.meta, loaded.data), (meta(1), b"first".to_vec()));
        save(dir.path(), &meta(3), b"third").expect("save");
        let loaded = load(dir.path()).expect("load").expect("a snapshot");
        assert_eq!((loaded.meta, loaded.data), (meta(3), b"third".to_vec()));
    }

    #[test]
    fn a_truncated_file_is_refused_not_misread() {
        let dir = tempfile::tempdir().expect("tempdir");
        save(dir.path(), &meta(1), b"data").expect("save");
        let path = dir.path().join(FILE);
        let whole = fs::read(&path).expect("read");
        for cut in [0, 5, 8, 20] {
            fs::write(&path, &whole[..cut]).expect("write");
            match load(dir.path()) {
                Err(SnapshotFileError::Corrupt { .. }) => {}
                other => panic!("cut at {cut}: {other:?}"),
            }
        }
        // A huge meta length is refused before anything is allocated.
        let mut bad = u64::MAX.to_le_bytes().to_vec();
        bad.extend_from_slice(&whole[8..]);
        fs::write(&path, bad).expect("write");
        assert!(matches!(
            load(dir.path()),
            Err(SnapshotFileError::Corrupt { .. })
        ));
    }
}

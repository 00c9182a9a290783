//! The newest snapshot on disk: `snapshot.bin` in the data directory,
//! replaced atomically (write to a temp file, fsync, rename, fsync the
//! directory), so a crash leaves either the old or the new one whole.
//!
//! Layout: u64 little-endian length of the bincode `SnapshotMeta`, the
//! meta, then the state machine's own snapshot bytes.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::typ::SnapshotMeta;

const FILE: &str = "snapshot.bin";
const TEMP: &str = "snapshot.bin.tmp";

/// A snapshot's Raft metadata and encoded state.
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

/// Writes `snapshot` as the directory's current snapshot, durably.
pub fn save(dir: &Path, snapshot: &StoredSnapshot) -> Result<(), SnapshotFileError> {
    let temp = dir.join(TEMP);
    let meta = bincode::serialize(&snapshot.meta).map_err(|e| SnapshotFileError::Corrupt {
        path: temp.clone(),
        reason: e.to_string(),
    })?;
    let mut file = File::create(&temp).map_err(io(&temp))?;
    file.write_all(&(meta.len() as u64).to_le_bytes())
        .and_then(|_| file.write_all(&meta))
        .and_then(|_| file.write_all(&snapshot.data))
        .and_then(|_| file.sync_all())
        .map_err(io(&temp))?;
    let target = dir.join(FILE);
    fs::rename(&temp, &target).map_err(io(&target))?;
    File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir))
}

/// Reads the directory's snapshot, if it has one.
pub fn load(dir: &Path) -> Result<Option<StoredSnapshot>, SnapshotFileError> {
    let path = dir.join(FILE);
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(&path)(e)),
    };
    let corrupt = |reason: String| SnapshotFileError::Corrupt {
        path: path.clone(),
        reason,
    };
    let (len, rest) = bytes
        .split_first_chunk::<8>()
        .ok_or_else(|| corrupt("shorter than its header".into()))?;
    let len = usize::try_from(u64::from_le_bytes(*len)).map_err(|e| corrupt(e.to_string()))?;
    if len > rest.len() {
        return Err(corrupt(format!("meta length {len} exceeds the file")));
    }
    let (meta, data) = rest.split_at(len);
    let meta = bincode::deserialize(meta).map_err(|e| corrupt(e.to_string()))?;
    Ok(Some(StoredSnapshot {
        meta,
        data: data.to_vec(),
    }))
}

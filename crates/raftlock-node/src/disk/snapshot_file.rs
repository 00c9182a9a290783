//! The newest snapshot on disk: `snapshot.bin` in the data directory,
//! replaced atomically (write to a temp file, fsync, rename, fsync the
//! directory), so a crash leaves either the old or the new one whole.
//!
//! Layout (format 1): `RLSF`, the format (u32 LE), the length of the
//! bincode `SnapshotMeta` (u64 LE), the meta, the state machine's own
//! snapshot bytes; then a trailer: a CRC32 (IEEE, `crc32fast`) of each
//! 64 KiB block of everything before the trailer (u32 LE each), the number
//! of blocks (u64 LE), a CRC32 of those two, and `RLSE`. Loading checks
//! every block before decoding anything and names the byte range of the
//! first bad block; a file of another format (or none: the format before
//! checksums started with the meta's length) is refused by name.
//!
//! The file is the only copy: nothing keeps a snapshot's bytes in memory
//! between snapshots. A build streams the state into a [`SnapshotWriter`]
//! (no encoded copy in memory at all); the bytes are read back only to
//! send them to a peer and once at start.

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use raftlock_core::{StateMachine, SNAPSHOT_FORMAT};

use crate::raft::typ::SnapshotMeta;

const FILE: &str = "snapshot.bin";
const TEMP: &str = "snapshot.bin.tmp";

/// Leading magic bytes and format of the file (not of the state inside).
const FILE_MAGIC: &[u8; 4] = b"RLSF";
const FILE_FORMAT: u32 = 1;
/// Trailing magic bytes: the trailer was written whole.
const END_MAGIC: &[u8; 4] = b"RLSE";
/// Bytes per checksummed block.
const BLOCK: usize = 64 * 1024;
/// Bytes of the header before the meta: magic, format, meta length.
const HEADER: usize = 4 + 4 + 8;
/// Bytes of the trailer after the block checksums: count, its CRC, magic.
const TRAILER_TAIL: usize = 8 + 4 + 4;

/// CRC32 of each [`BLOCK`] of the bytes written so far.
#[derive(Default)]
struct BlockSums {
    sums: Vec<u32>,
    current: crc32fast::Hasher,
    filled: usize,
}

impl BlockSums {
    fn update(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let take = (BLOCK - self.filled).min(bytes.len());
            self.current.update(&bytes[..take]);
            self.filled += take;
            bytes = &bytes[take..];
            if self.filled == BLOCK {
                let full = std::mem::take(&mut self.current);
                self.sums.push(full.finalize());
                self.filled = 0;
            }
        }
    }

    /// The trailer: every block's sum (the last may be partial), the count,
    /// a CRC of both, the end magic.
    fn trailer(mut self) -> Vec<u8> {
        if self.filled > 0 {
            self.sums.push(self.current.finalize());
        }
        let mut out = Vec::with_capacity(self.sums.len() * 4 + TRAILER_TAIL);
        for sum in &self.sums {
            out.extend_from_slice(&sum.to_le_bytes());
        }
        out.extend_from_slice(&(self.sums.len() as u64).to_le_bytes());
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(END_MAGIC);
        out
    }
}

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

/// Why a member's snapshot file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotFileError {
    /// Reading, writing or syncing failed.
    #[error("snapshot file {path}: {source}")]
    Io {
        /// The snapshot file.
        path: PathBuf,
        /// The IO error.
        source: std::io::Error,
    },
    /// The file does not hold a whole snapshot.
    #[error("snapshot file {path} is corrupt: {reason}")]
    Corrupt {
        /// The snapshot file.
        path: PathBuf,
        /// What does not check out.
        reason: String,
    },
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
    /// Checksums of what was written, for the trailer.
    sums: BlockSums,
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
            sums: BlockSums::default(),
        };
        writer
            .write_all(FILE_MAGIC)
            .and_then(|_| writer.write_all(&FILE_FORMAT.to_le_bytes()))
            .and_then(|_| writer.write_all(&(meta.len() as u64).to_le_bytes()))
            .and_then(|_| writer.write_all(&meta))
            .map_err(io(&writer.temp))?;
        Ok(writer)
    }

    /// Streams `state` in the core's snapshot format: exactly the bytes of
    /// `state.to_snapshot()`, without holding them in memory.
    pub fn write_state(&mut self, state: &StateMachine) -> Result<(), SnapshotFileError> {
        encode_state(&mut *self, state).map_err(|e| match *e {
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
        let trailer = std::mem::take(&mut self.sums).trailer();
        let file = match self.file.as_mut().map(|f| f.write_all(&trailer)) {
            Some(Err(e)) => {
                self.file = None;
                let _ = fs::remove_file(&self.temp);
                return Err(io(&self.temp)(e));
            }
            _ => self.file.take().map(BufWriter::into_inner),
        };
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
        sync_dir(&self.dir)?;
        Ok(bytes)
    }
}

/// Encodes `state` into `out` in the core's snapshot format: exactly the
/// bytes of `state.to_snapshot()`, without an intermediate copy (snapshot
/// files and backups stream the state straight to where it goes).
pub(crate) fn encode_state(mut out: impl Write, state: &StateMachine) -> bincode::Result<()> {
    out.write_all(MAGIC)?;
    out.write_all(&SNAPSHOT_FORMAT.to_le_bytes())?;
    bincode::serialize_into(out, state)
}

/// Makes the directory's entries (a renamed snapshot file) durable.
pub fn sync_dir(dir: &Path) -> Result<(), SnapshotFileError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir))
}

fn committed() -> std::io::Error {
    std::io::Error::other("snapshot writer already committed")
}

impl Write for SnapshotWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match &mut self.file {
            Some(file) => {
                let n = file.write(buf)?;
                self.sums.update(&buf[..n]);
                Ok(n)
            }
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
/// as the caller keeps it (to decode it at start, or to send it). Every
/// byte is checked against the file's checksums first.
pub fn load(dir: &Path) -> Result<Option<StoredSnapshot>, SnapshotFileError> {
    let path = dir.join(FILE);
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(&path)(e)),
    };
    parse(bytes)
        .map(Some)
        .map_err(|reason| SnapshotFileError::Corrupt { path, reason })
}

/// Decodes the bytes of a snapshot file (checksums, header, meta); the
/// reason names the offset of what is wrong. The fuzz targets call it too.
pub(crate) fn parse(mut bytes: Vec<u8>) -> Result<StoredSnapshot, String> {
    let total = bytes.len();
    if bytes.len() < 8 || &bytes[..4] != FILE_MAGIC {
        return Err(format!(
            "not a snapshot file of format {FILE_FORMAT} (no `RLSF` at offset 0): written by \
             an older raftlock (before checksums), or damaged"
        ));
    }
    let format = u32::from_le_bytes(bytes[4..8].try_into().expect("4 bytes"));
    if format != FILE_FORMAT {
        return Err(format!(
            "snapshot file format {format} at offset 4; this version reads format {FILE_FORMAT}"
        ));
    }
    let body = verify_trailer(&bytes)?;
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    if body < HEADER {
        return Err(format!("{total} bytes: shorter than its header"));
    }
    let meta_len = u64_at(8);
    let data_at = usize::try_from(meta_len)
        .ok()
        .and_then(|len| HEADER.checked_add(len))
        .filter(|end| *end <= body)
        .ok_or_else(|| format!("meta length {meta_len} at offset 8 exceeds the file"))?;
    let meta = bincode::deserialize(&bytes[HEADER..data_at])
        .map_err(|e| format!("meta at offset {HEADER}: {e}"))?;
    // The state's bytes, in place: no second buffer of the snapshot's size.
    bytes.truncate(body);
    bytes.drain(..data_at);
    Ok(StoredSnapshot { meta, data: bytes })
}

/// `body` (header, meta, state) with a valid trailer appended: lets the
/// fuzz target reach the parsing behind the checksums.
pub(crate) fn with_trailer(body: &[u8]) -> Vec<u8> {
    let mut sums = BlockSums::default();
    sums.update(body);
    let mut out = body.to_vec();
    out.extend_from_slice(&sums.trailer());
    out
}

/// Checks the trailer and every block; returns the length of what the
/// trailer covers.
fn verify_trailer(bytes: &[u8]) -> Result<usize, String> {
    let total = bytes.len();
    let bad_end = || format!("{total} bytes: no whole trailer (truncated or torn write)");
    let tail_at = total.checked_sub(TRAILER_TAIL).ok_or_else(bad_end)?;
    if &bytes[total - 4..] != END_MAGIC {
        return Err(bad_end());
    }
    let count = u64::from_le_bytes(bytes[tail_at..tail_at + 8].try_into().expect("8 bytes"));
    let sums_at = usize::try_from(count)
        .ok()
        .and_then(|c| c.checked_mul(4))
        .and_then(|len| tail_at.checked_sub(len))
        .ok_or_else(|| format!("block count {count} at offset {tail_at} exceeds the file"))?;
    let stored = u32::from_le_bytes(bytes[tail_at + 8..tail_at + 12].try_into().expect("4"));
    let computed = crc32fast::hash(&bytes[sums_at..tail_at + 8]);
    if stored != computed {
        return Err(format!(
            "checksum mismatch in the trailer at offset {sums_at}..{}",
            tail_at + 12
        ));
    }
    let body = sums_at;
    if body.div_ceil(BLOCK) as u64 != count {
        return Err(format!(
            "trailer at offset {sums_at} lists {count} blocks for {body} bytes"
        ));
    }
    for (i, block) in bytes[..body].chunks(BLOCK).enumerate() {
        let at = sums_at + 4 * i;
        let stored = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        let computed = crc32fast::hash(block);
        if stored != computed {
            let start = i * BLOCK;
            return Err(format!(
                "checksum mismatch in bytes {start}..{} (stored {stored:#010x}, computed \
                 {computed:#010x})",
                start + block.len()
            ));
        }
    }
    Ok(body)
}

#[cfg(test)]
pub(crate) mod tests {
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

    /// 50 sessions queued on 7 locks (also the backup tests' state).
    pub(crate) fn state() -> StateMachine {
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
        for cut in [0, 5, 8, 20, whole.len() - 1] {
            fs::write(&path, &whole[..cut]).expect("write");
            match load(dir.path()) {
                Err(SnapshotFileError::Corrupt { .. }) => {}
                other => panic!("cut at {cut}: {other:?}"),
            }
        }
        // The format before checksums (meta length first) is refused by name.
        let mut old = 5u64.to_le_bytes().to_vec();
        old.extend_from_slice(b"meta!data");
        fs::write(&path, old).expect("write");
        let err = load(dir.path()).expect_err("old format").to_string();
        assert!(err.contains("older raftlock"), "{err}");
    }

    #[test]
    fn a_flipped_byte_is_refused_with_its_block() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sm = state();
        let mut big = Vec::new();
        // Over three blocks, so the damage is located.
        while big.len() < 3 * BLOCK {
            big.extend_from_slice(&sm.to_snapshot().expect("encode"));
        }
        save(dir.path(), &meta(4), &big).expect("save");
        let path = dir.path().join(FILE);
        let whole = fs::read(&path).expect("read");
        let loaded = load(dir.path()).expect("load").expect("one");
        assert_eq!(loaded.data, big);
        for (at, range) in [
            (20, "bytes 0..65536".to_string()),
            (BLOCK + 7, "bytes 65536..131072".to_string()),
            (whole.len() - 20, "trailer".to_string()),
        ] {
            let mut bad = whole.clone();
            bad[at] ^= 0x08;
            fs::write(&path, &bad).expect("write");
            let err = load(dir.path()).expect_err("flipped").to_string();
            assert!(err.contains(&range), "offset {at}: {err}");
            assert!(err.contains("snapshot.bin"), "{err}");
        }
    }
}

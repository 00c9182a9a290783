//! The watermark record: a small file next to sled's (`raftlock.watermark`)
//! saying which vote was cast and how far the log was purged.
//!
//! sled 0.34 recovers its data file by replaying it in order and stops at
//! the first record whose own checksum fails, *silently*: a few flipped
//! bytes in the middle of `db` lose every later write, the vote and the
//! purge pointer with it, and the store opens as if nothing happened (issue
//! 14). Forgetting a vote lets a member vote twice in one term; forgetting
//! the purge pointer makes the log claim entries it deleted. This record
//! lives outside sled, so sled cannot drop it together with what it
//! describes. (Log entries are not in sled any more: the segment files
//! check their own tail, see `segment/recovery.rs`.)
//!
//! Written by the durability barrier *after* sled's data is synced and
//! *before* any request the barrier serves is completed, and only when it
//! changed (votes and purges are rare: the appends' barriers skip it):
//! * `purged` is the purge pointer's index, and the vote is one sled held
//!   durably, never newer than sled's: both are taken from sled's trees
//!   when the barrier starts, before sled is flushed.
//!
//! At open, then: a purge pointer or a vote older than the record's means
//! sled lost acknowledged state (refuse).
//!
//! Layout: two 256-byte slots, written alternately with `pwrite` and
//! `fdatasync`; each is `RLWM`, format (u32 LE), sequence number (u64 LE),
//! `purged` (u64 LE), vote length (u16 LE, `u16::MAX`: no vote), the vote's
//! bincode bytes, zero padding, and a CRC32 of the slot's first 252 bytes.
//! A torn write spoils one slot; the other still holds the previous record
//! (older, so weaker claims: never a false refusal). Reading picks the valid
//! slot with the higher sequence number.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// File name in the log store's directory.
pub(crate) const FILE: &str = "raftlock.watermark";
/// Format of the record (and of the whole store: see `store.rs`).
pub(crate) const FORMAT: u32 = 2;

const MAGIC: &[u8; 4] = b"RLWM";
const SLOT: usize = 256;
const CRC_AT: usize = SLOT - 4;
const VOTE_AT: usize = 4 + 4 + 8 + 8 + 2;
const NO_VOTE: u16 = u16::MAX;

/// What the record says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Mark {
    /// Index of the purge pointer sled held (0: none).
    pub(crate) purged: u64,
    /// bincode of the vote sled held durably; `None`: no vote yet.
    pub(crate) vote: Option<Vec<u8>>,
}

impl Mark {
    /// Whether the record claims anything at all.
    pub(crate) fn is_empty(&self) -> bool {
        self.purged == 0 && self.vote.is_none()
    }
}

/// Why a slot is not a valid record of `expected` format.
fn decode_slot(slot: &[u8], expected: u32) -> Result<(u64, Mark), String> {
    let crc = u32::from_le_bytes(slot[CRC_AT..].try_into().expect("4 bytes"));
    let computed = crc32fast::hash(&slot[..CRC_AT]);
    if crc != computed {
        return Err(format!(
            "checksum mismatch (stored {crc:#010x}, computed {computed:#010x})"
        ));
    }
    if &slot[..4] != MAGIC {
        return Err("bad magic bytes".into());
    }
    let u64_at = |at: usize| u64::from_le_bytes(slot[at..at + 8].try_into().expect("8 bytes"));
    let format = u32::from_le_bytes(slot[4..8].try_into().expect("4 bytes"));
    if format != expected {
        return Err(format!("format {format}, this version reads {expected}"));
    }
    let (seq, purged) = (u64_at(8), u64_at(16));
    let len = u16::from_le_bytes(slot[24..26].try_into().expect("2 bytes"));
    let vote = match len {
        NO_VOTE => None,
        len if VOTE_AT + usize::from(len) <= CRC_AT => {
            Some(slot[VOTE_AT..VOTE_AT + usize::from(len)].to_vec())
        }
        len => return Err(format!("vote length {len} exceeds the slot")),
    };
    Ok((seq, Mark { purged, vote }))
}

fn encode_slot(seq: u64, mark: &Mark) -> io::Result<[u8; SLOT]> {
    let mut slot = [0u8; SLOT];
    slot[..4].copy_from_slice(MAGIC);
    slot[4..8].copy_from_slice(&FORMAT.to_le_bytes());
    slot[8..16].copy_from_slice(&seq.to_le_bytes());
    slot[16..24].copy_from_slice(&mark.purged.to_le_bytes());
    let len = match &mark.vote {
        None => NO_VOTE,
        Some(vote) if VOTE_AT + vote.len() <= CRC_AT => {
            slot[VOTE_AT..VOTE_AT + vote.len()].copy_from_slice(vote);
            vote.len() as u16
        }
        Some(vote) => {
            return Err(io::Error::other(format!(
                "vote of {} bytes does not fit the watermark record",
                vote.len()
            )))
        }
    };
    slot[24..26].copy_from_slice(&len.to_le_bytes());
    let crc = crc32fast::hash(&slot[..CRC_AT]);
    slot[CRC_AT..].copy_from_slice(&crc.to_le_bytes());
    Ok(slot)
}

/// The newest valid record in `path`: `Ok(None)` if the file does not
/// exist, `Err(reason)` if it exists but holds no valid record.
pub(crate) fn read(path: &Path) -> io::Result<Result<Option<(u64, Mark)>, String>> {
    read_format(path, FORMAT)
}

/// [`read`] for records of `format` (1: the format before the segment
/// files, whose `purged` field held the greatest acknowledged index).
pub(crate) fn read_format(
    path: &Path,
    format: u32,
) -> io::Result<Result<Option<(u64, Mark)>, String>> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Ok(None)),
        Err(e) => return Err(e),
    };
    if bytes.len() != 2 * SLOT {
        return Ok(Err(format!(
            "{} bytes long, expected {}",
            bytes.len(),
            2 * SLOT
        )));
    }
    let slots = [
        decode_slot(&bytes[..SLOT], format),
        decode_slot(&bytes[SLOT..], format),
    ];
    let best = slots
        .iter()
        .filter_map(|s| s.as_ref().ok())
        .max_by_key(|(seq, _)| *seq);
    Ok(match best {
        Some(record) => Ok(Some(record.clone())),
        None => Err(format!(
            "no valid record: slot at offset 0: {}; slot at offset {SLOT}: {}",
            slots[0].as_ref().err().map_or("", |e| e),
            slots[1].as_ref().err().map_or("", |e| e),
        )),
    })
}

/// The record file, open for the durability worker.
pub(crate) struct WatermarkFile {
    file: File,
    path: PathBuf,
    /// Sequence number of the last record written.
    seq: u64,
    /// The last record written (a barrier that changes nothing skips it).
    last: Option<Mark>,
    /// `fdatasync` after each write (`Durability::Fsync`).
    sync: bool,
}

impl WatermarkFile {
    /// Opens (creating, two zeroed slots) the file; `seq` is the sequence
    /// number of the newest record in it.
    pub(crate) fn open(path: &Path, seq: u64, sync: bool) -> io::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        if file.metadata()?.len() != 2 * SLOT as u64 {
            file.set_len(2 * SLOT as u64)?;
        }
        Ok(Self {
            file,
            path: path.to_path_buf(),
            seq,
            last: None,
            sync,
        })
    }

    /// Durably records `mark` (unless it is the record already written).
    pub(crate) fn write(&mut self, mark: &Mark) -> io::Result<()> {
        if self.last.as_ref() == Some(mark) {
            return Ok(());
        }
        let seq = self.seq + 1;
        let slot = encode_slot(seq, mark)?;
        let at = (seq % 2) * SLOT as u64;
        self.file
            .write_all_at(&slot, at)
            .and_then(|()| {
                if self.sync {
                    self.file.sync_data()
                } else {
                    Ok(())
                }
            })
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", self.path.display())))?;
        self.seq = seq;
        self.last = Some(mark.clone());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_valid_slot_wins_and_a_torn_one_falls_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(FILE);
        assert_eq!(read(&path).expect("io"), Ok(None));
        let mut file = WatermarkFile::open(&path, 0, true).expect("open");
        let first = Mark {
            purged: 7,
            vote: Some(vec![1, 2, 3]),
        };
        let second = Mark {
            purged: 9,
            vote: None,
        };
        file.write(&first).expect("write");
        file.write(&second).expect("write");
        assert_eq!(read(&path).expect("io"), Ok(Some((2, second))));
        // Spoil the newer slot (seq 2 lives at offset 0).
        let mut bytes = std::fs::read(&path).expect("read");
        bytes[20] ^= 0x40;
        std::fs::write(&path, &bytes).expect("write");
        assert_eq!(read(&path).expect("io"), Ok(Some((1, first))));
        bytes[SLOT + 20] ^= 0x40;
        std::fs::write(&path, &bytes).expect("write");
        let err = read(&path).expect("io").expect_err("both slots bad");
        assert!(err.contains("offset 256: checksum mismatch"), "{err}");
    }
}

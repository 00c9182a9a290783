//! One segment file: a header, then records written with `pwrite` into
//! space that was zero-filled beforehand.
//!
//! Why zero-filled, not just `fallocate`d: an `fdatasync` must also write
//! whatever metadata is needed to read the data back. Appending past the
//! end of a file changes its size, and writing into `fallocate`d space
//! turns "unwritten" extents into written ones (ext4, XFS); both are
//! metadata, so every sync would also commit the file system's journal.
//! Writing into blocks that already hold (zero) data changes no metadata,
//! so the sync is one data write and a cache flush. The file grows in
//! [`CHUNK`]-byte steps of zeros, so the journal is committed once per
//! chunk, not once per append; and the zeros are what marks the end of the
//! written records (`record.rs`).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::fs::{LogFile, SegmentFs};

/// Zero-filled space is added this many bytes at a time. Small enough that
/// a full disk shows up within a few hundred appends (the node then steps
/// down and recovers in place, docs/design.md; with more room reserved it
/// would go on writing while its snapshot writes fail), large enough that
/// the journal commit of a growth is paid by one barrier in hundreds.
pub(crate) const CHUNK: u64 = 64 * 1024;
/// Bytes of the file header; records start here.
pub(crate) const HEADER: u64 = 32;
const MAGIC: &[u8; 8] = b"RLSEG\x00\x00\x01";

/// File name of segment `seq`: sorts in sequence order.
pub(crate) fn name(seq: u64) -> String {
    format!("segment-{seq:016x}.log")
}

/// The sequence number in a segment file's name, `None` for other files.
pub(crate) fn parse_name(name: &str) -> Option<u64> {
    let hex = name.strip_prefix("segment-")?.strip_suffix(".log")?;
    if hex.len() != 16 {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

fn header(seq: u64) -> [u8; HEADER as usize] {
    let mut h = [0u8; HEADER as usize];
    h[..8].copy_from_slice(MAGIC);
    h[8..16].copy_from_slice(&seq.to_le_bytes());
    let crc = crc32fast::hash(&h[..16]);
    h[16..20].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Why the header of segment `seq` is not valid, if it is not.
pub(crate) fn check_header(bytes: &[u8], seq: u64) -> Result<(), String> {
    match bytes.get(..HEADER as usize) {
        Some(h) if h == header(seq) => Ok(()),
        Some(h) if h.iter().all(|b| *b == 0) => Err("the file header is zero".into()),
        Some(_) => Err(format!("not the header of segment {seq}")),
        None => Err(format!(
            "{} bytes long, shorter than its header",
            bytes.len()
        )),
    }
}

/// A segment open for appending (and, through [`SegmentFile::handle`], for
/// reading and syncing from other threads).
pub(crate) struct SegmentFile<T: LogFile> {
    pub(crate) seq: u64,
    pub(crate) path: PathBuf,
    file: Arc<T>,
    /// Bytes of the file that exist (written or zero-filled).
    zeroed: u64,
}

impl<T: LogFile> SegmentFile<T> {
    /// Creates segment `seq` in `dir` with its header and one chunk of
    /// zeros. Not synced: the next barrier syncs it and the directory.
    pub(crate) fn create<F: SegmentFs<File = T>>(fs: &F, dir: &Path, seq: u64) -> io::Result<Self> {
        let path = dir.join(name(seq));
        let file = fs.create_new(&path)?;
        let mut first = vec![0u8; CHUNK as usize];
        first[..HEADER as usize].copy_from_slice(&header(seq));
        file.write_all_at(&first, 0)?;
        Ok(Self {
            seq,
            path,
            file: Arc::new(file),
            zeroed: CHUNK,
        })
    }

    /// Opens an existing segment for appending; `len` is its size.
    pub(crate) fn open<F: SegmentFs<File = T>>(
        fs: &F,
        path: &Path,
        seq: u64,
        len: u64,
    ) -> io::Result<Self> {
        let file = fs.open_rw(path)?;
        Ok(Self {
            seq,
            path: path.to_path_buf(),
            file: Arc::new(file),
            zeroed: len,
        })
    }

    /// The shared descriptor (reads, `fdatasync`).
    pub(crate) fn handle(&self) -> Arc<T> {
        Arc::clone(&self.file)
    }

    /// Writes `bytes` at `at`, first adding zeroed chunks if they would run
    /// past the zero-filled space.
    pub(crate) fn write_at(&mut self, bytes: &[u8], at: u64) -> io::Result<()> {
        let end = at + bytes.len() as u64;
        if end > self.zeroed {
            let grown = end.next_multiple_of(CHUNK).max(self.zeroed + CHUNK);
            let zeros = vec![0u8; (grown - self.zeroed) as usize];
            self.file.write_all_at(&zeros, self.zeroed)?;
            self.zeroed = grown;
        }
        self.file.write_all_at(bytes, at)
    }

    /// Overwrites everything from `at` to the end with zeros (the open-time
    /// repair of a torn tail).
    pub(crate) fn zero_from(&mut self, at: u64) -> io::Result<()> {
        if at < self.zeroed {
            let zeros = vec![0u8; (self.zeroed - at) as usize];
            self.file.write_all_at(&zeros, at)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::fs::StdFs;
    use super::*;

    #[test]
    fn names_round_trip_and_sort() {
        assert_eq!(parse_name(&name(0x2a)), Some(0x2a));
        assert!(name(9) < name(10));
        assert_eq!(parse_name("segment-2a.log"), None);
        assert_eq!(parse_name("db"), None);
    }

    #[test]
    fn grows_in_zeroed_chunks() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut seg = SegmentFile::create(&StdFs, dir.path(), 3).expect("create");
        let len = |p: &Path| std::fs::metadata(p).expect("meta").len();
        assert_eq!(len(&seg.path), CHUNK);
        seg.write_at(&[1u8; 16], CHUNK - 8).expect("write");
        assert_eq!(len(&seg.path), 2 * CHUNK);
        let bytes = std::fs::read(&seg.path).expect("read");
        assert_eq!(check_header(&bytes, 3), Ok(()));
        assert!(check_header(&bytes, 4).is_err());
        assert_eq!(&bytes[CHUNK as usize - 8..CHUNK as usize + 8], &[1u8; 16]);
    }
}

//! The file operations the segment log performs, behind one seam.
//!
//! [`StdFs`] is the real file system and the default everywhere; the
//! deterministic simulator implements [`SegmentFs`] over a simulated disk
//! (feature `simulation`), so it runs this module's real recovery and
//! torn-tail handling. Static dispatch: the std path compiles to the same
//! calls as before the seam.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// An open segment file: positioned reads and writes, and a data sync.
pub trait LogFile: Send + Sync + 'static {
    /// Writes all of `buf` at offset `at` (`pwrite`).
    fn write_all_at(&self, buf: &[u8], at: u64) -> io::Result<()>;
    /// Fills `buf` from offset `at` (`pread`); an error if the file ends first.
    fn read_exact_at(&self, buf: &mut [u8], at: u64) -> io::Result<()>;
    /// Makes every write made to this file so far durable (`fdatasync`).
    fn sync_data(&self) -> io::Result<()>;
}

/// The directory operations of the segment log, and how it opens files.
pub trait SegmentFs: Clone + Send + Sync + 'static {
    /// An open file.
    type File: LogFile;
    /// Creates `path` for reading and writing; an error if it exists.
    fn create_new(&self, path: &Path) -> io::Result<Self::File>;
    /// Opens the existing `path` for reading and writing.
    fn open_rw(&self, path: &Path) -> io::Result<Self::File>;
    /// Opens the existing `path` for reading.
    fn open_read(&self, path: &Path) -> io::Result<Self::File>;
    /// The whole content of `path`.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// The names of the entries of `dir`.
    fn list(&self, dir: &Path) -> io::Result<Vec<OsString>>;
    /// Removes the file `path`.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Makes the creations and removals of entries in `dir` durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
}

/// The real file system.
#[derive(Clone, Copy, Debug, Default)]
pub struct StdFs;

impl LogFile for File {
    #[inline]
    fn write_all_at(&self, buf: &[u8], at: u64) -> io::Result<()> {
        FileExt::write_all_at(self, buf, at)
    }
    #[inline]
    fn read_exact_at(&self, buf: &mut [u8], at: u64) -> io::Result<()> {
        FileExt::read_exact_at(self, buf, at)
    }
    #[inline]
    fn sync_data(&self) -> io::Result<()> {
        File::sync_data(self)
    }
}

impl SegmentFs for StdFs {
    type File = File;
    fn create_new(&self, path: &Path) -> io::Result<File> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
    }
    fn open_rw(&self, path: &Path) -> io::Result<File> {
        OpenOptions::new().read(true).write(true).open(path)
    }
    fn open_read(&self, path: &Path) -> io::Result<File> {
        File::open(path)
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        std::fs::read(path)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<OsString>> {
        std::fs::read_dir(dir)?
            .map(|e| e.map(|e| e.file_name()))
            .collect()
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
}

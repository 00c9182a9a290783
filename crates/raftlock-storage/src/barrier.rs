//! The durability barrier: after [`Barrier::sync`] returns `Ok`, everything
//! written to the log's segment files and the sled database before the call
//! survives a power loss (in [`Durability::Fsync`] mode) or a process crash
//! (in [`Durability::FlushOnly`] mode).
//!
//! # The common case: one `fdatasync`
//!
//! Appends and committed ids go to the segment files (`segment/`), which a
//! barrier syncs with one `fdatasync` per segment written since the last
//! one (almost always one). sled is flushed and synced (below) only when it
//! was written since the last barrier (`sled_dirty.rs`: votes, purges,
//! metadata), and the watermark record only when it changed.
//!
//! # Why sled's `flush()` is not enough
//!
//! Reading sled 0.34.7's source (`pagecache/iobuf.rs`, `blob_io.rs`,
//! `config.rs`):
//!
//! * `Db::flush()` writes the pending IO buffers with `pwrite` and then calls
//!   `sync_file_range(WAIT_BEFORE | WRITE | WAIT_AFTER)` on the written range
//!   of the `db` file (github.com/spacejam/sled/issues/1452). That pushes the pages to the device
//!   but issues no cache-flush command and does not persist the file size,
//!   so a power loss can still lose an acknowledged write or a segment that
//!   grew the file.
//! * Values larger than about a quarter of a 512 KiB segment are written to
//!   separate files under `blobs/` with plain `write` calls and are never
//!   synced, nor is the `blobs/` directory.
//! * `conf` is written without a sync, and the snapshot file sled writes at
//!   start-up is renamed into place without syncing the directory.
//! * sled's own background thread `fsync`s the `db` file every 500 ms; a
//!   Raft acknowledgement cannot wait for that.
//!
//! # What the barrier does
//!
//! Once at open: `fsync` `conf`, `db`, every existing blob file, the
//! `blobs/` directory, the database directory and its parent (the directory
//! entries sled created during open). Then, per barrier:
//!
//! 1. `Db::flush()` — sled's IO buffers reach the kernel and are written back;
//! 2. `fdatasync(db)` — device cache flush, plus the file size if a new
//!    segment grew the file (`fdatasync` persists metadata needed to read the
//!    data back, and size is such metadata);
//! 3. list `blobs/`; `fdatasync` each blob file that is new or changed size
//!    since it was last synced, then `fsync` the `blobs/` directory if any
//!    was. The size check matters: a blob being written by a concurrent,
//!    later write may be half-written when listed; it is synced again once
//!    its size is final. Blobs are write-once, so a stable size means
//!    complete content.
//!
//! sled only changes the entries of the database directory itself at open
//! (conf, db, blobs/, snapshot rename), so that directory is synced once.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use crate::config::Durability;
use crate::error::StoreError;
use crate::segment::LogSync;
use crate::sled_dirty::SledDirty;
use crate::watermark::{Mark, WatermarkFile};

/// Makes prior writes to one sled database durable. Owned by the single
/// durability worker thread, so it needs no internal locking.
pub(crate) struct Barrier {
    db: sled::Db,
    /// `None` in [`Durability::FlushOnly`] mode.
    files: Option<SyncedFiles>,
    /// The record of what sled must still hold at the next open (see
    /// `watermark.rs`); `None` only in unit tests of the worker.
    watermark: Option<WatermarkHook>,
    /// The log's segment files; `None` only in unit tests of the worker.
    log: Option<Box<dyn LogSync>>,
    /// Whether sled must be flushed and synced.
    sled_dirty: SledDirty,
    /// [`Durability::Fsync`].
    fsync: bool,
}

/// Reads the [`Mark`] sled's trees justify now; run before sled is flushed.
pub(crate) type MarkSource = Box<dyn FnMut() -> Result<Mark, StoreError> + Send>;

/// What a barrier needs to keep the watermark record.
pub(crate) struct WatermarkHook {
    pub(crate) file: WatermarkFile,
    pub(crate) source: MarkSource,
}

impl WatermarkHook {
    /// The mark to record: taken from sled before it is flushed, so the
    /// flush covers everything it claims.
    fn take(&mut self) -> Result<Mark, StoreError> {
        (self.source)()
    }
}

impl Barrier {
    /// Prepares the barrier for the database open at `dir`, and in
    /// [`Durability::Fsync`] mode makes everything sled wrote during open
    /// (and all writes made so far) durable.
    pub(crate) fn open(
        db: sled::Db,
        dir: &Path,
        mode: Durability,
        sled_dirty: SledDirty,
    ) -> Result<Self, StoreError> {
        db.flush()?;
        let files = match mode {
            Durability::FlushOnly => None,
            Durability::Fsync => Some(SyncedFiles::open(dir)?),
        };
        Ok(Self {
            db,
            files,
            watermark: None,
            log: None,
            sled_dirty,
            fsync: mode == Durability::Fsync,
        })
    }

    /// Syncs the log's segment files with every barrier from now on.
    pub(crate) fn with_log(mut self, log: Box<dyn LogSync>) -> Self {
        self.log = Some(log);
        self
    }

    /// At close, after the last barrier: the log's final mark (see
    /// `segment/recovery.rs`).
    pub(crate) fn close(&mut self) -> Result<(), StoreError> {
        match &self.log {
            Some(log) => log.close(self.fsync),
            None => Ok(()),
        }
    }

    /// Keeps the watermark record with every barrier from now on, and
    /// writes it once now (everything found on disk was just made durable).
    pub(crate) fn with_watermark(mut self, mut hook: WatermarkHook) -> Result<Self, StoreError> {
        let mark = hook.take()?;
        hook.file.write(&mark)?;
        self.watermark = Some(hook);
        Ok(self)
    }

    /// Returns once every write made to the database before this call is
    /// durable according to the configured [`Durability`].
    pub(crate) fn sync(&mut self) -> Result<(), StoreError> {
        let mark = self
            .watermark
            .as_mut()
            .map(WatermarkHook::take)
            .transpose()?;
        let ticket = self.log.as_ref().map(|log| log.begin_sync()).transpose()?;
        if self.sled_dirty.take() {
            self.db.flush()?;
            if let Some(files) = &mut self.files {
                files.sync()?;
            }
        }
        if let Some(ticket) = &ticket {
            if self.fsync {
                ticket.sync()?;
            }
            // After sled's sync: the purge pointer that lets these go is
            // durable (a file that survives a crash holds only purged
            // entries, and is deleted again at open).
            ticket.remove_doomed()?;
        }
        // After sled's data is durable, before any waiter is told: the
        // record never claims more than sled holds, and covers every
        // acknowledgement.
        if let (Some(hook), Some(mark)) = (&mut self.watermark, mark) {
            hook.file.write(&mark)?;
        }
        if let (Some(log), Some(ticket)) = (&self.log, &ticket) {
            log.finish_sync(ticket);
        }
        Ok(())
    }
}

/// The files beyond sled's `flush()` that must be synced for power-loss
/// durability.
struct SyncedFiles {
    /// sled's single data file (`<dir>/db`). Our own descriptor: `fsync`
    /// acts on the inode, so it flushes what sled wrote through its own.
    data: File,
    /// `<dir>/blobs`, where sled puts values too large for a segment.
    blob_dir: PathBuf,
    /// Blob files already synced, with the size they had when synced.
    synced_blobs: HashMap<OsString, u64>,
}

impl SyncedFiles {
    fn open(dir: &Path) -> Result<Self, StoreError> {
        // Canonical so that `parent()` is the real parent, even for a
        // relative path such as `data`.
        let dir = dir.canonicalize()?;
        let data = File::open(dir.join("db"))?;
        // Everything sled created or rewrote during open.
        data.sync_all()?;
        sync_file_if_exists(&dir.join("conf"))?;
        let mut files = Self {
            data,
            blob_dir: dir.join("blobs"),
            synced_blobs: HashMap::new(),
        };
        files.sync_blobs()?;
        sync_dir(&files.blob_dir)?;
        sync_dir(&dir)?;
        if let Some(parent) = dir.parent() {
            sync_dir(parent)?;
        }
        Ok(files)
    }

    /// Steps 2 and 3 of the barrier (see the module docs).
    fn sync(&mut self) -> io::Result<()> {
        self.data.sync_data()?;
        if self.sync_blobs()? {
            sync_dir(&self.blob_dir)?;
        }
        Ok(())
    }

    /// Syncs new or grown blob files; returns whether any was synced (then
    /// the directory entry must be made durable too).
    fn sync_blobs(&mut self) -> io::Result<bool> {
        let mut present = HashMap::with_capacity(self.synced_blobs.len());
        let mut synced_any = false;
        for entry in std::fs::read_dir(&self.blob_dir)? {
            let entry = entry?;
            let name = entry.file_name();
            // Size first, then sync: the sync covers at least `len` bytes.
            let len = match entry.metadata() {
                Ok(meta) => meta.len(),
                // sled garbage-collected it meanwhile: nothing to persist.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            if self.synced_blobs.get(&name) != Some(&len) {
                match File::open(entry.path()) {
                    Ok(f) => f.sync_data()?,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(e),
                }
                synced_any = true;
            }
            present.insert(name, len);
        }
        // Forget removed blobs so the map stays as small as the directory.
        self.synced_blobs = present;
        Ok(synced_any)
    }
}

fn sync_file_if_exists(path: &Path) -> io::Result<()> {
    match File::open(path) {
        Ok(f) => f.sync_all(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Persists a directory's entries (file creations, renames). On Linux a
/// directory opened read-only can be `fsync`ed.
fn sync_dir(path: &Path) -> io::Result<()> {
    File::open(path)?.sync_all()
}

//! The Raft log's entries in segment files of our own (docs/design.md,
//! "Storage"), instead of a sled tree.
//!
//! Records are appended with `pwrite` into zero-filled space (`file.rs`), so
//! a durability barrier is one `fdatasync` of the segment written since the
//! last one. A truncation is a record too (replayed at open), so nothing is
//! ever rewritten in place; a purge deletes whole segment files from the
//! oldest on, once every entry they hold is at or below the purge pointer
//! and that pointer is durable (in sled). The in-memory index (`index.rs`)
//! maps each live index to its record.

mod file;
mod fs;
mod index;
mod record;
mod recovery;

use std::collections::VecDeque;
use std::io;
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use openraft::{LogId, NodeId, RaftLogId};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::codec::{decode_raw, encode};
use crate::error::StoreError;
use file::{SegmentFile, HEADER};
pub use fs::{LogFile, SegmentFs, StdFs};
use index::{half_open, Index, Loc};
use record::{encode as encode_record, mark_payload, parse, read_mark, Kind, Parsed, Pos};

/// Whether a directory entry is a segment file.
pub(crate) fn is_segment_file(name: &std::ffi::OsStr) -> bool {
    name.to_str().and_then(file::parse_name).is_some()
}

/// Default size at which a segment is closed and the next one started.
pub const DEFAULT_SEGMENT_BYTES: u64 = 16 * 1024 * 1024;

/// A closed segment: kept until every entry in it is purged.
struct Closed<T> {
    seq: u64,
    path: PathBuf,
    file: Arc<T>,
    /// Greatest entry index written to it (`None`: none).
    max_index: Option<u64>,
}

struct Inner<NID: NodeId, F: SegmentFs> {
    fs: F,
    dir: PathBuf,
    capacity: u64,
    closed: VecDeque<Closed<F::File>>,
    active: SegmentFile<F::File>,
    active_max: Option<u64>,
    /// Where the next record goes in `active`.
    head: u64,
    index: Index<NID>,
    /// Committed log id (bincode) not yet written in a mark.
    committed: Option<Vec<u8>>,
    /// How far a completed barrier covered the files.
    acked: Pos,
    /// The claim of the last mark written.
    claimed: Pos,
    /// Files written since the last barrier began.
    dirty: Vec<Arc<F::File>>,
    /// A segment file was created or removed: the directory needs a sync.
    dir_changed: bool,
    /// Segment files to delete once the purge pointer is durable.
    doomed: Vec<PathBuf>,
    /// A write failed: what was on disk after it is unknown, so every later
    /// write and barrier fails with the same error.
    broken: Option<(io::ErrorKind, String)>,
}

/// What a durability barrier takes from the log when it starts.
pub struct SyncTicket<F: SegmentFs = StdFs> {
    fs: F,
    files: Vec<Arc<F::File>>,
    dir: Option<PathBuf>,
    doomed: Vec<PathBuf>,
    pos: Pos,
}

impl<F: SegmentFs> SyncTicket<F> {
    /// `fdatasync` every segment written before the barrier began, then the
    /// directory if segments were created.
    pub fn sync(&self) -> io::Result<()> {
        for file in &self.files {
            file.sync_data()?;
        }
        if let Some(dir) = &self.dir {
            self.fs.sync_dir(dir)?;
        }
        Ok(())
    }

    /// Deletes the segment files a purge let go. Only once the purge
    /// pointer saying so is durable: a file that survives a crash then
    /// holds only purged entries, and is deleted again at open.
    pub fn remove_doomed(&self) -> io::Result<()> {
        for path in &self.doomed {
            match self.fs.remove(path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }
}

/// What the durability barrier needs of the log, without its node id type.
pub(crate) trait LogSync: Send {
    /// See [`SegmentLog::begin_sync`].
    fn begin_sync(&self) -> Result<SyncTicket, StoreError>;
    /// See [`SegmentLog::finish_sync`].
    fn finish_sync(&self, ticket: &SyncTicket);
    /// See [`SegmentLog::close`].
    fn close(&self, sync: bool) -> Result<(), StoreError>;
}

impl<NID: NodeId> LogSync for SegmentLog<NID> {
    fn begin_sync(&self) -> Result<SyncTicket, StoreError> {
        SegmentLog::begin_sync(self)
    }
    fn finish_sync(&self, ticket: &SyncTicket) {
        SegmentLog::finish_sync(self, ticket)
    }
    fn close(&self, sync: bool) -> Result<(), StoreError> {
        SegmentLog::close(self, sync)
    }
}

/// The log's entries in segment files, over the file system `F`. Cheap to
/// clone (shared).
pub struct SegmentLog<NID: NodeId, F: SegmentFs = StdFs> {
    inner: Arc<RwLock<Inner<NID, F>>>,
}

impl<NID: NodeId, F: SegmentFs> Clone for SegmentLog<NID, F> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

/// What open found besides the entries.
pub struct Opened {
    /// bincode of the last committed log id written, if any.
    pub committed: Option<Vec<u8>>,
    /// Whether any segment held any record.
    pub had_records: bool,
}

fn broken_error(kind: io::ErrorKind, msg: &str) -> StoreError {
    StoreError::Io(io::Error::new(
        kind,
        format!("an earlier log write failed: {msg}"),
    ))
}

/// The outcome of an open: the log and what was found, or why it is refused.
pub type OpenResult<NID, F> = Result<Result<(SegmentLog<NID, F>, Opened), String>, StoreError>;

impl<NID: NodeId> SegmentLog<NID> {
    /// [`SegmentLog::open_with`] on the real file system.
    pub(crate) fn open<E>(dir: &Path, capacity: u64, purged: Option<u64>) -> OpenResult<NID, StdFs>
    where
        E: DeserializeOwned + RaftLogId<NID>,
    {
        Self::open_with::<E>(StdFs, dir, capacity, purged)
    }
}

impl<NID: NodeId, F: SegmentFs> SegmentLog<NID, F> {
    /// Opens the segments in `dir` on `fs` (creating the first if there is
    /// none), checking every record (`recovery.rs`) and cutting a torn
    /// tail. Segments are closed at `capacity` bytes. Entries at or below
    /// `purged` are dropped. `Ok(Err(reason))`: refuse.
    pub fn open_with<E>(fs: F, dir: &Path, capacity: u64, purged: Option<u64>) -> OpenResult<NID, F>
    where
        E: DeserializeOwned + RaftLogId<NID>,
    {
        let mut scanned = match recovery::scan(&fs, dir)? {
            Ok(s) => s,
            Err(reason) => return Ok(Err(reason)),
        };
        let had_records = !scanned.records.is_empty() || scanned.cut.is_some();
        // Sequence number for a first segment, if none is left.
        let mut next_seq = 1;
        if let Some(cut) = &scanned.cut {
            tracing::warn!(
                at = %cut.reason,
                "the log's tail was never acknowledged and is torn or damaged: cutting it"
            );
            for path in &cut.drop {
                fs.remove(path)?;
            }
            scanned.segments.retain(|s| s.seq <= cut.at.seq);
            if cut.at.offset < HEADER {
                // Its header is torn: it was created by an append that was
                // never acknowledged, and holds nothing.
                if let Some(last) = scanned.segments.pop() {
                    fs.remove(&last.path)?;
                    next_seq = last.seq;
                }
            } else if let Some(last) = scanned.segments.last_mut() {
                let mut seg = SegmentFile::open(&fs, &last.path, last.seq, last.len)?;
                seg.zero_from(cut.at.offset)?;
                last.end = cut.at.offset;
            }
        }

        let mut index = Index::default();
        let mut max_by_seq: Vec<Option<u64>> = vec![None; scanned.segments.len()];
        let first_seq = scanned.segments.first().map_or(0, |s| s.seq);
        let mut acked = Pos::default();
        let mut committed = None;
        for r in &scanned.records {
            let slot = (r.pos.seq - first_seq) as usize;
            match r.kind {
                Kind::Entry => {
                    let entry: E = match decode_raw(&r.payload) {
                        Ok(e) => e,
                        Err(e) => {
                            return Ok(Err(format!(
                                "{}, offset {}: log entry {} does not decode: {e}",
                                scanned.segments[slot].path.display(),
                                r.pos.offset,
                                r.index
                            )))
                        }
                    };
                    let log_id = entry.get_log_id().clone();
                    if log_id.index != r.index {
                        return Ok(Err(format!(
                            "{}, offset {}: record of index {} holds log entry {}",
                            scanned.segments[slot].path.display(),
                            r.pos.offset,
                            r.index,
                            log_id.index
                        )));
                    }
                    max_by_seq[slot] = max_by_seq[slot].max(Some(r.index));
                    index.insert(Loc {
                        seq: r.pos.seq,
                        offset: r.pos.offset,
                        framed: r.framed,
                        log_id,
                    });
                }
                Kind::Truncate => index.remove_from(r.index),
                Kind::Mark => {
                    if let Some((claim, bytes)) = read_mark(&r.payload) {
                        acked = acked.max(claim);
                        if !bytes.is_empty() {
                            committed = Some(bytes.to_vec());
                        }
                    }
                }
            }
        }
        if let Some(p) = purged {
            index.remove_upto(p);
        }

        // Segments before the last whose entries are all purged: a purge
        // that crashed before deleting them (the pointer is on disk).
        let mut closed = VecDeque::new();
        let mut segments = scanned.segments;
        let last = segments.pop();
        for (seg, max) in segments.into_iter().zip(max_by_seq.iter().copied()) {
            let purgeable = closed.is_empty() && max.is_none_or(|m| Some(m) <= purged);
            if purgeable {
                fs.remove(&seg.path)?;
                continue;
            }
            let file = fs.open_read(&seg.path)?;
            closed.push_back(Closed {
                seq: seg.seq,
                path: seg.path,
                file: Arc::new(file),
                max_index: max,
            });
        }
        let (active, head, active_max) = match last {
            Some(seg) => {
                let max = max_by_seq.last().copied().flatten();
                (
                    SegmentFile::open(&fs, &seg.path, seg.seq, seg.len)?,
                    seg.end.max(HEADER),
                    max,
                )
            }
            None => (SegmentFile::create(&fs, dir, next_seq)?, HEADER, None),
        };
        // The first barrier (at open) syncs the active segment and the
        // directory: a cut, a deletion or a new file above is then durable.
        let dirty = vec![active.handle()];
        let inner = Inner {
            fs,
            dir: dir.to_path_buf(),
            capacity,
            closed,
            active,
            active_max,
            head,
            index,
            committed: None,
            acked,
            claimed: acked,
            dirty,
            dir_changed: true,
            doomed: Vec::new(),
            broken: None,
        };
        Ok(Ok((
            Self {
                inner: Arc::new(RwLock::new(inner)),
            },
            Opened {
                committed,
                had_records,
            },
        )))
    }

    fn read(&self) -> RwLockReadGuard<'_, Inner<NID, F>> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner<NID, F>> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends `entries` (one `pwrite`). Readable when this returns; durable
    /// after the next barrier. Returns the last index written, if any.
    pub fn append<E>(&self, entries: impl IntoIterator<Item = E>) -> Result<Option<u64>, StoreError>
    where
        E: Serialize + RaftLogId<NID>,
    {
        // Encoded before taking the lock: readers are not held up by it.
        let mut body = Vec::new();
        let mut placed = Vec::new();
        for entry in entries {
            let log_id = entry.get_log_id().clone();
            let payload = encode("log entry", &entry)?;
            let at = body.len();
            encode_record(&mut body, Kind::Entry, log_id.index, &payload)
                .ok_or_else(|| too_large(payload.len()))?;
            placed.push((at as u64, (body.len() - at) as u64, log_id));
        }
        let Some(last) = placed.last().map(|(_, _, id)| id.index) else {
            return Ok(None);
        };
        let mut inner = self.write();
        let base = inner.write_records(&body)?;
        let seq = inner.active.seq;
        for (at, framed, log_id) in placed {
            inner.active_max = inner.active_max.max(Some(log_id.index));
            inner.index.insert(Loc {
                seq,
                offset: base + at,
                framed,
                log_id,
            });
        }
        Ok(Some(last))
    }

    /// Removes the entries from `index` on (a truncate record).
    pub fn remove_from(&self, index: u64) -> Result<(), StoreError> {
        let mut body = Vec::new();
        encode_record(&mut body, Kind::Truncate, index, &[]).ok_or_else(|| too_large(0))?;
        let mut inner = self.write();
        inner.write_records(&body)?;
        inner.index.remove_from(index);
        Ok(())
    }

    /// Forgets the entries up to `index` and queues for deletion the oldest
    /// segments holding nothing newer, once the pointer saying so is
    /// durable (the next barrier).
    pub fn remove_upto(&self, index: u64) {
        let mut inner = self.write();
        inner.index.remove_upto(index);
        while inner
            .closed
            .front()
            .is_some_and(|c| c.max_index.is_none_or(|m| m <= index))
        {
            if let Some(c) = inner.closed.pop_front() {
                inner.doomed.push(c.path);
            }
        }
    }

    /// Keeps `committed` (bincode of the committed log id) for the next
    /// mark: written with the next append or at close, never waited for.
    pub fn set_committed(&self, committed: Vec<u8>) {
        self.write().committed = Some(committed);
    }

    /// Entries with index in `range`, in order; missing ones are skipped.
    pub fn range<E>(&self, range: impl RangeBounds<u64>) -> Result<Vec<E>, StoreError>
    where
        E: DeserializeOwned + RaftLogId<NID>,
    {
        let Some((start, end)) = half_open(&range) else {
            return Ok(Vec::new());
        };
        let wanted: Vec<(Arc<F::File>, u64, u64, u64)> = {
            let inner = self.read();
            inner
                .index
                .range(start, end)
                .map(|(i, loc)| {
                    inner
                        .file(loc.seq)
                        .map(|f| (f, loc.offset, loc.framed, i))
                        .ok_or(StoreError::EntryChecksum {
                            index: i,
                            detail: format!("segment {} is gone", loc.seq),
                        })
                })
                .collect::<Result<_, _>>()?
        };
        let mut out = Vec::with_capacity(wanted.len());
        let mut i = 0;
        while i < wanted.len() {
            // One read for a run of records that lie back to back.
            let (file, first, _, _) = &wanted[i];
            let mut j = i;
            let mut end_at = wanted[i].1 + wanted[i].2;
            while j + 1 < wanted.len()
                && Arc::ptr_eq(&wanted[j + 1].0, file)
                && wanted[j + 1].1 == end_at
            {
                j += 1;
                end_at += wanted[j].2;
            }
            let mut buf = vec![0u8; (end_at - first) as usize];
            file.read_exact_at(&mut buf, *first)?;
            for (_, offset, framed, index) in &wanted[i..=j] {
                let at = (offset - first) as usize;
                let bytes = &buf[at..at + *framed as usize];
                out.push(decode_entry(bytes, *index)?);
            }
            i = j + 1;
        }
        Ok(out)
    }

    /// Log id of the last entry, if any.
    pub fn last_log_id(&self) -> Option<LogId<NID>> {
        self.read().index.last().cloned()
    }

    /// Log id of the last entry with index `<= index`, if any.
    pub fn last_log_id_upto(&self, index: u64) -> Option<LogId<NID>> {
        self.read().index.last_upto(index).cloned()
    }

    /// Index of the last entry, if any.
    pub fn last_index(&self) -> Option<u64> {
        self.read().index.last().map(|id| id.index)
    }

    /// Whether the log holds exactly the entry `log_id`.
    pub fn contains(&self, log_id: &LogId<NID>) -> bool {
        self.read().index.get(log_id.index) == Some(log_id)
    }

    /// See `Index::first_gap_after`.
    pub fn first_gap_after(&self, after: Option<u64>) -> Option<(u64, u64)> {
        self.read().index.first_gap_after(after)
    }

    /// Starts a barrier: what must be synced for every write made so far.
    pub fn begin_sync(&self) -> Result<SyncTicket<F>, StoreError> {
        let mut inner = self.write();
        if let Some((kind, msg)) = &inner.broken {
            return Err(broken_error(*kind, msg));
        }
        let dir = std::mem::take(&mut inner.dir_changed).then(|| inner.dir.clone());
        Ok(SyncTicket {
            fs: inner.fs.clone(),
            files: std::mem::take(&mut inner.dirty),
            dir,
            doomed: std::mem::take(&mut inner.doomed),
            pos: inner.pos(),
        })
    }

    /// The barrier of `ticket` completed: later marks claim what it covered.
    pub fn finish_sync(&self, ticket: &SyncTicket<F>) {
        let mut inner = self.write();
        inner.acked = inner.acked.max(ticket.pos);
        if !ticket.doomed.is_empty() {
            // The deletions are durable with the next directory sync; a
            // file that comes back holds only purged entries.
            inner.dir_changed = true;
        }
    }

    /// At close: a last mark claiming what the last barrier covered, so
    /// damage to the final records is told from a torn tail at the next
    /// open (`recovery.rs`).
    pub fn close(&self, sync: bool) -> Result<(), StoreError> {
        let mut inner = self.write();
        if inner.broken.is_some() || (inner.acked <= inner.claimed && inner.committed.is_none()) {
            return Ok(());
        }
        inner.write_records(&[])?;
        if sync {
            inner.active.handle().sync_data()?;
        }
        Ok(())
    }
}

fn too_large(len: usize) -> StoreError {
    StoreError::Io(io::Error::other(format!(
        "a log record of {len} bytes is over the 4 GiB limit"
    )))
}

/// Checks and decodes the entry record `bytes`, expected at `index`.
fn decode_entry<E, NID>(bytes: &[u8], index: u64) -> Result<E, StoreError>
where
    E: DeserializeOwned + RaftLogId<NID>,
    NID: NodeId,
{
    let record = match parse(bytes) {
        Parsed::Valid(r) if r.kind == Kind::Entry && r.index == index => r,
        Parsed::Valid(r) => {
            return Err(StoreError::IndexMismatch {
                key: index,
                entry: r.index,
            })
        }
        Parsed::Zero => {
            return Err(StoreError::EntryChecksum {
                index,
                detail: "the record reads back as zeros".into(),
            })
        }
        Parsed::Invalid(detail) => return Err(StoreError::EntryChecksum { index, detail }),
    };
    let entry: E =
        decode_raw(record.payload).map_err(|source| StoreError::CorruptEntry { index, source })?;
    let got = entry.get_log_id().index;
    if got != index {
        return Err(StoreError::IndexMismatch {
            key: index,
            entry: got,
        });
    }
    Ok(entry)
}

impl<NID: NodeId, F: SegmentFs> Inner<NID, F> {
    fn pos(&self) -> Pos {
        Pos {
            seq: self.active.seq,
            offset: self.head,
        }
    }

    fn file(&self, seq: u64) -> Option<Arc<F::File>> {
        if seq == self.active.seq {
            return Some(self.active.handle());
        }
        self.closed
            .iter()
            .find(|c| c.seq == seq)
            .map(|c| Arc::clone(&c.file))
    }

    /// Writes `body` (framed records) at the head, after a mark if the log
    /// became more durable or the committed id changed since the last one,
    /// starting a new segment if this one is full. Returns where `body`
    /// starts in the active segment.
    fn write_records(&mut self, body: &[u8]) -> Result<u64, StoreError> {
        if let Some((kind, msg)) = &self.broken {
            return Err(broken_error(*kind, msg));
        }
        let mut buf = Vec::with_capacity(body.len() + 128);
        let mark = self.acked > self.claimed || self.committed.is_some();
        if mark {
            let committed = self.committed.as_deref().unwrap_or_default();
            encode_record(
                &mut buf,
                Kind::Mark,
                0,
                &mark_payload(self.acked, committed),
            )
            .ok_or_else(|| too_large(committed.len()))?;
        }
        let mark_len = buf.len() as u64;
        buf.extend_from_slice(body);
        let written = self.rotate_if_full(buf.len() as u64).and_then(|()| {
            let at = self.head;
            self.active.write_at(&buf, at)
        });
        if let Err(e) = written {
            self.broken = Some((e.kind(), e.to_string()));
            return Err(e.into());
        }
        let body_at = self.head + mark_len;
        self.head += buf.len() as u64;
        let active = self.active.handle();
        if !self.dirty.iter().any(|f| Arc::ptr_eq(f, &active)) {
            self.dirty.push(active);
        }
        if mark {
            self.claimed = self.acked;
            self.committed = None;
        }
        Ok(body_at)
    }

    fn rotate_if_full(&mut self, len: u64) -> io::Result<()> {
        if self.head + len <= self.capacity || self.head <= HEADER {
            return Ok(());
        }
        let next = SegmentFile::create(&self.fs, &self.dir, self.active.seq + 1)?;
        let old = std::mem::replace(&mut self.active, next);
        self.closed.push_back(Closed {
            seq: old.seq,
            path: old.path.clone(),
            file: old.handle(),
            max_index: self.active_max.take(),
        });
        self.head = HEADER;
        self.dir_changed = true;
        Ok(())
    }
}

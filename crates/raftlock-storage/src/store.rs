//! [`SledLogStore`]: openraft's `RaftLogStorage` on sled.

use std::fmt::Debug;
use std::io;
use std::ops::RangeBounds;
use std::sync::Arc;

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{
    ErrorSubject, ErrorVerb, LogId, LogState, OptionalSend, RaftLogReader, RaftTypeConfig,
    StorageError, Vote,
};

use crate::barrier::{Barrier, MarkCap, MarkSource, WatermarkHook};
use crate::cell::Cell;
use crate::codec::{decode, decode_sealed, encode_sealed};
use crate::config::Durability;
use crate::config::SledLogConfig;
use crate::durable::DurableIndex;
use crate::error::StoreError;
use crate::floor::{FloorTarget, LogHead, SnapshotFloor};
use crate::log_tree::{decode_entry, LogTree};
use crate::meta::MetaStore;
use crate::reader::SledLogReader;
use crate::sync_worker::{SyncMeter, SyncStall, SyncStats, SyncWorker};
use crate::watermark::{self, Mark, WatermarkFile};

/// sled tree names. Part of the on-disk format: do not rename.
mod trees {
    pub(super) const LOG: &str = "raft_log";
    pub(super) const VOTE: &str = "raft_vote";
    pub(super) const COMMITTED: &str = "raft_committed";
    pub(super) const PURGED: &str = "raft_purged";
    pub(super) const META: &str = "meta";
    pub(super) const FORMAT: &str = "raftlock_format";
}

/// Key of the format number in [`trees::FORMAT`].
const FORMAT_KEY: &[u8] = b"version";

/// Checks (or, in a new database, writes) the store's format number.
/// Format 1: every value sealed with a checksum, plus the watermark record.
fn check_format(
    db: &sled::Db,
    has_data: bool,
    recorded: Option<&Mark>,
    mark_path: &std::path::Path,
) -> Result<(), String> {
    let tree = db.open_tree(trees::FORMAT).map_err(|e| e.to_string())?;
    let stored = tree.get(FORMAT_KEY).map_err(|e| e.to_string())?;
    let claims = recorded.is_some_and(|m| !m.is_empty());
    match stored {
        Some(bytes) => {
            let format: u32 = decode_sealed("storage format", FORMAT_KEY, &bytes)
                .map_err(|e| format!("sled tree `{}`: {e}", trees::FORMAT))?;
            if format != watermark::FORMAT {
                return Err(format!(
                    "the log store is in format {format}; this version reads format {}",
                    watermark::FORMAT
                ));
            }
            if recorded.is_none() && has_data {
                return Err(format!(
                    "{} is missing, so sled's state cannot be checked for lost writes",
                    mark_path.display()
                ));
            }
            Ok(())
        }
        None if has_data => Err(format!(
            "the log store has no format number: it was written by an older raftlock \
             (format 0, no checksums); this version reads format {}",
            watermark::FORMAT
        )),
        None if claims => Err(format!(
            "the sled database is empty, but {} records acknowledged state: sled lost \
             everything (a damaged `db` file makes sled drop everything after the damage)",
            mark_path.display()
        )),
        None => {
            let value = encode_sealed("storage format", FORMAT_KEY, &watermark::FORMAT)
                .map_err(|e| e.to_string())?;
            tree.insert(FORMAT_KEY, value).map_err(|e| e.to_string())?;
            Ok(())
        }
    }
}

/// Checks every entry after the purge pointer. A bad entry above `acked`
/// (never acknowledged: see `watermark.rs`) is dropped together with every
/// entry after it; any other is refused, naming its index.
fn check_log<C: RaftTypeConfig>(
    log: &LogTree,
    purged: Option<u64>,
    acked: u64,
    path: &std::path::Path,
) -> Result<(), String> {
    let from = purged.map_or(0, |p| p.saturating_add(1));
    let entries = log.raw_from(from).map_err(|e| e.to_string())?;
    let mut previous: Option<u64> = None;
    for (index, value) in entries {
        let key = crate::codec::index_key(index);
        if let Err(e) = decode_entry::<C::Entry, C::NodeId>(&key, &value) {
            if index <= acked {
                return Err(format!(
                    "sled tree `{}`, index {index} (acknowledged: the watermark is at {acked}): {e}",
                    trees::LOG
                ));
            }
            let kept = previous.map_or("none".to_string(), |p| p.to_string());
            tracing::warn!(
                path = %path.display(),
                index,
                acked,
                error = %e,
                "the log's tail from index {index} was never acknowledged and is corrupt: \
                 truncating it (last entry kept: {kept})"
            );
            log.remove_from(index).map_err(|e| e.to_string())?;
            return Ok(());
        }
        previous = Some(index);
    }
    Ok(())
}

/// What the watermark record should say, read from sled's trees.
fn mark_source<C: RaftTypeConfig>(db: &sled::Db, log: LogTree) -> Result<MarkSource, StoreError> {
    let vote: Cell<Vote<C::NodeId>> = Cell::open(db, trees::VOTE, "vote")?;
    let purged: Cell<LogId<C::NodeId>> = Cell::open(db, trees::PURGED, "last purged log id")?;
    Ok(Box::new(move || {
        let last = log.last_index()?;
        let purged = purged.get()?.map(|p| p.index);
        Ok(Mark {
            acked: last.max(purged).unwrap_or(0),
            vote: vote.get_raw()?,
        })
    }))
}

/// The Raft log, vote and log pointers of one node, stored in sled.
///
/// Generic over the openraft type config so the node crate plugs in its own
/// (entries must be serde, which openraft's `serde` feature guarantees).
///
/// Durability contract (see the crate docs for how it is achieved):
/// * `append` returns once the entries are readable and calls openraft's
///   callback only after a durability barrier covering them;
/// * `save_vote`, `truncate` and `purge` return only after a barrier (with
///   [`SledLogConfig::snapshot_gated_purge`], `purge` deletes only what a
///   durable snapshot covers and finishes later: see [`SnapshotFloor`]);
/// * `save_committed` is written without waiting: it becomes durable with
///   the next barrier (openraft treats a committed id as an optional hint;
///   losing the latest one only means replaying a little more at start-up).
pub struct SledLogStore<C: RaftTypeConfig> {
    reader: SledLogReader<C>,
    log: LogTree,
    vote: Cell<Vote<C::NodeId>>,
    committed: Cell<Option<LogId<C::NodeId>>>,
    /// The purge pointer (greatest log id removed from the head of the log,
    /// kept even when the log is empty: it is then also the last log id)
    /// and the purges waiting for a durable snapshot.
    head: Arc<LogHead<C>>,
    meta: MetaStore,
    sync: Arc<SyncWorker>,
    durable: DurableIndex,
    /// [`SledLogConfig::deferred_durability`].
    deferred: bool,
    /// Caps the watermark record while a truncation is under way.
    cap: MarkCap,
}

/// How long an open waits for a lock that a store of this process just
/// dropped is still holding.
const LOCK_RELEASE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Opens the sled database, waiting up to [`LOCK_RELEASE_WAIT`] for its
/// file lock. sled 0.34 releases the lock only when its flusher thread
/// exits, which a dropped `Db` signals but does not wait for, so reopening
/// a store right after dropping it (a member restarted in the same
/// process) can find the lock still held for a few milliseconds. A lock
/// held by a live member lasts its whole life, far past the wait, and is
/// still refused.
fn open_sled(config: &SledLogConfig) -> sled::Result<sled::Db> {
    let deadline = std::time::Instant::now() + LOCK_RELEASE_WAIT;
    loop {
        let opened = sled::Config::new()
            .path(&config.path)
            .cache_capacity(config.cache_capacity_bytes)
            .open();
        match opened {
            Err(sled::Error::Io(e))
                if e.to_string().contains("could not acquire lock")
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

impl<C: RaftTypeConfig> SledLogStore<C> {
    /// Opens (creating if needed) the store in `config.path`.
    ///
    /// Blocking file IO (sled recovery, the initial sync): call it at
    /// start-up or from `spawn_blocking`, not from a busy async task.
    pub fn open(config: &SledLogConfig) -> Result<Self, StoreError> {
        std::fs::create_dir_all(&config.path)?;
        let db = open_sled(config).map_err(|source| StoreError::Open {
            path: config.path.clone(),
            source: source.into(),
        })?;
        let refuse = |reason: String| StoreError::Refused {
            path: config.path.clone(),
            reason,
        };

        let log = LogTree::open(&db, trees::LOG)?;
        let purged: Cell<LogId<C::NodeId>> = Cell::open(&db, trees::PURGED, "last purged log id")?;
        let vote: Cell<Vote<C::NodeId>> = Cell::open(&db, trees::VOTE, "vote")?;
        let committed: Cell<Option<LogId<C::NodeId>>> =
            Cell::open(&db, trees::COMMITTED, "committed log id")?;
        let meta_tree = db.open_tree(trees::META)?;

        let mark_path = config.path.join(watermark::FILE);
        let recorded = watermark::read(&mark_path)?
            .map_err(|reason| refuse(format!("{}: {reason}", mark_path.display())))?;
        let has_data = [
            trees::LOG,
            trees::VOTE,
            trees::COMMITTED,
            trees::PURGED,
            trees::META,
        ]
        .iter()
        .map(|name| db.open_tree(name).map(|t| !t.is_empty()))
        .collect::<Result<Vec<_>, _>>()?
        .contains(&true);
        check_format(&db, has_data, recorded.as_ref().map(|(_, m)| m), &mark_path)
            .map_err(refuse)?;
        let recorded_seq = recorded.as_ref().map_or(0, |(seq, _)| *seq);
        let recorded = recorded.map(|(_, mark)| mark).unwrap_or_default();

        // Every stored record is checked once here, so a damaged member
        // refuses to start instead of failing (or worse) later.
        let cell_error = |tree: &str, e: StoreError| refuse(format!("sled tree `{tree}`: {e}"));
        let written = purged.get().map_err(|e| cell_error(trees::PURGED, e))?;
        let stored_vote = vote.get().map_err(|e| cell_error(trees::VOTE, e))?;
        committed
            .get()
            .map_err(|e| cell_error(trees::COMMITTED, e))?;

        // `purge` records the purged id before deleting the entries; if a
        // crash fell between the two, finish the deletion now.
        if let Some(p) = &written {
            log.remove_upto(p.index)?;
        }
        let purged_index = written.as_ref().map(|p| p.index);
        check_log::<C>(&log, purged_index, recorded.acked, &config.path).map_err(refuse)?;
        let last = log.last_index()?;
        let on_disk = last.max(purged_index).unwrap_or(0);
        if on_disk < recorded.acked {
            return Err(refuse(format!(
                "sled tree `{}` ends at index {on_disk}, but {} records that entries through \
                 index {} were acknowledged: sled lost acknowledged log entries (a damaged \
                 `db` file makes sled drop everything written after the damage)",
                trees::LOG,
                mark_path.display(),
                recorded.acked
            )));
        }
        if let Some(bytes) = &recorded.vote {
            let was: Vote<C::NodeId> = decode(watermark::FILE, bytes).map_err(|e| {
                refuse(format!(
                    "{}: vote does not decode: {e}",
                    mark_path.display()
                ))
            })?;
            let kept = stored_vote
                .as_ref()
                .is_some_and(|now| now.partial_cmp(&was).is_some_and(|o| o.is_ge()));
            if !kept {
                return Err(refuse(format!(
                    "sled tree `{}` holds vote {}, but {} records vote {was}: sled lost the \
                     vote, and this member could vote twice in one term",
                    trees::VOTE,
                    stored_vote.map_or("none".to_string(), |v| v.to_string()),
                    mark_path.display()
                )));
            }
        }

        // Also makes the clean-up above, and everything sled created while
        // opening, durable; then records the watermark of what is on disk.
        let cap: MarkCap = Arc::default();
        let source = mark_source::<C>(&db, log.clone())?;
        let barrier =
            Barrier::open(db, &config.path, config.durability)?.with_watermark(WatermarkHook {
                file: WatermarkFile::open(
                    &mark_path,
                    recorded_seq,
                    config.durability == Durability::Fsync,
                )?,
                source,
                cap: Arc::clone(&cap),
            })?;
        let sync = Arc::new(SyncWorker::spawn(barrier)?);
        let durable = DurableIndex::starting_at(on_disk);
        let head = Arc::new(LogHead::new(
            log.clone(),
            purged,
            written,
            Arc::clone(&sync),
            durable.clone(),
            config.snapshot_gated_purge,
        ));

        Ok(Self {
            reader: SledLogReader::new(log.clone()),
            log,
            vote,
            committed,
            head,
            meta: MetaStore::new(meta_tree, Arc::clone(&sync)),
            sync,
            durable,
            deferred: config.deferred_durability,
            cap,
        })
    }

    /// Handle for the node's own small durable records. Take it before
    /// handing the store to `openraft::Raft::new`, which consumes the store.
    pub fn meta(&self) -> MetaStore {
        self.meta.clone()
    }

    /// How far the log is durable. Take it before handing the store to
    /// `openraft::Raft::new`; with deferred durability it is the only
    /// durability signal for appends.
    pub fn durable_index(&self) -> DurableIndex {
        self.durable.clone()
    }

    /// How far a durable snapshot covers the log, for the owner of the
    /// snapshots to report (see [`SnapshotFloor`]). Take it before handing
    /// the store to `openraft::Raft::new`, and call
    /// [`SnapshotFloor::start`] before that too.
    pub fn snapshot_floor(&self) -> SnapshotFloor {
        let head: Arc<dyn FloorTarget> = self.head.clone();
        SnapshotFloor::new(Arc::downgrade(&head))
    }

    /// Fault injection: stalls this store's durability barriers while set
    /// (see [`SyncStall`]).
    pub fn sync_stall(&self) -> SyncStall {
        self.sync.stall()
    }

    /// Durability barriers run and requests served so far (for metrics).
    pub fn sync_stats(&self) -> SyncStats {
        self.sync.stats()
    }

    /// A handle that reads [`sync_stats`](Self::sync_stats) after the
    /// store was moved into Raft.
    pub fn sync_meter(&self) -> SyncMeter {
        self.sync.meter()
    }

    fn set_cap(&self, cap: Option<u64>) {
        *self.cap.lock().unwrap_or_else(|e| e.into_inner()) = cap;
    }

    /// A log or vote write failed (a full disk shows up here when sled
    /// writes its buffers out): final, like a failed barrier. sled 0.34
    /// keeps failing every later write anyway (its "global error", reset
    /// only when the database is reopened), and what it buffered before
    /// may not be on disk.
    fn write_failed(
        &self,
        e: StoreError,
        subject: ErrorSubject<C::NodeId>,
    ) -> StorageError<C::NodeId> {
        tracing::error!(error = %e, "log write failed; every later durability request will fail");
        let cause = Arc::new(e);
        self.durable.fail(Arc::clone(&cause));
        StoreError::Barrier(cause).into_storage(subject, ErrorVerb::Write)
    }

    /// Waits until every write made so far is durable.
    async fn barrier(
        &self,
        subject: ErrorSubject<C::NodeId>,
    ) -> Result<(), StorageError<C::NodeId>> {
        self.sync.sync().await.map_err(|e| {
            let cause = match &e {
                StoreError::Barrier(cause) => Arc::clone(cause),
                _ => Arc::new(StoreError::SyncWorkerGone),
            };
            self.durable.fail(cause);
            e.into_storage(subject, ErrorVerb::Write)
        })
    }
}

/// Maps a [`StoreError`] for an operation on `subject`.
fn sto<NID: openraft::NodeId>(
    subject: ErrorSubject<NID>,
    verb: ErrorVerb,
) -> impl FnOnce(StoreError) -> StorageError<NID> {
    move |e| e.into_storage(subject, verb)
}

impl<C: RaftTypeConfig> RaftLogReader<C> for SledLogStore<C> {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<C::Entry>, StorageError<C::NodeId>> {
        self.reader.try_get_log_entries(range).await
    }
}

impl<C: RaftTypeConfig> RaftLogStorage<C> for SledLogStore<C> {
    type LogReader = SledLogReader<C>;

    async fn get_log_state(&mut self) -> Result<LogState<C>, StorageError<C::NodeId>> {
        // The purge as openraft asked for it, even where it waits for a
        // snapshot to become durable: openraft allows a purge to finish
        // later, and reads the log state only at start, when nothing waits.
        self.head
            .log_state()
            .map_err(sto(ErrorSubject::Logs, ErrorVerb::Read))
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.reader.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        self.vote
            .set(vote)
            .map_err(|e| self.write_failed(e, ErrorSubject::Vote))?;
        self.barrier(ErrorSubject::Vote).await
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<C::NodeId>>, StorageError<C::NodeId>> {
        self.vote
            .get()
            .map_err(sto(ErrorSubject::Vote, ErrorVerb::Read))
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogId<C::NodeId>>,
    ) -> Result<(), StorageError<C::NodeId>> {
        // No barrier (see the type docs). sled's log is written in order,
        // so a recovered committed id never outruns the entries written
        // before it.
        self.committed
            .set(&committed)
            .map_err(sto(ErrorSubject::Store, ErrorVerb::Write))
    }

    async fn read_committed(
        &mut self,
    ) -> Result<Option<LogId<C::NodeId>>, StorageError<C::NodeId>> {
        let stored = self
            .committed
            .get()
            .map_err(sto(ErrorSubject::Store, ErrorVerb::Read))?;
        Ok(stored.flatten())
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<C>,
    ) -> Result<(), StorageError<C::NodeId>>
    where
        I: IntoIterator<Item = C::Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        // Only just after a follower installed a snapshot past its log's
        // last entry, while the snapshot is still being written: wait for it
        // rather than leave a hole on disk (see `SnapshotFloor`).
        self.head
            .before_append()
            .await
            .map_err(sto(ErrorSubject::Logs, ErrorVerb::Write))?;
        // Readable from here on (openraft requires that when we return) ...
        let last = self
            .log
            .append::<C::Entry, C::NodeId>(entries)
            .map_err(|e| self.write_failed(e, ErrorSubject::Logs))?;
        // ... and durable only after a barrier that started after the batch
        // above was written: the worker then advances the durable index and
        // (unless deferred) tells openraft.
        let durable = self.durable.clone();
        let (late, early) = if self.deferred {
            (None, Some(callback))
        } else {
            (Some(callback), None)
        };
        self.sync
            .submit(Box::new(move |result| {
                match (&result, last) {
                    (Ok(()), Some(index)) => durable.advance(index),
                    (Ok(()), None) => {}
                    (Err(cause), _) => durable.fail(Arc::clone(cause)),
                }
                if let Some(callback) = late {
                    callback.log_io_completed(result.map_err(io::Error::other));
                }
            }))
            .map_err(sto(ErrorSubject::Logs, ErrorVerb::Write))?;
        if let Some(callback) = early {
            // Deferred durability: the caller waits on `DurableIndex`.
            callback.log_io_completed(Ok(()));
        }
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        // Lower the watermark record durably first: sled may write the
        // removal out at any moment (its flusher thread), and a record above
        // the log's end on disk would make the next open refuse the member.
        // Entries between the lowered record and the old end were
        // acknowledged once, but Raft truncates only uncommitted entries, so
        // treating them as unacknowledged at open is safe.
        self.set_cap(Some(log_id.index.saturating_sub(1)));
        self.barrier(ErrorSubject::Logs).await?;
        self.log
            .remove_from(log_id.index)
            .map_err(sto(ErrorSubject::Logs, ErrorVerb::Delete))?;
        // Durable before returning: openraft may next append entries with
        // the same indexes and must never see the old ones come back after
        // it was told they were gone.
        self.barrier(ErrorSubject::Logs).await?;
        // Every barrier from here on reads the shorter log.
        self.set_cap(None);
        self.durable.lower_to(log_id.index.saturating_sub(1));
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        // Deletes what a durable snapshot covers (everything asked for,
        // unless gated) and remembers the rest for `SnapshotFloor::advance`.
        // Never moves the purge pointer backwards.
        let wrote = self
            .head
            .request(log_id.clone())
            .map_err(sto(ErrorSubject::Logs, ErrorVerb::Delete))?;
        if wrote {
            // Purge happens once per snapshot, so paying a barrier keeps the
            // rule simple: every completed write is durable.
            self.barrier(ErrorSubject::Logs).await?;
        }
        // Purged entries are committed and in a snapshot (possibly still
        // being written on a follower installing one), so they are on a
        // majority's disks already and no commit rests on this node's copy;
        // a follower that installed a snapshot answers for its last index
        // from here on.
        self.durable.advance(log_id.index);
        Ok(())
    }
}

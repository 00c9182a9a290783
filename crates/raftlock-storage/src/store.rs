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

use crate::barrier::{Barrier, MarkSource, WatermarkHook};
use crate::cell::Cell;
use crate::codec::{decode, decode_raw, decode_sealed, encode, encode_sealed};
use crate::config::Durability;
use crate::config::SledLogConfig;
use crate::durable::DurableIndex;
use crate::error::StoreError;
use crate::floor::{FloorTarget, LogHead, SnapshotFloor};
use crate::meta::MetaStore;
use crate::reader::SledLogReader;
use crate::segment::SegmentLog;
use crate::sled_dirty::SledDirty;
use crate::sync_worker::{SyncMeter, SyncStall, SyncStats, SyncWorker};
use crate::watermark::{self, Mark, WatermarkFile};

/// sled tree names. Part of the on-disk format: do not rename.
pub(crate) mod trees {
    /// Log entries of format 1; format 2 keeps them in segment files.
    pub(crate) const LOG: &str = "raft_log";
    pub(crate) const VOTE: &str = "raft_vote";
    /// Committed log id of format 1; format 2 writes it in the segments.
    pub(crate) const COMMITTED: &str = "raft_committed";
    pub(crate) const PURGED: &str = "raft_purged";
    pub(crate) const META: &str = "meta";
    pub(crate) const FORMAT: &str = "raftlock_format";
}

/// Key of the format number in [`trees::FORMAT`].
pub(crate) const FORMAT_KEY: &[u8] = b"version";

/// Checks (or, in a new store, writes) the store's format number.
/// Format 1: every sled value sealed with a checksum, the log in sled, the
/// watermark record. Format 2: the log's entries in segment files
/// (`segment/`), the watermark record keeping the vote and purge pointer.
fn check_format(
    db: &sled::Db,
    sled_has_data: bool,
    log_has_records: bool,
    recorded: Option<&Mark>,
    mark_path: &std::path::Path,
    dirty: &SledDirty,
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
            if recorded.is_none() && (sled_has_data || log_has_records) {
                return Err(format!(
                    "{} is missing, so sled's state cannot be checked for lost writes",
                    mark_path.display()
                ));
            }
            Ok(())
        }
        None if sled_has_data => Err(format!(
            "the log store has no format number: it was written by an older raftlock \
             (format 0, no checksums); this version reads format {}",
            watermark::FORMAT
        )),
        None if claims || log_has_records => Err(format!(
            "the sled database is empty, but {} or the log's segment files record \
             acknowledged state: sled lost everything (a damaged `db` file makes sled drop \
             everything after the damage)",
            mark_path.display()
        )),
        None => {
            let value = encode_sealed("storage format", FORMAT_KEY, &watermark::FORMAT)
                .map_err(|e| e.to_string())?;
            tree.insert(FORMAT_KEY, value).map_err(|e| e.to_string())?;
            dirty.mark();
            Ok(())
        }
    }
}

/// What the watermark record should say, read from sled's trees.
fn mark_source<C: RaftTypeConfig>(
    db: &sled::Db,
    dirty: &SledDirty,
) -> Result<MarkSource, StoreError> {
    let vote: Cell<Vote<C::NodeId>> = Cell::open(db, trees::VOTE, "vote", dirty)?;
    let purged: Cell<LogId<C::NodeId>> =
        Cell::open(db, trees::PURGED, "last purged log id", dirty)?;
    Ok(Box::new(move || {
        Ok(Mark {
            purged: purged.get()?.map_or(0, |p| p.index),
            vote: vote.get_raw()?,
        })
    }))
}

/// The Raft log, vote and log pointers of one node: entries in segment
/// files, the rest in sled.
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
/// * `save_committed` is written without waiting: it is written with the
///   next append (or at close) and durable with the barrier after that
///   (openraft treats a committed id as an optional hint; losing the latest
///   one only means replaying a little more at start-up);
/// * the vote found at open is read back *uncommitted* (until the next
///   `save_vote`): openraft restores a member whose committed vote names
///   itself as leader of the same term at once, and such a leader's read
///   index is its restored committed id, which can lag writes it
///   acknowledged before a crash. Uncommitted, every member starts as a
///   follower, and the next leader commits an entry of its own term
///   before it serves a read (docs/adr/0022-restart-without-restored-leadership.md).
pub struct SledLogStore<C: RaftTypeConfig> {
    reader: SledLogReader<C>,
    log: SegmentLog<C::NodeId>,
    vote: Cell<Vote<C::NodeId>>,
    /// The vote is the one found at open: read it back uncommitted.
    vote_restored: bool,
    committed: Option<LogId<C::NodeId>>,
    /// The purge pointer (greatest log id removed from the head of the log,
    /// kept even when the log is empty: it is then also the last log id)
    /// and the purges waiting for a durable snapshot.
    head: Arc<LogHead<C>>,
    meta: MetaStore,
    sync: Arc<SyncWorker>,
    durable: DurableIndex,
    /// [`SledLogConfig::deferred_durability`].
    deferred: bool,
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
/// still refused. The segment files are only opened once sled's lock is
/// held, so that lock guards them too.
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
    /// Blocking file IO (sled recovery, the scan of the log, the initial
    /// sync): call it at start-up or from `spawn_blocking`, not from a busy
    /// async task.
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
        let dirty = SledDirty::default();

        let purged: Cell<LogId<C::NodeId>> =
            Cell::open(&db, trees::PURGED, "last purged log id", &dirty)?;
        let vote: Cell<Vote<C::NodeId>> = Cell::open(&db, trees::VOTE, "vote", &dirty)?;
        let meta_tree = db.open_tree(trees::META)?;

        let mark_path = config.path.join(watermark::FILE);
        // The format first: a format-1 store is converted (its watermark
        // record is of the old format) before anything else is read.
        if let Some(bytes) = db.open_tree(trees::FORMAT)?.get(FORMAT_KEY)? {
            let format: u32 = decode_sealed("storage format", FORMAT_KEY, &bytes)
                .map_err(|e| refuse(format!("sled tree `{}`: {e}", trees::FORMAT)))?;
            if format == 1 {
                crate::migrate::format_1_to_2::<C>(&db, config)?.map_err(|reason| {
                    refuse(format!("converting the format-1 log store: {reason}"))
                })?;
            }
        }
        let sled_has_data = [
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
        let recorded = watermark::read(&mark_path)?
            .map_err(|reason| refuse(format!("{}: {reason}", mark_path.display())))?;
        let recorded_seq = recorded.as_ref().map_or(0, |(seq, _)| *seq);
        let recorded = recorded.map(|(_, mark)| mark);

        // Every stored record is checked once here, so a damaged member
        // refuses to start instead of failing (or worse) later.
        let cell_error = |tree: &str, e: StoreError| refuse(format!("sled tree `{tree}`: {e}"));
        let written = purged.get().map_err(|e| cell_error(trees::PURGED, e))?;
        let stored_vote = vote.get().map_err(|e| cell_error(trees::VOTE, e))?;
        let purged_index = written.as_ref().map(|p| p.index);

        let (log, opened) = SegmentLog::<C::NodeId>::open::<C::Entry>(
            &config.path,
            config.segment_bytes,
            purged_index,
        )?
        .map_err(refuse)?;
        check_format(
            &db,
            sled_has_data,
            opened.had_records,
            recorded.as_ref(),
            &mark_path,
            &dirty,
        )
        .map_err(refuse)?;
        let recorded = recorded.unwrap_or_default();

        if recorded.purged > purged_index.unwrap_or(0) {
            return Err(refuse(format!(
                "sled tree `{}` holds purge pointer {}, but {} records that the log was purged \
                 through index {}: sled lost the purge pointer (a damaged `db` file makes sled \
                 drop everything written after the damage)",
                trees::PURGED,
                purged_index.map_or("none".to_string(), |p| p.to_string()),
                mark_path.display(),
                recorded.purged
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

        // The committed id written last, if the log still holds it (a torn
        // tail cut above may have taken the entry it names: then the purge
        // pointer, which is committed by definition, or nothing).
        let committed = match &opened.committed {
            None => None,
            Some(bytes) => decode_raw::<Option<LogId<C::NodeId>>>(bytes)
                .map_err(|e| refuse(format!("the log's committed log id does not decode: {e}")))?,
        };
        let committed = committed
            .filter(|c| log.contains(c) || Some(c.index) <= purged_index)
            .or_else(|| written.clone());

        let last = log.last_index();
        let on_disk = last.max(purged_index).unwrap_or(0);
        let mut barrier =
            Barrier::open(db.clone(), &config.path, config.durability, dirty.clone())?
                .with_log(Box::new(log.clone()))
                .with_watermark(WatermarkHook {
                    file: WatermarkFile::open(
                        &mark_path,
                        recorded_seq,
                        config.durability == Durability::Fsync,
                    )?,
                    source: mark_source::<C>(&db, &dirty)?,
                })?;
        // Makes the clean-up above, the new segment or the cut tail, and
        // everything sled created while opening durable.
        barrier.sync()?;
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
            vote_restored: true,
            committed,
            head,
            meta: MetaStore::new(meta_tree, Arc::clone(&sync), dirty),
            sync,
            durable,
            deferred: config.deferred_durability,
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

    /// A log or vote write failed (a full disk shows up here when the
    /// segment grows, or when sled writes its buffers out): final, like a
    /// failed barrier. The segment log fails every later write and barrier
    /// after one failed write (what reached the disk is unknown), as sled
    /// 0.34 does (its "global error", reset only by reopening).
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
        self.vote_restored = false;
        self.barrier(ErrorSubject::Vote).await
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<C::NodeId>>, StorageError<C::NodeId>> {
        let vote = self
            .vote
            .get()
            .map_err(sto(ErrorSubject::Vote, ErrorVerb::Read))?;
        // See the type docs: no leadership is restored across a restart.
        Ok(vote.map(|vote| {
            if self.vote_restored {
                Vote {
                    committed: false,
                    ..vote
                }
            } else {
                vote
            }
        }))
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogId<C::NodeId>>,
    ) -> Result<(), StorageError<C::NodeId>> {
        // No barrier (see the type docs): kept for the next mark record.
        // A recovered id is checked against the log at open, so it never
        // names an entry the log lost.
        let bytes = encode("committed log id", &committed)
            .map_err(sto(ErrorSubject::Store, ErrorVerb::Write))?;
        self.log.set_committed(bytes);
        self.committed = committed;
        Ok(())
    }

    async fn read_committed(
        &mut self,
    ) -> Result<Option<LogId<C::NodeId>>, StorageError<C::NodeId>> {
        Ok(self.committed.clone())
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
            .append(entries)
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
        // A truncate record: the entries are gone from the index at once
        // and, after the barrier, for good (the record is replayed at open).
        self.log
            .remove_from(log_id.index)
            .map_err(|e| self.write_failed(e, ErrorSubject::Logs))?;
        // Durable before returning: openraft may next append entries with
        // the same indexes and must never see the old ones come back after
        // it was told they were gone.
        self.barrier(ErrorSubject::Logs).await?;
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

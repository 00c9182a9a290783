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

use crate::barrier::Barrier;
use crate::cell::Cell;
use crate::config::SledLogConfig;
use crate::durable::DurableIndex;
use crate::error::StoreError;
use crate::log_tree::LogTree;
use crate::meta::MetaStore;
use crate::reader::SledLogReader;
use crate::sync_worker::{SyncStall, SyncStats, SyncWorker};

/// sled tree names. Part of the on-disk format: do not rename.
mod trees {
    pub(super) const LOG: &str = "raft_log";
    pub(super) const VOTE: &str = "raft_vote";
    pub(super) const COMMITTED: &str = "raft_committed";
    pub(super) const PURGED: &str = "raft_purged";
    pub(super) const META: &str = "meta";
}

/// The Raft log, vote and log pointers of one node, stored in sled.
///
/// Generic over the openraft type config so the node crate plugs in its own
/// (entries must be serde, which openraft's `serde` feature guarantees).
///
/// Durability contract (see the crate docs for how it is achieved):
/// * `append` returns once the entries are readable and calls openraft's
///   callback only after a durability barrier covering them;
/// * `save_vote`, `truncate` and `purge` return only after a barrier;
/// * `save_committed` is written without waiting: it becomes durable with
///   the next barrier (openraft treats a committed id as an optional hint;
///   losing the latest one only means replaying a little more at start-up).
pub struct SledLogStore<C: RaftTypeConfig> {
    reader: SledLogReader<C>,
    log: LogTree,
    vote: Cell<Vote<C::NodeId>>,
    committed: Cell<Option<LogId<C::NodeId>>>,
    /// Greatest log id removed from the head of the log. Kept even when the
    /// log is empty: it is then also the last log id.
    purged: Cell<LogId<C::NodeId>>,
    meta: MetaStore,
    sync: Arc<SyncWorker>,
    durable: DurableIndex,
    /// [`SledLogConfig::deferred_durability`].
    deferred: bool,
}

impl<C: RaftTypeConfig> SledLogStore<C> {
    /// Opens (creating if needed) the store in `config.path`.
    ///
    /// Blocking file IO (sled recovery, the initial sync): call it at
    /// start-up or from `spawn_blocking`, not from a busy async task.
    pub fn open(config: &SledLogConfig) -> Result<Self, StoreError> {
        std::fs::create_dir_all(&config.path)?;
        let db = sled::Config::new()
            .path(&config.path)
            .cache_capacity(config.cache_capacity_bytes)
            .open()
            .map_err(|source| StoreError::Open {
                path: config.path.clone(),
                source: source.into(),
            })?;

        let log = LogTree::open(&db, trees::LOG)?;
        let purged: Cell<LogId<C::NodeId>> = Cell::open(&db, trees::PURGED, "last purged log id")?;
        // `purge` records the purged id before deleting the entries; if a
        // crash fell between the two, finish the deletion now.
        if let Some(p) = purged.get()? {
            log.remove_upto(p.index)?;
        }
        let vote = Cell::open(&db, trees::VOTE, "vote")?;
        let committed = Cell::open(&db, trees::COMMITTED, "committed log id")?;
        let meta_tree = db.open_tree(trees::META)?;

        // Also makes the clean-up above, and everything sled created while
        // opening, durable.
        let barrier = Barrier::open(db, &config.path, config.durability)?;
        let sync = Arc::new(SyncWorker::spawn(barrier)?);
        // The barrier above made everything found on disk durable. A log
        // whose tail cannot be read is reported by `get_log_state`, the
        // first thing openraft asks; it need not fail the open here.
        let last = log
            .last_log_id::<C::Entry, C::NodeId>()
            .ok()
            .flatten()
            .map(|l| l.index);
        let purged_index = purged.get().ok().flatten().map(|p| p.index);
        let durable = DurableIndex::starting_at(last.max(purged_index).unwrap_or(0));

        Ok(Self {
            reader: SledLogReader::new(log.clone()),
            log,
            vote,
            committed,
            purged,
            meta: MetaStore::new(meta_tree, Arc::clone(&sync)),
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

    /// Fault injection: stalls this store's durability barriers while set
    /// (see [`SyncStall`]).
    pub fn sync_stall(&self) -> SyncStall {
        self.sync.stall()
    }

    /// Durability barriers run and requests served so far (for metrics).
    pub fn sync_stats(&self) -> SyncStats {
        self.sync.stats()
    }

    /// Waits until every write made so far is durable.
    async fn barrier(
        &self,
        subject: ErrorSubject<C::NodeId>,
    ) -> Result<(), StorageError<C::NodeId>> {
        self.sync.sync().await.map_err(|e| {
            self.durable.fail();
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
        let purged = self
            .purged
            .get()
            .map_err(sto(ErrorSubject::Logs, ErrorVerb::Read))?;
        let last = self
            .log
            .last_log_id::<C::Entry, C::NodeId>()
            .map_err(sto(ErrorSubject::Logs, ErrorVerb::Read))?;
        // No entry is kept at or below `purged`, so the last entry, when
        // there is one, is the greater; `max` also covers an empty log.
        let last_log_id = std::cmp::max(last, purged.clone());
        Ok(LogState {
            last_purged_log_id: purged,
            last_log_id,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.reader.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        self.vote
            .set(vote)
            .map_err(sto(ErrorSubject::Vote, ErrorVerb::Write))?;
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
        // Readable from here on (openraft requires that when we return) ...
        let last = self
            .log
            .append::<C::Entry, C::NodeId>(entries)
            .map_err(sto(ErrorSubject::Logs, ErrorVerb::Write))?;
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
                    (Err(_), _) => durable.fail(),
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
        self.log
            .remove_from(log_id.index)
            .map_err(sto(ErrorSubject::Logs, ErrorVerb::Delete))?;
        // Durable before returning: openraft may next append entries with
        // the same indexes and must never see the old ones come back after
        // it was told they were gone.
        self.barrier(ErrorSubject::Logs).await?;
        self.durable.lower_to(log_id.index.saturating_sub(1));
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        let current = self
            .purged
            .get()
            .map_err(sto(ErrorSubject::Logs, ErrorVerb::Read))?;
        // Never move the purge pointer backwards.
        if current.as_ref() < Some(&log_id) {
            // Pointer first, entries second: a crash in between leaves
            // entries at or below the pointer, removed again at open; the
            // reverse order could leave a log whose head is missing with no
            // pointer saying so.
            self.purged
                .set(&log_id)
                .map_err(sto(ErrorSubject::Logs, ErrorVerb::Write))?;
        }
        self.log
            .remove_upto(log_id.index)
            .map_err(sto(ErrorSubject::Logs, ErrorVerb::Delete))?;
        // Purge happens once per snapshot, so paying a barrier keeps the
        // rule simple: every completed write is durable.
        self.barrier(ErrorSubject::Logs).await?;
        // Purged entries are in a snapshot, which is durable before
        // openraft purges; a follower that installed one answers for its
        // last index from here on.
        self.durable.advance(log_id.index);
        Ok(())
    }
}

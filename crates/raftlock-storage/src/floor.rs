//! [`SnapshotFloor`]: how far a durable snapshot covers the log, and the
//! purges that wait for it.
//!
//! openraft 0.9.25 can purge the log before the snapshot that covers the
//! purged entries is on disk. A follower installing a snapshot from the
//! leader (`install_full_snapshot`, `engine/handler/following_handler/mod.rs`
//! 321–325) queues the install for the state-machine worker and the purge
//! right behind it; the Raft core runs the purge at once (`PurgeLog` waits
//! for no condition, `engine/command.rs` 193; `core/raft_core.rs` 1659–1661)
//! while the worker is still writing the snapshot (`core/sm/worker.rs` 105).
//! A purge made durable at once then leaves, after a crash before the
//! snapshot is on disk, a log purged past the newest snapshot: the entries
//! in between, needed to rebuild the state, are gone and the member cannot
//! start. (A leader's own snapshots are safe: openraft purges only once
//! `build_snapshot` has returned, `core/raft_core.rs` 1399–1410.)
//!
//! With [`SledLogConfig::snapshot_gated_purge`](crate::SledLogConfig) the
//! store deletes entries only up to the floor that the caller raises once
//! a snapshot is durable, reports the whole purge to openraft (which allows
//! a purge to be carried out later; its conformance suite waits for it),
//! and finishes the rest when the floor rises. An append after a purge past
//! the last entry waits for the floor, so the log on disk never has a hole.
//! At start, [`SnapshotFloor::start`] refuses a log that cannot be replayed
//! from the snapshot on disk.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use openraft::{LogId, LogState, NodeId, RaftTypeConfig};
use tokio::sync::watch;

use crate::cell::Cell;
use crate::durable::DurableIndex;
use crate::error::StoreError;
use crate::segment::SegmentLog;
use crate::sync_worker::SyncWorker;

/// Longest an append waits for the snapshot that a purge past the log's
/// last entry is waiting for. Writing and syncing even a large snapshot
/// takes seconds; the wait is bounded so that a snapshot that never becomes
/// durable (its write failed) stops the node with an error instead of
/// holding the Raft core forever.
const SNAPSHOT_WAIT: Duration = Duration::from_secs(60);

/// How far a durable snapshot covers the log: the log store purges no
/// entry past it. Obtained from
/// [`SledLogStore::snapshot_floor`](crate::SledLogStore::snapshot_floor);
/// cheap to clone.
///
/// The owner of the snapshots calls [`start`](Self::start) once with the
/// snapshot found on disk, before handing the store to openraft, and
/// [`advance`](Self::advance) each time a newer snapshot is durable (after
/// its file and directory are synced). Only a store opened with
/// [`SledLogConfig::snapshot_gated_purge`](crate::SledLogConfig) waits for
/// the floor; `start`'s check applies to every store.
///
/// The handle does not keep the database open: once the store is dropped,
/// `start` and `advance` do nothing.
#[derive(Clone)]
pub struct SnapshotFloor {
    /// `None` for a detached floor (no store).
    head: Option<Weak<dyn FloorTarget>>,
}

impl SnapshotFloor {
    pub(crate) fn new(head: Weak<dyn FloorTarget>) -> Self {
        Self { head: Some(head) }
    }

    /// A floor attached to no store: for a state machine run without a log
    /// store (tests).
    pub fn detached() -> Self {
        Self { head: None }
    }

    fn target(&self) -> Option<Arc<dyn FloorTarget>> {
        self.head.as_ref().and_then(Weak::upgrade)
    }

    /// Sets the floor to `covered`, the last log index of the snapshot found
    /// on disk at start (`None`: no snapshot), and checks that the log
    /// continues from it. Fails with [`StoreError::PurgedPastSnapshot`] if
    /// the log was purged past it, or [`StoreError::LogHole`] if entries
    /// after it are missing: the state cannot be rebuilt from this disk.
    /// Reads every key after the snapshot: call it once, at start.
    pub fn start(&self, covered: Option<u64>) -> Result<(), StoreError> {
        self.target().map_or(Ok(()), |t| t.start(covered))
    }

    /// A snapshot covering the log through index `covered` is durable: the
    /// store may purge up to it. Carries out the purges deferred until now
    /// on the calling thread (blocking sled writes; they become durable with
    /// the store's next barrier, which is requested but not waited for: an
    /// entry kept a little longer is harmless). Never lowers the floor.
    pub fn advance(&self, covered: u64) -> Result<(), StoreError> {
        self.target().map_or(Ok(()), |t| t.advance(covered))
    }

    /// The last log index a durable snapshot covers, as far as the store
    /// was told; `None` before any, or when detached.
    pub fn current(&self) -> Option<u64> {
        self.target().and_then(|t| t.current())
    }
}

impl fmt::Debug for SnapshotFloor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SnapshotFloor")
            .field("current", &self.current())
            .finish()
    }
}

/// What [`SnapshotFloor`] needs of the store, without its type config.
pub(crate) trait FloorTarget: Send + Sync {
    fn start(&self, covered: Option<u64>) -> Result<(), StoreError>;
    fn advance(&self, covered: u64) -> Result<(), StoreError>;
    fn current(&self) -> Option<u64>;
}

/// The head of the log: the purge pointer on disk, the purge openraft
/// asked for, and the snapshot floor between them. Shared by the store
/// (openraft's purges) and [`SnapshotFloor`] (the snapshot's owner).
pub(crate) struct LogHead<C: RaftTypeConfig> {
    log: SegmentLog<C::NodeId>,
    /// The purge pointer on disk.
    pointer: Cell<LogId<C::NodeId>>,
    sync: Arc<SyncWorker>,
    /// Failed by a failed barrier, as for every other write.
    durable: DurableIndex,
    /// [`SledLogConfig::snapshot_gated_purge`](crate::SledLogConfig).
    gated: bool,
    /// std Mutex: held only for sled calls, never across an `.await`.
    state: Mutex<HeadState<C::NodeId>>,
    /// Whether part of a purge waits for the floor: lets an append skip the
    /// mutex (which a purge holds while it deletes) in the common case.
    deferred: AtomicBool,
    /// The floor, published for appends waiting for it.
    floor_tx: watch::Sender<Option<u64>>,
}

struct HeadState<NID: NodeId> {
    /// The purge pointer as written (durable after the next barrier).
    written: Option<LogId<NID>>,
    /// The greatest purge openraft asked for: what it was told is gone.
    /// Never below `written`.
    requested: Option<LogId<NID>>,
    /// Last log index a durable snapshot covers.
    floor: Option<u64>,
}

impl<C: RaftTypeConfig> LogHead<C> {
    /// `written` is the pointer found on disk; entries up to it are gone.
    pub(crate) fn new(
        log: SegmentLog<C::NodeId>,
        pointer: Cell<LogId<C::NodeId>>,
        written: Option<LogId<C::NodeId>>,
        sync: Arc<SyncWorker>,
        durable: DurableIndex,
        gated: bool,
    ) -> Self {
        Self {
            log,
            pointer,
            sync,
            durable,
            gated,
            state: Mutex::new(HeadState {
                requested: written.clone(),
                written,
                floor: None,
            }),
            deferred: AtomicBool::new(false),
            floor_tx: watch::channel(None).0,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HeadState<C::NodeId>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The last purged log id as openraft knows it (possibly not yet
    /// carried out), and the last log id.
    pub(crate) fn log_state(&self) -> Result<LogState<C>, StoreError> {
        let state = self.lock();
        let last = self.log.last_log_id();
        let purged = state.requested.clone();
        // No entry openraft still knows of is kept at or below `purged`, so
        // the last entry, when there is one, is the greater; `max` also
        // covers an empty log.
        Ok(LogState {
            last_log_id: std::cmp::max(last, purged.clone()),
            last_purged_log_id: purged,
        })
    }

    /// openraft purges through `log_id`: deletes what the floor allows and
    /// remembers the rest. Returns whether anything was written (and needs
    /// a barrier to be durable).
    pub(crate) fn request(&self, log_id: LogId<C::NodeId>) -> Result<bool, StoreError> {
        let mut state = self.lock();
        if state.requested.as_ref() < Some(&log_id) {
            state.requested = Some(log_id);
        }
        let wrote = self.purge_allowed(&mut state)?;
        if self.deferred.load(Ordering::Acquire) {
            tracing::info!(
                requested = ?state.requested,
                purged = ?state.written,
                floor = ?state.floor,
                "log purge deferred until a durable snapshot covers it"
            );
        }
        Ok(wrote)
    }

    /// Waits, if need be, until entries appended now cannot follow a hole
    /// on disk: after a purge past the last entry that waits for its
    /// snapshot, the entries between would be neither on disk nor purged.
    pub(crate) async fn before_append(&self) -> Result<(), StoreError> {
        if !self.deferred.load(Ordering::Acquire) {
            return Ok(());
        }
        let Some(needed) = self.floor_needed_to_append()? else {
            return Ok(());
        };
        tracing::info!(
            snapshot = needed,
            "append waits for the snapshot its log was purged through"
        );
        // `wait_for` sees the current value first: a floor raised since the
        // check above is not missed.
        let mut floor = self.floor_tx.subscribe();
        let raised = floor.wait_for(|f| *f >= Some(needed));
        // The sender lives in `self`: only the timeout ends the wait early.
        let raised = matches!(tokio::time::timeout(SNAPSHOT_WAIT, raised).await, Ok(Ok(_)));
        if raised {
            Ok(())
        } else {
            Err(StoreError::SnapshotNotDurable {
                index: needed,
                waited: SNAPSHOT_WAIT,
            })
        }
    }

    /// The floor an append must wait for, if any: that of a deferred purge
    /// reaching past the last entry (or pointer) on disk.
    fn floor_needed_to_append(&self) -> Result<Option<u64>, StoreError> {
        let state = self.lock();
        let written = state.written.as_ref().map(|w| w.index);
        let Some(requested) = state.requested.as_ref().map(|r| r.index) else {
            return Ok(None);
        };
        if Some(requested) <= written {
            return Ok(None);
        }
        let end = self.log.last_index().max(written);
        Ok((Some(requested) > end).then_some(requested))
    }

    /// Purges as far towards `requested` as the floor allows.
    fn purge_allowed(&self, state: &mut HeadState<C::NodeId>) -> Result<bool, StoreError> {
        let Some(requested) = state.requested.clone() else {
            return Ok(false);
        };
        let requested_index = requested.index;
        let written = state.written.as_ref().map(|w| w.index);
        // Deferred until shown otherwise: if a write below fails, appends
        // still check for a hole.
        if Some(requested_index) > written {
            self.deferred.store(true, Ordering::Release);
        }
        let target = match state.floor {
            _ if !self.gated => Some(requested),
            Some(floor) if floor >= requested.index => Some(requested),
            // Part of it: through the newest entry the snapshot covers.
            Some(floor) => self.log.last_log_id_upto(floor),
            None => None,
        };
        let wrote = match target.filter(|t| Some(t.index) > written) {
            Some(target) => {
                // Pointer first, entries second: a crash in between leaves
                // entries at or below the pointer, removed again at open;
                // the reverse order could leave a log whose head is missing
                // with no pointer saying so.
                self.pointer.set(&target)?;
                state.written = Some(target.clone());
                self.log.remove_upto(target.index);
                true
            }
            None => false,
        };
        let deferred = Some(requested_index) > state.written.as_ref().map(|w| w.index);
        self.deferred.store(deferred, Ordering::Release);
        Ok(wrote)
    }

    /// Sets the floor (never lowering it), carries out what it now allows
    /// and wakes the appends waiting for it.
    fn raise(&self, state: &mut HeadState<C::NodeId>, covered: u64) -> Result<bool, StoreError> {
        if state.floor >= Some(covered) {
            return Ok(false);
        }
        state.floor = Some(covered);
        let wrote = self.purge_allowed(state)?;
        // Published after the purge: an append woken by it finds the log's
        // head already where the snapshot ends.
        self.floor_tx.send_replace(state.floor);
        Ok(wrote)
    }
}

impl<C: RaftTypeConfig> FloorTarget for LogHead<C> {
    fn start(&self, covered: Option<u64>) -> Result<(), StoreError> {
        let mut state = self.lock();
        let purged = state.written.as_ref().map(|w| w.index);
        if let Some(purged) = purged.filter(|p| Some(*p) > covered) {
            return Err(StoreError::PurgedPastSnapshot {
                purged,
                snapshot: covered,
            });
        }
        // Replay starts right after the snapshot: every entry from there on
        // must be present. (Missing entries at or below it are not needed.)
        if let Some((first_missing, last_missing)) = self.log.first_gap_after(covered) {
            return Err(StoreError::LogHole {
                snapshot: covered,
                first_missing,
                last_missing,
            });
        }
        if let Some(covered) = covered {
            // Nothing is deferred at start (`requested == written`), so
            // this only records the floor.
            self.raise(&mut state, covered)?;
        }
        Ok(())
    }

    fn advance(&self, covered: u64) -> Result<(), StoreError> {
        let wrote = self.raise(&mut self.lock(), covered)?;
        if wrote {
            // Not waited for (see `SnapshotFloor::advance`); a failure still
            // fails every later durability wait, as any failed barrier does.
            let durable = self.durable.clone();
            self.sync.submit(Box::new(move |result| {
                if let Err(cause) = result {
                    durable.fail(cause);
                }
            }))?;
        }
        Ok(())
    }

    fn current(&self) -> Option<u64> {
        self.lock().floor
    }
}

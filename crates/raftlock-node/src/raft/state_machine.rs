//! openraft's state machine over the core `StateMachine`, kept in memory
//! and snapshotted to disk. After each applied batch it hands the effects
//! to the waiter registry (predecessor-only wake-ups), the session tracker
//! and watchers, then publishes the applied index.
//!
//! Snapshots live in their file only (`snapshot_file`): a build streams the
//! state into it under the read lock, and the bytes are read back only when
//! openraft asks for the current snapshot to send it to a peer.
//!
//! The log store purges only what a durable snapshot covers
//! (`raftlock_storage::SnapshotFloor`): openraft 0.9 purges a follower's log
//! while this state machine is still writing the snapshot it installs. The
//! floor rises here once each snapshot file is synced, and at start it is
//! set to the snapshot on disk, refusing a log that cannot be replayed from
//! it.

use std::io::Cursor;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard};

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{EntryPayload, RaftSnapshotBuilder, StorageIOError};
use raftlock_core::{Command, Effects, StateMachine};
use raftlock_storage::{DurableIndex, SnapshotFloor, StoreError};
use tokio::sync::{broadcast, watch};

use crate::disk::snapshot_file::{self, SnapshotFileError, SnapshotWriter};
use crate::history::ChangeHistory;
use crate::ops::waiters::WaiterRegistry;
use crate::raft::typ::{
    LogId, Proposal, Reply, SnapshotMeta, StorageError, StoredMembership, TypeConfig,
};
use crate::sessions::tracker::SessionTracker;

/// What the rest of the node reads or is told about.
pub struct Shared {
    /// The state. std RwLock: never held across an await.
    state: RwLock<StateMachine>,
    applied: Mutex<Applied>,
    /// Last applied log index, for read-index waits and "wait until my
    /// replica has this write".
    pub applied_index: watch::Sender<u64>,
    pub waiters: Arc<WaiterRegistry>,
    pub tracker: Arc<SessionTracker>,
    /// Effects of every applied command (election observers).
    pub changes: broadcast::Sender<Arc<Effects>>,
    /// Expiries, leader changes and commit times, for metrics.
    pub stats: crate::stats::OpStats,
    /// Recent node changes by revision (node watches).
    pub history: ChangeHistory,
    snapshot_dir: PathBuf,
    /// Meta of the snapshot in `snapshot_dir`, `None` before the first.
    /// Held while that file is written, so a build and an install never
    /// write it at once, and an older build never replaces a newer
    /// snapshot (the log before it may already be purged).
    snapshot: Mutex<Option<SnapshotMeta>>,
    /// Snapshots installed from the leader since start: the whole state
    /// was replaced without effects, so watchers of effects resync.
    snapshots_installed: AtomicU64,
    /// Tells the log store how far a durable snapshot covers the log: it
    /// purges no further. Replaced when the member reopens its log store
    /// after a full disk ([`Shared::attach_log`]).
    floor: Mutex<SnapshotFloor>,
}

#[derive(Default, Clone)]
struct Applied {
    last_applied: Option<LogId>,
    membership: StoredMembership,
}

impl Shared {
    /// Loads the newest snapshot from `snapshot_dir`, if any, and sets the
    /// log store's `floor` to it. Fails if the log cannot be replayed from
    /// that snapshot (purged past it, or missing entries after it).
    pub fn open(
        snapshot_dir: PathBuf,
        waiters: Arc<WaiterRegistry>,
        tracker: Arc<SessionTracker>,
        floor: SnapshotFloor,
    ) -> Result<Arc<Self>, String> {
        // A snapshot renamed into place just before a crash may not have its
        // directory entry on disk yet: make it durable before the floor
        // lets the log be purged on its strength.
        snapshot_file::sync_dir(&snapshot_dir).map_err(|e| e.to_string())?;
        let stored = snapshot_file::load(&snapshot_dir).map_err(|e| e.to_string())?;
        // The bytes are dropped once decoded: the file keeps them.
        let (state, applied, meta) = match stored {
            Some(s) => (
                StateMachine::from_snapshot(&s.data).map_err(|e| e.to_string())?,
                Applied {
                    last_applied: s.meta.last_log_id,
                    membership: s.meta.last_membership.clone(),
                },
                Some(s.meta),
            ),
            None => (StateMachine::new(), Applied::default(), None),
        };
        floor
            .start(meta.as_ref().and_then(|m| m.last_log_id).map(|l| l.index))
            .map_err(|e| e.to_string())?;
        tracker.on_checkpointed(checkpointed(&state));
        tracker.resync_hold_offs(&state.held_off());
        let index = applied.last_applied.map_or(0, |l| l.index);
        let history = ChangeHistory::new(state.revision());
        Ok(Arc::new(Shared {
            history,
            state: RwLock::new(state),
            applied: Mutex::new(applied),
            applied_index: watch::channel(index).0,
            waiters,
            tracker,
            changes: broadcast::channel(1024).0,
            stats: crate::stats::OpStats::default(),
            snapshot_dir,
            snapshot: Mutex::new(meta),
            snapshots_installed: AtomicU64::new(0),
            floor: Mutex::new(floor),
        }))
    }

    /// Hands this state machine to a reopened log store (after a full
    /// disk, `storage_watch.rs`): sets the new store's floor to the snapshot
    /// on disk, checking that its log continues from it, and checks that the
    /// store holds every entry applied here. Applying waits for durability
    /// (see `StateMachineStore::apply`), so a store reopened from the same
    /// disk always does; if it does not, the disk lost acknowledged entries
    /// and the member must not go on.
    pub(crate) fn attach_log(
        &self,
        floor: SnapshotFloor,
        log_last: Option<u64>,
    ) -> Result<(), String> {
        let snapshot = self.snapshot_meta().as_ref().and_then(|m| m.last_log_id);
        floor
            .start(snapshot.map(|l| l.index))
            .map_err(|e| e.to_string())?;
        let applied = self.applied().last_applied.map(|l| l.index);
        if applied > log_last.max(snapshot.map(|l| l.index)) {
            return Err(format!(
                "the reopened log ends at {log_last:?} but this member applied \
                 entries up to {applied:?}: entries that were on disk are gone"
            ));
        }
        *self.floor.lock().unwrap_or_else(|e| e.into_inner()) = floor;
        Ok(())
    }

    fn floor(&self) -> SnapshotFloor {
        self.floor.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Read access to the state.
    pub fn read(&self) -> RwLockReadGuard<'_, StateMachine> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The state and the last log id applied to it, read together (a
    /// backup records which index its state is as of). Blank and
    /// membership entries move the index without the state's lock; they
    /// do not change the state, so the pair is consistent either way.
    pub(crate) fn read_applied(&self) -> (RwLockReadGuard<'_, StateMachine>, Option<LogId>) {
        let state = self.read();
        let applied = self.applied().last_applied;
        (state, applied)
    }

    fn applied(&self) -> std::sync::MutexGuard<'_, Applied> {
        self.applied.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn snapshot_meta(&self) -> MutexGuard<'_, Option<SnapshotMeta>> {
        self.snapshot.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Snapshots installed from the leader since start.
    pub fn snapshots_installed(&self) -> u64 {
        self.snapshots_installed.load(Ordering::Relaxed)
    }

    /// Writes the current state as the snapshot file, unless the file
    /// already holds this point or a later one; returns the meta of the
    /// snapshot in the file and the bytes written (0 when skipped).
    ///
    /// The state is encoded under the read lock straight into the file
    /// (apply waits meanwhile: ~10-20 ms for 10,000 sessions holding a lock
    /// each, ~0.1-0.2 s for 100,000), not cloned first: a clone takes as long
    /// as the encoding (or longer) and doubles the memory. The fsync comes after the
    /// lock is released.
    fn write_snapshot(&self) -> Result<(SnapshotMeta, u64), SnapshotFileError> {
        let mut current = self.snapshot_meta();
        let (writer, meta) = {
            let state = self.read();
            let applied = self.applied().clone();
            if let Some(current) = current
                .as_ref()
                .filter(|c| c.last_log_id >= applied.last_applied)
            {
                return Ok((current.clone(), 0));
            }
            let snapshot_id = applied.last_applied.map_or("empty".to_string(), |l| {
                format!("{}-{}", l.leader_id, l.index)
            });
            let meta = SnapshotMeta {
                last_log_id: applied.last_applied,
                last_membership: applied.membership,
                snapshot_id,
            };
            let mut writer = SnapshotWriter::create(&self.snapshot_dir, &meta)?;
            writer.write_state(&state)?;
            (writer, meta)
        };
        let bytes = writer.commit()?;
        *current = Some(meta.clone());
        Ok((meta, bytes))
    }

    /// The snapshot `meta` is durable in the snapshot file: the log store
    /// may purge what it covers (now, on this blocking thread).
    fn snapshot_durable(&self, meta: &SnapshotMeta) -> Result<(), StoreError> {
        match meta.last_log_id {
            Some(last) => self.floor().advance(last.index),
            None => Ok(()),
        }
    }

    /// Saves a snapshot received from the leader as the snapshot file.
    fn save_snapshot(&self, meta: &SnapshotMeta, data: &[u8]) -> Result<(), SnapshotFileError> {
        let mut current = self.snapshot_meta();
        snapshot_file::save(&self.snapshot_dir, meta, data)?;
        *current = Some(meta.clone());
        Ok(())
    }

    /// Tells the waiters, the tracker and watchers what a command did.
    fn publish(&self, command: &Command, effects: Effects, ok: bool) {
        if ok {
            match command {
                Command::OpenSession { id, ttl_ms, .. }
                | Command::OpenSessionAs { id, ttl_ms, .. } => self.tracker.on_opened(*id, *ttl_ms),
                Command::CheckpointSessions { sessions } => self
                    .tracker
                    .on_checkpointed(sessions.iter().map(|(id, _)| *id)),
                Command::RenewSessions { ids } => self.tracker.on_renewed(ids.iter().copied()),
                _ => {}
            }
        }
        if effects == Effects::default() {
            return;
        }
        self.tracker
            .on_ended(effects.ended_sessions.iter().copied());
        self.tracker.on_held_off(&effects.held_off);
        self.tracker.on_unowned_deleted(
            effects
                .deleted
                .iter()
                .filter(|d| d.owner.is_none())
                .map(|d| d.path.as_str()),
        );
        self.waiters
            .wake_deleted(effects.deleted.iter().map(|d| d.path.as_str()));
        let granted: Vec<String> = effects
            .granted
            .iter()
            .filter(|p| crate::ops::waiters::is_shared_node(p))
            .map(|p| crate::ops::waiters::granted_key(p))
            .collect();
        if !granted.is_empty() {
            self.waiters
                .wake_deleted(granted.iter().map(String::as_str));
        }
        // Nobody listening is fine.
        let _ = self.changes.send(Arc::new(effects));
    }
}

fn checkpointed(state: &StateMachine) -> Vec<raftlock_core::SessionId> {
    state
        .session_leases()
        .filter(|l| l.checkpoint_remaining_ms.is_some())
        .map(|l| l.id)
        .collect()
}

/// Why storing a snapshot failed: its file, or the log purge it allows.
#[derive(Debug, thiserror::Error)]
enum SnapshotStoreError {
    #[error(transparent)]
    File(#[from] SnapshotFileError),
    #[error("purging the log the snapshot covers: {0}")]
    Purge(#[from] StoreError),
}

impl SnapshotStoreError {
    /// The cause as the log store's error type, keeping the kind of an I/O
    /// error (a full disk must still read as one).
    fn into_store_error(self) -> StoreError {
        match self {
            SnapshotStoreError::Purge(e) => e,
            SnapshotStoreError::File(SnapshotFileError::Io { path, source }) => {
                StoreError::Io(std::io::Error::new(
                    source.kind(),
                    format!("snapshot file {}: {source}", path.display()),
                ))
            }
            SnapshotStoreError::File(corrupt) => {
                StoreError::Io(std::io::Error::other(corrupt.to_string()))
            }
        }
    }
}

fn storage_error(e: impl std::fmt::Display) -> StorageError {
    StorageIOError::write_state_machine(&std::io::Error::other(e.to_string())).into()
}

fn snapshot_error(meta: Option<&SnapshotMeta>, e: impl std::fmt::Display) -> StorageError {
    let e = std::io::Error::other(e.to_string());
    StorageIOError::write_snapshot(meta.map(|m| m.signature()), &e).into()
}

/// The openraft-facing state machine.
#[derive(Clone)]
pub struct StateMachineStore {
    shared: Arc<Shared>,
    /// Entries are applied only once on this node's disk (the log store
    /// acknowledges appends before they are durable).
    durable: DurableIndex,
}

impl StateMachineStore {
    pub fn new(shared: Arc<Shared>, durable: DurableIndex) -> Self {
        StateMachineStore { shared, durable }
    }

    /// A snapshot that could not be stored stops openraft, but not the
    /// log's barriers: failing the durable index too takes the member out
    /// of the Raft group the way a failed barrier does, so its API says
    /// why and, after `ENOSPC`, it recovers in place once there is room
    /// (storage_watch.rs; docs/design.md, "A full disk").
    fn snapshot_not_stored(
        &self,
        meta: Option<&SnapshotMeta>,
        e: SnapshotStoreError,
    ) -> StorageError {
        let reported = snapshot_error(meta, &e);
        tracing::error!(error = %e, "storing a snapshot failed");
        self.durable.fail_beside_log(e.into_store_error());
        reported
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachineStore {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let shared = self.shared.clone();
        // Encoding a large state takes a while: off the async workers.
        let (meta, bytes) =
            tokio::task::spawn_blocking(move || -> Result<_, SnapshotStoreError> {
                let (meta, bytes) = shared.write_snapshot()?;
                // openraft purges only once this returns, so a leader's purge
                // never waits; raising the floor here keeps it that way.
                shared.snapshot_durable(&meta)?;
                Ok((meta, bytes))
            })
            .await
            .map_err(storage_error)?
            .map_err(|e| self.snapshot_not_stored(None, e))?;
        tracing::info!(id = %meta.snapshot_id, bytes, "snapshot built");
        // Without the data: openraft 0.9 keeps only the meta of a built
        // snapshot (`sm::worker` answers `BuildSnapshot(snap.meta)`, and the
        // start-up helper takes `.meta`); whatever it sends to a peer comes
        // from `get_current_snapshot`, which reads the file.
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(Vec::new())),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachineStore {
    type SnapshotBuilder = Self;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        let applied = self.shared.applied();
        Ok((applied.last_applied, applied.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Reply>, StorageError>
    where
        I: IntoIterator<Item = openraft::Entry<TypeConfig>> + Send,
        I::IntoIter: Send,
    {
        let entries: Vec<_> = entries.into_iter().collect();
        if let Some(last) = entries.last() {
            // Committed in openraft's view may still be volatile here (see
            // `raftlock_storage::DurableIndex`): nothing is applied, so no
            // client hears of it, before it is on this node's disk too.
            self.durable
                .wait_for(last.log_id.index)
                .await
                .map_err(storage_error)?;
        }
        let mut replies = Vec::new();
        let mut last_index = None;
        for entry in entries {
            let reply = match entry.payload {
                EntryPayload::Blank => {
                    self.shared.applied().last_applied = Some(entry.log_id);
                    Reply::default()
                }
                EntryPayload::Membership(membership) => {
                    let mut applied = self.shared.applied();
                    applied.membership = StoredMembership::new(Some(entry.log_id), membership);
                    applied.last_applied = Some(entry.log_id);
                    Reply::default()
                }
                EntryPayload::Normal(Proposal(commands)) => {
                    // One write lock for the whole proposal; waiters and
                    // watchers are told after it is released, in order.
                    let applied: Vec<raftlock_core::Applied> = {
                        let mut state =
                            self.shared.state.write().unwrap_or_else(|e| e.into_inner());
                        let applied = commands
                            .iter()
                            .map(|c| {
                                let applied = state.apply(c);
                                self.shared.history.record(&state, &applied.effects);
                                applied
                            })
                            .collect();
                        // Under the write lock: a snapshot build (read lock)
                        // must never see this entry's state with the index
                        // before it, or a restart would apply it twice.
                        self.shared.applied().last_applied = Some(entry.log_id);
                        applied
                    };
                    for (command, applied) in commands.iter().zip(&applied) {
                        self.shared.publish(
                            command,
                            applied.effects.clone(),
                            applied.result.is_ok(),
                        );
                    }
                    Reply(applied)
                }
            };
            last_index = Some(entry.log_id.index);
            replies.push(reply);
        }
        if let Some(index) = last_index {
            self.shared.applied_index.send_replace(index);
        }
        Ok(replies)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let data = snapshot.into_inner();
        let state = StateMachine::from_snapshot(&data).map_err(storage_error)?;
        let (shared, to_save) = (self.shared.clone(), meta.clone());
        // The received bytes go to the file and are dropped there. Only
        // then may the log lose what the snapshot covers: openraft has
        // already told the log store to purge it (see the module docs).
        tokio::task::spawn_blocking(move || -> Result<_, SnapshotStoreError> {
            shared.save_snapshot(&to_save, &data)?;
            Ok(shared.snapshot_durable(&to_save)?)
        })
        .await
        .map_err(storage_error)?
        .map_err(|e| self.snapshot_not_stored(Some(meta), e))?;
        let checkpointed = checkpointed(&state);
        let held_off = state.held_off();
        let revision = state.revision();
        *self.shared.state.write().unwrap_or_else(|e| e.into_inner()) = state;
        self.shared.history.reset(revision);
        *self.shared.applied() = Applied {
            last_applied: meta.last_log_id,
            membership: meta.last_membership.clone(),
        };
        self.shared
            .snapshots_installed
            .fetch_add(1, Ordering::Relaxed);
        self.shared.tracker.on_checkpointed(checkpointed);
        self.shared.tracker.resync_hold_offs(&held_off);
        // The whole state changed: every waiter re-checks its place.
        self.shared.waiters.wake_all();
        let index = meta.last_log_id.map_or(0, |l| l.index);
        self.shared.applied_index.send_replace(index);
        tracing::info!(id = %meta.snapshot_id, "installed snapshot from the leader");
        Ok(())
    }

    /// Reads the snapshot file: its bytes are in memory only while openraft
    /// sends them to a peer. (Not through `Shared::snapshot`, which a build
    /// holds for as long as it encodes.)
    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        let dir = self.shared.snapshot_dir.clone();
        let stored = tokio::task::spawn_blocking(move || snapshot_file::load(&dir))
            .await
            .map_err(storage_error)?
            .map_err(|e| {
                let e = std::io::Error::other(e.to_string());
                StorageError::from(StorageIOError::read_snapshot(None, &e))
            })?;
        Ok(stored.map(|s| Snapshot {
            meta: s.meta,
            snapshot: Box::new(Cursor::new(s.data)),
        }))
    }
}

#[cfg(test)]
mod tests;

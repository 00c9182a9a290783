//! openraft's state machine over the core `StateMachine`, kept in memory
//! and snapshotted to disk. After each applied batch it hands the effects
//! to the waiter registry (predecessor-only wake-ups), the session tracker
//! and watchers, then publishes the applied index.

use std::io::Cursor;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{EntryPayload, RaftSnapshotBuilder, StorageIOError};
use raftlock_core::{Command, Effects, StateMachine};
use raftlock_storage::DurableIndex;
use tokio::sync::{broadcast, watch};

use crate::snapshot_file::{self, StoredSnapshot};
use crate::tracker::SessionTracker;
use crate::typ::{
    LogId, Proposal, Reply, SnapshotMeta, StorageError, StoredMembership, TypeConfig,
};
use crate::waiters::WaiterRegistry;

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
    snapshot_dir: PathBuf,
    current_snapshot: Mutex<Option<StoredSnapshot>>,
}

#[derive(Default, Clone)]
struct Applied {
    last_applied: Option<LogId>,
    membership: StoredMembership,
}

impl Shared {
    /// Loads the newest snapshot from `snapshot_dir`, if any.
    pub fn open(
        snapshot_dir: PathBuf,
        waiters: Arc<WaiterRegistry>,
        tracker: Arc<SessionTracker>,
    ) -> Result<Arc<Self>, String> {
        let stored = snapshot_file::load(&snapshot_dir).map_err(|e| e.to_string())?;
        let (state, applied) = match &stored {
            Some(s) => (
                StateMachine::from_snapshot(&s.data).map_err(|e| e.to_string())?,
                Applied {
                    last_applied: s.meta.last_log_id,
                    membership: s.meta.last_membership.clone(),
                },
            ),
            None => (StateMachine::new(), Applied::default()),
        };
        tracker.on_checkpointed(checkpointed(&state));
        let index = applied.last_applied.map_or(0, |l| l.index);
        Ok(Arc::new(Shared {
            state: RwLock::new(state),
            applied: Mutex::new(applied),
            applied_index: watch::channel(index).0,
            waiters,
            tracker,
            changes: broadcast::channel(1024).0,
            snapshot_dir,
            current_snapshot: Mutex::new(stored),
        }))
    }

    /// Read access to the state.
    pub fn read(&self) -> RwLockReadGuard<'_, StateMachine> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn applied(&self) -> std::sync::MutexGuard<'_, Applied> {
        self.applied.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn snapshot_slot(&self) -> std::sync::MutexGuard<'_, Option<StoredSnapshot>> {
        self.current_snapshot
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Tells the waiters, the tracker and watchers what a command did.
    fn publish(&self, command: &Command, effects: Effects, ok: bool) {
        if ok {
            match command {
                Command::OpenSession { id, ttl_ms, .. } => self.tracker.on_opened(*id, *ttl_ms),
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
        self.waiters
            .wake_deleted(effects.deleted.iter().map(|d| d.path.as_str()));
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

fn storage_error(e: impl std::fmt::Display) -> StorageError {
    StorageIOError::write_state_machine(&std::io::Error::other(e.to_string())).into()
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
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachineStore {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let shared = self.shared.clone();
        // Encoding a large state takes seconds: off the async workers.
        let stored = tokio::task::spawn_blocking(move || {
            let (data, applied) = {
                // Hold the read lock across both so the bytes match the meta.
                let state = shared.read();
                let applied = shared.applied().clone();
                let data = state
                    .to_snapshot()
                    .map_err(|e| Box::new(storage_error(e)))?;
                (data, applied)
            };
            let snapshot_id = applied.last_applied.map_or("empty".to_string(), |l| {
                format!("{}-{}", l.leader_id, l.index)
            });
            let stored = StoredSnapshot {
                meta: SnapshotMeta {
                    last_log_id: applied.last_applied,
                    last_membership: applied.membership,
                    snapshot_id,
                },
                data,
            };
            snapshot_file::save(&shared.snapshot_dir, &stored)
                .map_err(|e| Box::new(storage_error(e)))?;
            *shared.snapshot_slot() = Some(stored.clone());
            // Boxed: StorageError is large, and this crosses a thread.
            Ok::<_, Box<StorageError>>(stored)
        })
        .await
        .map_err(storage_error)?
        .map_err(|e| *e)?;
        tracing::info!(id = %stored.meta.snapshot_id, bytes = stored.data.len(), "snapshot built");
        Ok(Snapshot {
            meta: stored.meta,
            snapshot: Box::new(Cursor::new(stored.data)),
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
                EntryPayload::Blank => Reply::default(),
                EntryPayload::Membership(membership) => {
                    self.shared.applied().membership =
                        StoredMembership::new(Some(entry.log_id), membership);
                    Reply::default()
                }
                EntryPayload::Normal(Proposal(commands)) => {
                    // One write lock for the whole proposal; waiters and
                    // watchers are told after it is released, in order.
                    let applied: Vec<raftlock_core::Applied> = {
                        let mut state =
                            self.shared.state.write().unwrap_or_else(|e| e.into_inner());
                        commands.iter().map(|c| state.apply(c)).collect()
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
            self.shared.applied().last_applied = Some(entry.log_id);
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
        let stored = StoredSnapshot {
            meta: meta.clone(),
            data,
        };
        let dir = self.shared.snapshot_dir.clone();
        let to_save = stored.clone();
        tokio::task::spawn_blocking(move || snapshot_file::save(&dir, &to_save))
            .await
            .map_err(storage_error)?
            .map_err(storage_error)?;
        let checkpointed = checkpointed(&state);
        *self.shared.state.write().unwrap_or_else(|e| e.into_inner()) = state;
        *self.shared.applied() = Applied {
            last_applied: meta.last_log_id,
            membership: meta.last_membership.clone(),
        };
        *self.shared.snapshot_slot() = Some(stored);
        self.shared.tracker.on_checkpointed(checkpointed);
        // The whole state changed: every waiter re-checks its place.
        self.shared.waiters.wake_all();
        let index = meta.last_log_id.map_or(0, |l| l.index);
        self.shared.applied_index.send_replace(index);
        tracing::info!(id = %meta.snapshot_id, "installed snapshot from the leader");
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        Ok(self.shared.snapshot_slot().clone().map(|s| Snapshot {
            meta: s.meta,
            snapshot: Box::new(Cursor::new(s.data)),
        }))
    }
}

//! openraft's log store and state machine over the simulated disk.
//!
//! The log is the real segment log of `raftlock-storage` (`SegmentLog`),
//! writing through its file-system seam to the member's simulated disk
//! (`disk.rs`), so crashes exercise its real recovery and torn-tail
//! handling. The store follows openraft's contract as the real store does:
//! an append is acknowledged (`LogFlushed`) only once a barrier made it
//! durable; a truncate and a purge return after theirs. Barriers run on
//! one worker per member, in order, each after a seeded latency, and cover
//! every write before them (group commit, as `raftlock-storage`'s sync
//! worker does). The state machine is the real `raftlock_core::StateMachine`,
//! in memory, with snapshots on the simulated disk.

// openraft's traits return its (large) `StorageError`; the functions below pass it on.
#![allow(clippy::result_large_err)]

use std::fmt::Debug;
use std::io::Cursor;
use std::ops::RangeBounds;
use std::time::Duration;

use openraft::storage::{LogFlushed, LogState, RaftLogStorage, RaftStateMachine, Snapshot};
use openraft::{
    Entry, EntryPayload, LogId, OptionalSend, RaftLogReader, RaftSnapshotBuilder, SnapshotMeta,
    StorageError, StorageIOError, StoredMembership, Vote,
};
use raftlock_core::{Command, StateMachine};
use raftlock_node::{Member as RaftMember, NodeId, Proposal, Reply, TypeConfig};
use tokio::sync::{mpsc, oneshot};

use crate::disk::{barrier, open_log, SimLog};
use crate::world::WorldRef;

/// A member's in-memory state machine: lost on a crash, rebuilt from the
/// snapshot on its disk and the log.
#[derive(Default)]
pub struct SmState {
    /// The real state machine every replica applies.
    pub state: StateMachine,
    /// The last applied log id.
    pub last_applied: Option<LogId<NodeId>>,
    /// The last applied membership.
    pub membership: StoredMembership<NodeId, RaftMember>,
    /// Snapshots built, to name them uniquely.
    pub snapshots: u64,
}

impl SmState {
    /// The state a member restarts with: its durable snapshot, if any.
    pub fn restore(snapshot: Option<&crate::disk::StoredSnapshot>) -> Result<Self, String> {
        let Some((meta, bytes)) = snapshot else {
            return Ok(SmState::default());
        };
        Ok(SmState {
            state: StateMachine::from_snapshot(bytes).map_err(|e| e.to_string())?,
            last_applied: meta.last_log_id,
            membership: meta.last_membership.clone(),
            snapshots: 0,
        })
    }
}

fn io_error(what: &str) -> std::io::Error {
    std::io::Error::other(what.to_string())
}

fn stale() -> StorageError<NodeId> {
    StorageIOError::write_logs(&io_error("store of a crashed incarnation")).into()
}

fn log_write_error(e: impl std::fmt::Display) -> StorageError<NodeId> {
    StorageIOError::write_logs(&io_error(&e.to_string())).into()
}

fn log_read_error(e: impl std::fmt::Display) -> StorageError<NodeId> {
    StorageIOError::read_logs(&io_error(&e.to_string())).into()
}

/// Who waits for a barrier.
pub enum Waiter {
    /// openraft, for an append.
    Append(LogFlushed<TypeConfig>),
    /// The store itself, for a truncate or a purge.
    Store(oneshot::Sender<Result<(), String>>),
    /// Nobody: the append was acknowledged already (an injected defect).
    Nobody,
}

/// A request for a barrier covering every write made before it was sent.
pub struct SyncRequest {
    waiter: Waiter,
}

/// One member's log store over its disk.
#[derive(Clone)]
pub struct SimLogStore {
    world: WorldRef,
    id: NodeId,
    /// The disk epoch this store was opened at.
    epoch: u64,
    log: SimLog,
    /// The committed log id: recovered at open, then as openraft saves it.
    committed: Option<LogId<NodeId>>,
    syncs: mpsc::UnboundedSender<SyncRequest>,
}

impl SimLogStore {
    /// A store over member `id`'s disk as it is now (its log opened and
    /// recovered), and the receiving end of its sync queue for
    /// [`sync_worker`].
    pub fn open(
        world: WorldRef,
        id: NodeId,
    ) -> Result<(Self, mpsc::UnboundedReceiver<SyncRequest>), String> {
        let (fs, epoch, purged) = world.with(|w| {
            let m = w.nodes.get(&id).ok_or("no such member")?;
            Ok::<_, String>((m.disk.fs(), m.disk.epoch(), m.disk.purged))
        })?;
        let (log, opened) = open_log(fs, purged)?;
        // The committed id written last, if the log still holds it (a torn
        // tail cut at open may have taken the entry it names: then the
        // purge pointer, committed by definition), as the real store does.
        let committed = match opened.committed {
            None => None,
            Some(bytes) => serde_json::from_slice::<Option<LogId<NodeId>>>(&bytes)
                .map_err(|e| format!("the log's committed log id does not decode: {e}"))?,
        };
        let committed = committed
            .filter(|c| log.contains(c) || purged.is_some_and(|p| c.index <= p.index))
            .or(purged);
        let (syncs, rx) = mpsc::unbounded_channel();
        Ok((
            SimLogStore {
                world,
                id,
                epoch,
                log,
                committed,
                syncs,
            },
            rx,
        ))
    }

    /// Runs `f` on this member's disk, unless a crash made this store stale.
    fn disk<R>(
        &self,
        f: impl FnOnce(&mut crate::disk::Disk) -> R,
    ) -> Result<R, StorageError<NodeId>> {
        self.world.with(|w| match w.nodes.get_mut(&self.id) {
            Some(m) if m.disk.epoch() == self.epoch => Ok(f(&mut m.disk)),
            _ => Err(stale()),
        })
    }

    /// The log, for the sync worker.
    pub fn log(&self) -> SimLog {
        self.log.clone()
    }

    /// Fails unless this store's incarnation still runs (no crash since it
    /// opened): the log itself fails too, but only once it touches a file.
    fn live(&self) -> Result<(), StorageError<NodeId>> {
        self.disk(|_| ())
    }

    /// Waits for a barrier covering every write made so far.
    async fn barrier(&self) -> Result<(), StorageError<NodeId>> {
        let (done, wait) = oneshot::channel();
        self.syncs
            .send(SyncRequest {
                waiter: Waiter::Store(done),
            })
            .map_err(|_| stale())?;
        match wait.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(log_write_error(e)),
            Err(_) => Err(stale()),
        }
    }

    /// How long a sync takes now: a seeded base latency plus the member's
    /// slow-disk delay.
    fn sync_latency(world: &WorldRef, id: NodeId) -> Duration {
        world.with(|w| {
            let slow = w.nodes.get(&id).map_or(0, |m| m.slow_sync_ms);
            Duration::from_micros(w.rng.range(500, 8_000) + slow * 1_000)
        })
    }
}

/// The member's sync worker: takes sync requests in order, waits the sync
/// latency, runs one barrier of the real log for everything queued, then
/// tells the waiters.
pub async fn sync_worker(
    world: WorldRef,
    id: NodeId,
    epoch: u64,
    log: SimLog,
    mut requests: mpsc::UnboundedReceiver<SyncRequest>,
) {
    while let Some(first) = requests.recv().await {
        tokio::time::sleep(SimLogStore::sync_latency(&world, id)).await;
        world.wait_unpaused(&[id]).await;
        let mut batch = vec![first];
        while let Ok(more) = requests.try_recv() {
            batch.push(more);
        }
        let synced = world.with(|w| match w.nodes.get_mut(&id) {
            Some(m) if m.disk.epoch() == epoch => {
                // A failed sync is not an acknowledged write: nothing of
                // the batch becomes durable, and (as raftlock-storage's
                // worker) every later sync fails too, since the kernel may
                // have dropped the dirty pages.
                if m.sync_failed.is_none() {
                    m.sync_failed = m.sync_error;
                }
                if let Some(error) = m.sync_failed {
                    w.failed_syncs += 1;
                    Some(Err(format!("sync failed: {error}")))
                } else {
                    // Every write of the batch was made before its request
                    // was sent, so before this barrier begins.
                    Some(barrier(&log))
                }
            }
            _ => None,
        });
        let Some(synced) = synced else {
            return;
        };
        for request in batch {
            match request.waiter {
                Waiter::Append(ack) => {
                    ack.log_io_completed(synced.clone().map_err(|e| io_error(&e)))
                }
                Waiter::Store(done) => {
                    let _ = done.send(synced.clone());
                }
                Waiter::Nobody => {}
            }
        }
    }
}

impl RaftLogReader<TypeConfig> for SimLogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, StorageError<NodeId>> {
        self.live()?;
        self.log.range(range).map_err(log_read_error)
    }
}

impl RaftLogStorage<TypeConfig> for SimLogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<NodeId>> {
        let purged = self.disk(|d| d.purged)?;
        Ok(LogState {
            last_purged_log_id: purged,
            last_log_id: self.log.last_log_id().or(purged),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        // Durable on return: the sync happens before the vote is stored.
        tokio::time::sleep(Self::sync_latency(&self.world, self.id)).await;
        let id = self.id;
        // A failed vote sync stops openraft as a failed log sync does: the
        // member is out until it restarts.
        let error = self.world.with(|w| {
            let m = w.nodes.get_mut(&id)?;
            if m.disk.epoch() != self.epoch {
                return None;
            }
            let error = m.sync_failed.or(m.sync_error)?;
            m.sync_failed = Some(error);
            Some(error)
        });
        if let Some(error) = error {
            return Err(
                StorageIOError::write_vote(&io_error(&format!("sync failed: {error}"))).into(),
            );
        }
        self.disk(|d| d.vote = Some(*vote))
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        // openraft reads the vote only at start-up: this is the vote found
        // at open, which raftlock-storage reads back uncommitted.
        let restore = self.world.with(|w| w.restore_leadership);
        let vote = self.disk(|d| d.vote)?;
        Ok(vote.map(|vote| {
            if restore {
                vote
            } else {
                Vote {
                    committed: false,
                    ..vote
                }
            }
        }))
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogId<NodeId>>,
    ) -> Result<(), StorageError<NodeId>> {
        self.live()?;
        let bytes = serde_json::to_vec(&committed).map_err(log_write_error)?;
        self.log.set_committed(bytes);
        self.committed = committed;
        // Synced: a restarted member never applies less than it had
        // acknowledged. With the next mark (raftlock-storage's way), a
        // member restored as leader can answer a read index below an entry
        // it acknowledged: see docs/testing.md.
        if self.world.with(|w| w.committed_synced) {
            // The mark is written at once; the barrier makes it durable.
            self.log.close(false).map_err(log_write_error)?;
            barrier(&self.log).map_err(log_write_error)?;
        }
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<NodeId>>, StorageError<NodeId>> {
        self.live()?;
        Ok(self.committed)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        self.live()?;
        self.log.append(entries).map_err(log_write_error)?;
        // The defect acknowledges what is only in the page cache: a power
        // loss then forgets entries the leader counted as replicated.
        // The follower-only defect does the same on a member that does not
        // lead: the leader's own log stays honest.
        let follower = cfg!(feature = "inject-follower-ack-before-sync")
            && self.world.with(|w| {
                w.raft(self.id)
                    .is_some_and(|r| r.metrics().borrow().state != openraft::ServerState::Leader)
            });
        let waiter = if cfg!(feature = "inject-ack-before-sync") || follower {
            callback.log_io_completed(Ok(()));
            Waiter::Nobody
        } else {
            Waiter::Append(callback)
        };
        self.syncs.send(SyncRequest { waiter }).map_err(|_| stale())
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        self.live()?;
        // Durable before returning, as the real store: openraft may next
        // append entries with the same indexes and must never see the old
        // ones come back.
        self.log
            .remove_from(log_id.index)
            .map_err(log_write_error)?;
        self.barrier().await
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        // The pointer is durable at once (as the vote); the segments it
        // lets go are deleted after the next barrier.
        self.disk(|d| d.purged = d.purged.max(Some(log_id)))?;
        self.log.remove_upto(log_id.index);
        self.barrier().await
    }
}

/// One member's state machine.
#[derive(Clone)]
pub struct SimStateMachine {
    world: WorldRef,
    id: NodeId,
    epoch: u64,
}

impl SimStateMachine {
    /// The state machine of member `id`, for its disk's current epoch.
    pub fn new(world: WorldRef, id: NodeId) -> Self {
        let epoch = world.with(|w| w.nodes.get(&id).map_or(0, |m| m.disk.epoch()));
        SimStateMachine { world, id, epoch }
    }

    fn member<R>(
        &self,
        f: impl FnOnce(&mut crate::world::World) -> Result<R, StorageError<NodeId>>,
    ) -> Result<R, StorageError<NodeId>> {
        self.world.with(|w| {
            if w.nodes.get(&self.id).map(|m| m.disk.epoch()) != Some(self.epoch) {
                return Err(stale());
            }
            f(w)
        })
    }
}

/// The first 64 bits of the SHA-256 of an entry's payload.
fn digest(payload: &EntryPayload<TypeConfig>) -> u64 {
    use sha2::{Digest, Sha256};
    let bytes = serde_json::to_vec(payload).unwrap_or_default();
    let hash = Sha256::digest(&bytes);
    hash.iter()
        .take(8)
        .fold(0, |acc, b| (acc << 8) | u64::from(*b))
}

fn sm_error(e: impl std::fmt::Display) -> StorageError<NodeId> {
    StorageIOError::write_state_machine(&io_error(&e.to_string())).into()
}

impl RaftSnapshotBuilder<TypeConfig> for SimStateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        let id = self.id;
        self.member(|w| {
            let Some(m) = w.nodes.get_mut(&id) else {
                return Err(stale());
            };
            let bytes = m.sm.state.to_snapshot().map_err(sm_error)?;
            m.sm.snapshots += 1;
            let meta = SnapshotMeta {
                last_log_id: m.sm.last_applied,
                last_membership: m.sm.membership.clone(),
                snapshot_id: format!(
                    "{}-{}-{}",
                    m.sm.last_applied.map_or(0, |l| l.index),
                    m.incarnation,
                    m.sm.snapshots
                ),
            };
            m.disk.snapshot = Some((meta.clone(), bytes.clone()));
            Ok(Snapshot {
                meta,
                snapshot: Box::new(Cursor::new(bytes)),
            })
        })
    }
}

impl RaftStateMachine<TypeConfig> for SimStateMachine {
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, StoredMembership<NodeId, RaftMember>), StorageError<NodeId>>
    {
        let id = self.id;
        self.member(|w| {
            let m = w.nodes.get(&id).ok_or_else(stale)?;
            Ok((m.sm.last_applied, m.sm.membership.clone()))
        })
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Reply>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let id = self.id;
        self.member(|w| {
            let mut replies = Vec::new();
            for entry in entries {
                if let Some(v) = w.oracle.on_apply(id, entry.log_id, digest(&entry.payload)) {
                    w.violation(v);
                }
                let m = w.nodes.get_mut(&id).ok_or_else(stale)?;
                m.sm.last_applied = Some(entry.log_id);
                let mut expired = Vec::new();
                replies.push(match entry.payload {
                    EntryPayload::Blank => Reply::default(),
                    EntryPayload::Membership(membership) => {
                        m.sm.membership = StoredMembership::new(Some(entry.log_id), membership);
                        Reply::default()
                    }
                    EntryPayload::Normal(Proposal(commands)) => {
                        let mut applied = Vec::with_capacity(commands.len());
                        for c in &commands {
                            let a = m.sm.state.apply(c);
                            if let Some(tracker) = &m.tracker {
                                crate::sessions::publish(tracker, c, &a);
                            }
                            if let (Command::ExpireSession { id }, Ok(_)) = (c, &a.result) {
                                expired.push(*id);
                            }
                            applied.push(a);
                        }
                        Reply(applied)
                    }
                });
                let now = w.now_ns();
                for session in expired {
                    if let Some(v) = w.sessions.on_expired(session, now) {
                        w.violation(v);
                    }
                }
            }
            let applied = w.nodes.get(&id).and_then(|m| m.sm.last_applied);
            if let Some(applied) = applied {
                w.applied(id, applied.index);
            }
            Ok(replies)
        })
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<NodeId>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, RaftMember>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<NodeId>> {
        let id = self.id;
        let bytes = snapshot.into_inner();
        let state = StateMachine::from_snapshot(&bytes).map_err(sm_error)?;
        self.member(|w| {
            let m = w.nodes.get_mut(&id).ok_or_else(stale)?;
            m.sm.state = state;
            if let Some(tracker) = &m.tracker {
                crate::sessions::on_loaded(tracker, &m.sm.state);
            }
            m.sm.last_applied = meta.last_log_id;
            m.sm.membership = meta.last_membership.clone();
            m.disk.snapshot = Some((meta.clone(), bytes));
            if let Some(l) = meta.last_log_id {
                w.applied(id, l.index);
            }
            Ok(())
        })
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        let id = self.id;
        self.member(|w| {
            let m = w.nodes.get(&id).ok_or_else(stale)?;
            Ok(m.disk.snapshot.as_ref().map(|(meta, bytes)| Snapshot {
                meta: meta.clone(),
                snapshot: Box::new(Cursor::new(bytes.clone())),
            }))
        })
    }
}

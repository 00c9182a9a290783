//! The state of one simulated run that every part reads: the seeded
//! generator, the members' disks and Raft handles, the links, the history
//! and the invariants watched while the run goes.
//!
//! One `std::sync::Mutex` over all of it: the run is single-threaded, so the
//! lock is never contended, and it is never held across an `.await`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use raftlock_core::SessionId;
use raftlock_jepsen::history::fmt_ns;
use raftlock_jepsen::{Event, History};
use raftlock_node::simulation::{QuorumClock, SessionTracker};
use raftlock_node::{NodeId, Raft};
use tokio::time::Instant;

use crate::disk::Disk;
use crate::net::Links;
use crate::rng::SimRng;
use crate::store::SmState;

/// A handle to the world of a run; cheap to clone.
#[derive(Clone)]
pub struct WorldRef(Arc<Mutex<World>>);

impl WorldRef {
    /// Waits while any of `ids` is paused.
    pub async fn wait_unpaused(&self, ids: &[NodeId]) {
        loop {
            let resumed = {
                let mut w = self.lock();
                if !ids.iter().any(|id| w.paused.contains(id)) {
                    return;
                }
                let (tx, rx) = tokio::sync::oneshot::channel();
                w.resumed.push(tx);
                rx
            };
            if resumed.await.is_err() {
                return;
            }
        }
    }

    /// A world for `seed` and `members`, time starting now.
    pub fn new(seed: u64, members: &[NodeId]) -> Self {
        let nodes = members.iter().map(|&id| (id, Member::default())).collect();
        WorldRef(Arc::new(Mutex::new(World {
            rng: SimRng::new(seed),
            start: Instant::now(),
            nodes,
            links: Links::default(),
            history: History::new(),
            lock_history: History::new(),
            sessions: SessionOracle::default(),
            oracle: Oracle::default(),
            next_process: 0,
            stopping: false,
            faults: 0,
            failed_syncs: 0,
            committed_synced: true,
            restore_leadership: false,
            lock_clients: 0,
            paused: BTreeSet::new(),
            resumed: Vec::new(),
            applied_waiters: Vec::new(),
        })))
    }

    /// The world, locked. Never hold the guard across an `.await`.
    pub fn lock(&self) -> MutexGuard<'_, World> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the locked world.
    pub fn with<R>(&self, f: impl FnOnce(&mut World) -> R) -> R {
        f(&mut self.lock())
    }
}

/// Everything a run shares.
pub struct World {
    /// The run's only source of randomness.
    pub rng: SimRng,
    /// Simulated time zero of the run.
    pub start: Instant,
    /// Each member's disk (kept across crashes) and running instance.
    pub nodes: BTreeMap<NodeId, Member>,
    /// Which directed links are cut, and the link fault rates.
    pub links: Links,
    /// Client operations and nemesis events, in simulated time.
    pub history: History,
    /// The lock clients' operations (and the nemesis events), judged by
    /// the Jepsen harness's mutex and fencing checkers.
    pub lock_history: History,
    /// What the cluster promised each lock client's session, and when it
    /// expired them.
    pub sessions: SessionOracle,
    /// Invariants checked as the run goes.
    pub oracle: Oracle,
    /// Next client process id (a process whose op ended `info` continues
    /// under a fresh one, as Jepsen's do).
    pub next_process: u64,
    /// Set when the clients are to stop.
    pub stopping: bool,
    /// Faults injected so far.
    pub faults: u64,
    /// Log sync batches that failed (disk-error fault).
    pub failed_syncs: u64,
    /// Lock clients in the run (none: the session machinery stays off).
    pub lock_clients: usize,
    /// Whether a saved committed log id is synced at once, or only with the
    /// next log sync.
    pub committed_synced: bool,
    /// Whether a restarted member reads its vote back committed (openraft
    /// then restores it as leader of the same term at once), or, as
    /// raftlock-storage reads it, uncommitted.
    pub restore_leadership: bool,
    /// Members whose process is paused: what they send or are sent, and
    /// their syncs, wait until they resume.
    pub paused: BTreeSet<NodeId>,
    /// Who waits for paused members to resume, woken in this order. Not a
    /// `tokio::sync::watch`: its receivers wait on one of several queues
    /// picked at random by tokio, outside the seed.
    pub resumed: Vec<tokio::sync::oneshot::Sender<()>>,
    /// Reads waiting for a member to apply up to an index, woken in the
    /// order they came (openraft's own wait goes through a metrics
    /// `watch`, for the same reason as above not deterministic).
    pub applied_waiters: Vec<(NodeId, u64, tokio::sync::oneshot::Sender<()>)>,
}

impl World {
    /// Wakes the reads waiting for member `id` to apply up to `index` or less.
    pub fn applied(&mut self, id: NodeId, index: u64) {
        let (ready, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.applied_waiters)
            .into_iter()
            .partition(|(n, i, _)| *n == id && *i <= index);
        self.applied_waiters = waiting;
        for (_, _, waiter) in ready {
            let _ = waiter.send(());
        }
    }

    /// Every paused member resumes; their waiters wake in the order they
    /// came.
    pub fn resume_all(&mut self) {
        self.paused.clear();
        for waiter in self.resumed.drain(..) {
            let _ = waiter.send(());
        }
    }

    /// Nanoseconds of simulated time since the run started.
    pub fn now_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Appends a lock client's `event` at the current simulated time.
    pub fn record_lock(&mut self, event: Event) -> u64 {
        let now = self.now_ns();
        self.lock_history.push(event.at(now))
    }

    /// Appends `event` at the current simulated time.
    pub fn record(&mut self, event: Event) -> u64 {
        let now = self.now_ns();
        self.history.push(event.at(now))
    }

    /// A fresh client process id.
    pub fn new_process(&mut self) -> u64 {
        self.next_process += 1;
        self.next_process
    }

    /// The running Raft instance of `id`, if it is up.
    pub fn raft(&self, id: NodeId) -> Option<Raft> {
        self.nodes.get(&id).and_then(|m| m.raft.clone())
    }

    /// The ids of the members.
    pub fn ids(&self) -> Vec<NodeId> {
        self.nodes.keys().copied().collect()
    }

    /// After member `crashed` lost its unsynced writes: every entry some
    /// member applied (so committed) must still be durable on a majority
    /// (a snapshot covering it counts), or a committed write is lost even
    /// if no later leader has overwritten it yet. The majority is of one
    /// voter fewer than the members, as a membership fault may have
    /// demoted one.
    pub fn check_committed_durable(&mut self, crashed: NodeId) {
        let need = (self.nodes.len().saturating_sub(1)) / 2 + 1;
        // What each disk would hold after a crash now: its log reopened
        // from the durable bytes (the real recovery), its purge pointer and
        // its snapshot.
        let mut unreadable = Vec::new();
        let disks: Vec<_> = self
            .nodes
            .iter()
            .map(|(id, m)| {
                let log = m
                    .disk
                    .durable_log()
                    .map_err(|e| unreadable.push((*id, e)))
                    .ok();
                let floor = m
                    .disk
                    .snapshot
                    .as_ref()
                    .and_then(|(meta, _)| meta.last_log_id)
                    .max(m.disk.purged)
                    .map(|l| l.index);
                (log, floor)
            })
            .collect();
        for (id, e) in unreadable {
            self.violation(format!("member {id}'s durable log does not open: {e}"));
        }
        let lost = self
            .oracle
            .applied
            .iter()
            .find_map(|(index, (log_id, _, by))| {
                let held = disks
                    .iter()
                    .filter(|(log, floor)| {
                        floor.is_some_and(|f| f >= *index)
                            || log.as_ref().is_some_and(|l| l.contains(log_id))
                    })
                    .count();
                (held < need).then_some((*log_id, *by, held))
            });
        if let Some((log_id, by, held)) = lost {
            self.violation(format!(
                "lost committed write: entry {log_id} (applied by member {by}) is durable on \
                 {held} member(s), fewer than a majority, after member {crashed} crashed"
            ));
        }
    }

    /// Records a violated invariant (the run fails).
    pub fn violation(&mut self, what: String) {
        let at = self.now_ns();
        self.oracle.violations.push(format!(
            "at {}: {what}",
            raftlock_jepsen::history::fmt_ns(at)
        ));
    }
}

/// One member: its disk, which outlives a crash, and what does not.
#[derive(Default)]
pub struct Member {
    /// What the member's storage holds, durable or not yet.
    pub disk: Disk,
    /// The in-memory state machine; rebuilt from the disk on restart.
    pub sm: SmState,
    /// The running Raft instance; `None` while crashed.
    pub raft: Option<Raft>,
    /// Bumped on every start, so a crashed instance's stragglers (its
    /// replication tasks, its sync worker) can tell they are stale.
    pub incarnation: u64,
    /// Extra latency of each log sync (slow-disk fault), milliseconds.
    pub slow_sync_ms: u64,
    /// The error every log sync fails with while the disk-error fault
    /// lasts (`EIO` or `ENOSPC`).
    pub sync_error: Option<&'static str>,
    /// The error a log sync of this incarnation failed with: as
    /// `raftlock-storage`'s sync worker, every later one fails too, and
    /// the member has left the Raft group until it restarts.
    pub sync_failed: Option<&'static str>,
    /// Tasks to abort when the member crashes.
    pub tasks: Vec<tokio::task::AbortHandle>,
    /// The node's session tracker of this incarnation (in memory: a
    /// restart starts a fresh one, as a restarted node does).
    pub tracker: Option<Arc<SessionTracker>>,
    /// The node's quorum clock of this incarnation, fed by its
    /// AppendEntries answers.
    pub quorum: Option<Arc<QuorumClock>>,
    /// The same answers, per peer (vote and send instant of the latest),
    /// for the injected off-by-one quorum rule.
    pub acks: BTreeMap<NodeId, (openraft::Vote<NodeId>, Instant)>,
}

/// A session's promise as the lock clients saw it acknowledged.
#[derive(Debug, Clone, Copy)]
pub struct Promise {
    /// The client process that owns the session.
    pub pid: u64,
    /// Its TTL.
    pub ttl_ms: u64,
    /// Send time (ns) of its open or of its latest acknowledged
    /// keepalive: no member may expire it before this + TTL.
    pub renewed: u64,
}

/// Sessions of the lock clients: what each was promised, when each
/// expired. An expiry before the last acknowledged keepalive + TTL breaks
/// the promise every lock rests on.
#[derive(Default)]
pub struct SessionOracle {
    /// Per session, its promise.
    pub promised: BTreeMap<SessionId, Promise>,
    /// Per session, when its `ExpireSession` was first applied (ns).
    pub expired: BTreeMap<SessionId, u64>,
    /// Sessions expired by the cluster.
    pub expiries: u64,
    /// Keepalives acknowledged.
    pub keepalives: u64,
}

impl SessionOracle {
    fn broken(&self, id: SessionId, expired: u64) -> Option<String> {
        let p = self.promised.get(&id)?;
        let due = p.renewed.saturating_add(p.ttl_ms.saturating_mul(1_000_000));
        (expired < due).then(|| {
            format!(
                "session expiry: session {id} of process {} expired at {}, before its last \
                 acknowledged keepalive (sent at {}) + TTL {} ms = {}",
                p.pid,
                fmt_ns(expired),
                fmt_ns(p.renewed),
                p.ttl_ms,
                fmt_ns(due)
            )
        })
    }

    /// The cluster applied the expiry of `id` at `now` (first apply
    /// counts).
    pub fn on_expired(&mut self, id: SessionId, now: u64) -> Option<String> {
        if self.expired.contains_key(&id) {
            return None;
        }
        self.expired.insert(id, now);
        self.expiries += 1;
        self.broken(id, now)
    }

    /// A keepalive (or the open) of `id` sent at `sent` was acknowledged.
    pub fn on_renewed(
        &mut self,
        id: SessionId,
        pid: u64,
        ttl_ms: u64,
        sent: u64,
    ) -> Option<String> {
        let p = self.promised.entry(id).or_insert(Promise {
            pid,
            ttl_ms,
            renewed: sent,
        });
        p.renewed = p.renewed.max(sent);
        let expired = *self.expired.get(&id)?;
        self.broken(id, expired)
    }
}

/// Invariants the simulator checks while the run goes, besides the
/// history checkers at the end.
#[derive(Default)]
pub struct Oracle {
    /// The entry (log id and payload digest) first applied at each index,
    /// by any member: another one applied at the same index means a
    /// committed entry was lost. The digest matters: a leader restored
    /// after a power loss reuses its term, so a lost entry's replacement
    /// can carry the very same log id.
    pub applied: BTreeMap<u64, (openraft::LogId<NodeId>, u64, NodeId)>,
    /// The member seen leading under each leader id (openraft 0.9's
    /// default `LeaderId` is `(term, node id)`): two members under one
    /// leader id, or a leader whose vote is not its own committed vote,
    /// means split brain. Two leader ids of one term are legal: a
    /// candidate with a greater node id may win the term a smaller one
    /// won already (docs/adr/0019-deterministic-simulator.md).
    pub leaders: BTreeMap<openraft::LeaderId<NodeId>, NodeId>,
    /// Members seen leading, for the run's summary.
    pub leader_changes: BTreeSet<(u64, NodeId)>,
    /// What went wrong, with the simulated time.
    pub violations: Vec<String>,
}

impl Oracle {
    /// Member `by` applies `log_id`: the same index must carry the same
    /// entry everywhere (Raft's state machine safety).
    pub fn on_apply(
        &mut self,
        by: NodeId,
        log_id: openraft::LogId<NodeId>,
        digest: u64,
    ) -> Option<String> {
        match self.applied.get(&log_id.index) {
            Some((first, first_digest, first_by))
                if (*first, *first_digest) != (log_id, digest) =>
            {
                Some(format!(
                    "state machine safety: member {by} applied {log_id} (payload {digest:016x}) \
                     at index {}, member {first_by} applied {first} (payload {first_digest:016x}) \
                     there: a committed entry was lost",
                    log_id.index
                ))
            }
            Some(_) => None,
            None => {
                self.applied.insert(log_id.index, (log_id, digest, by));
                None
            }
        }
    }

    /// Member `id` says it leads, with `vote` its current vote: it must
    /// be its own committed vote, and no other member may have led under
    /// the same leader id.
    pub fn on_leader(&mut self, id: NodeId, vote: openraft::Vote<NodeId>) -> Option<String> {
        let leader_id = vote.leader_id;
        self.leader_changes.insert((leader_id.term, id));
        if !vote.committed || leader_id.node_id != id {
            return Some(format!(
                "election safety: member {id} leads under vote {vote}, not its own committed vote"
            ));
        }
        match self.leaders.get(&leader_id) {
            Some(&other) if other != id => Some(format!(
                "election safety: members {other} and {id} both lead under leader id {leader_id}"
            )),
            Some(_) => None,
            None => {
                self.leaders.insert(leader_id, id);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{CommittedLeaderId, LogId};

    fn log_id(term: u64, index: u64) -> LogId<NodeId> {
        LogId::new(CommittedLeaderId::new(term, 1), index)
    }

    #[test]
    fn a_different_entry_at_an_applied_index_is_a_violation() {
        let mut o = Oracle::default();
        assert!(o.on_apply(1, log_id(1, 5), 9).is_none());
        assert!(o.on_apply(2, log_id(1, 5), 9).is_none());
        assert!(o.on_apply(3, log_id(2, 5), 9).is_some());
        // Same log id, another payload: lost and written again.
        assert!(o.on_apply(3, log_id(1, 5), 8).is_some());
    }

    fn vote(term: u64, node: NodeId, committed: bool) -> openraft::Vote<NodeId> {
        if committed {
            openraft::Vote::new_committed(term, node)
        } else {
            openraft::Vote::new(term, node)
        }
    }

    #[test]
    fn two_leader_ids_in_one_term_are_legal() {
        // openraft 0.9's default leader ids: (term, node id). Member 3's
        // vote (4, 3) is greater than (4, 1), so a quorum may grant it
        // after it granted member 1's in the same term.
        let mut o = Oracle::default();
        assert!(o.on_leader(1, vote(4, 1, true)).is_none());
        assert!(o.on_leader(3, vote(4, 3, true)).is_none());
        assert!(o.on_leader(1, vote(4, 1, true)).is_none());
        assert_eq!(o.leaders.len(), 2);
    }

    #[test]
    fn a_double_claim_of_one_leader_id_is_a_violation() {
        let mut o = Oracle::default();
        assert!(o.on_leader(1, vote(4, 1, true)).is_none());
        // Member 3 leads under member 1's leader id: split brain.
        assert!(o.on_leader(3, vote(4, 1, true)).is_some());
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn a_committed_entry_on_fewer_than_a_majority_of_disks_is_a_violation() {
        let world = WorldRef::new(0, &[1, 2, 3]);
        world.with(|w| {
            let entry = openraft::Entry {
                log_id: log_id(1, 5),
                payload: openraft::EntryPayload::<raftlock_node::TypeConfig>::Blank,
            };
            w.oracle.applied.insert(5, (log_id(1, 5), 0, 1));
            let log = |w: &mut World, id| {
                let disk = &w.nodes.get(&id).unwrap().disk;
                crate::disk::open_log(disk.fs(), disk.purged).unwrap().0
            };
            let on_1 = log(w, 1);
            on_1.append([entry.clone()]).unwrap();
            crate::disk::barrier(&on_1).unwrap();
            w.check_committed_durable(2);
            assert_eq!(w.oracle.violations.len(), 1, "on one disk of three");
            // Written on a second disk, but not synced: still lost.
            let on_2 = log(w, 2);
            on_2.append([entry]).unwrap();
            w.check_committed_durable(3);
            assert_eq!(w.oracle.violations.len(), 2);
            crate::disk::barrier(&on_2).unwrap();
            w.check_committed_durable(3);
            assert_eq!(w.oracle.violations.len(), 2, "on two disks of three");
        });
    }

    #[test]
    fn an_expiry_before_the_last_acknowledged_keepalive_plus_ttl_is_a_violation() {
        let mut o = SessionOracle::default();
        let (a, b, c) = (SessionId(1), SessionId(2), SessionId(3));
        // Opened at 0, renewed by a keepalive sent at 600 ms: TTL 1 s.
        assert!(o.on_renewed(a, 1, 1_000, 0).is_none());
        assert!(o.on_renewed(a, 1, 1_000, 600 * MS).is_none());
        assert!(o.on_expired(a, 1_599 * MS).is_some(), "1 ms early");
        assert!(o.on_renewed(b, 2, 1_000, 600 * MS).is_none());
        assert!(o.on_expired(b, 1_600 * MS).is_none(), "on time");
        // An older keepalive acknowledged late never moves it back.
        assert!(o.on_renewed(b, 2, 1_000, 100 * MS).is_none());
        // Acknowledged after its expiry, a keepalive promises what the
        // cluster no longer keeps.
        assert!(o.on_renewed(c, 3, 1_000, 0).is_none());
        assert!(o.on_expired(c, 1_000 * MS).is_none());
        assert!(o.on_renewed(c, 3, 1_000, 500 * MS).is_some());
        assert_eq!(o.expiries, 3);
    }

    #[test]
    fn a_leader_without_its_own_committed_vote_is_a_violation() {
        let mut o = Oracle::default();
        assert!(o.on_leader(2, vote(4, 1, true)).is_some());
        assert!(o.on_leader(2, vote(4, 2, false)).is_some());
        assert!(o.on_leader(2, vote(4, 2, true)).is_none());
    }
}

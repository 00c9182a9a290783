//! The leader's session tracker: keepalives live here, in memory, never in
//! the log. One task sleeps until the next deadline (mini-redis's expiry
//! shape) and proposes `ExpireSession` through Raft when it passes.
//!
//! ## Deadlines across leader changes
//!
//! A new leader cannot know the old leader's keepalives, so it must not
//! expire a session earlier than `last keepalive + ttl`. Restarting every
//! deadline at `now + ttl` satisfies that but lets repeated elections keep
//! a dead client's session alive forever (etcd#9888). raftlock bounds it
//! with lease checkpoints:
//!
//! - On election, the leader commits `CheckpointSessions` with the full TTL
//!   for every session that has no checkpoint. Every replica notes, on its
//!   own monotonic clock, when it applied each checkpoint.
//! - A keepalive for a checkpointed session first commits `RenewSessions`
//!   (clearing it), then is acknowledged. Healthy sessions therefore cost
//!   one log entry per leader change, not one per keepalive.
//! - A later leader sets a checkpointed session's deadline to
//!   `applied_at + remaining` (not `now + ttl`), which is no earlier than
//!   the client was promised (no keepalive was acknowledged since), and
//!   does not move with further elections.
//!
//! Bound: a session whose client stops at time k expires by
//! `max(k, e) + ttl` plus the time to commit the expiry, where e is the
//! first leader election after k that committed its checkpoint — with
//! leaders changing every few seconds, ttl plus about one leader term.
//!
//! The bound assumes the member that takes over did not restart since it
//! applied the checkpoint. A restarted replica re-applies checkpoints from
//! its snapshot or log and notes them at its restart time: it cannot know
//! when it first applied them without a wall clock, and an earlier guess
//! could expire a session before the time its client was promised. So
//! raftlock errs long: each restart of a member that then leads can add
//! up to one TTL (plus the restart's duration) to a dead session's life.
//! Never shorter, which is the direction that matters for locks.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use raftlock_core::{HeldOff, SessionId, SessionLease};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::sessions::hold_offs::HoldOffs;

/// The clock deadlines are measured on. A seam for simulated time.
pub trait Clock: Send + Sync + 'static {
    /// The current instant.
    fn now(&self) -> Instant;
}

/// tokio's monotonic clock (pausable in tests).
pub struct TokioClock;

impl Clock for TokioClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

#[derive(Default)]
struct Deadlines {
    /// True while this node leads and has set every deadline.
    leading: bool,
    /// Next deadline first.
    queue: BTreeSet<(Instant, SessionId)>,
    /// Every live session while leading (a session without an entry here
    /// is gone or being expired, and is never renewed).
    by_session: HashMap<SessionId, Instant>,
    /// Sessions whose expiry this leader proposed and has not seen applied.
    /// A keepalive for one of them is refused: acknowledging it would
    /// promise the client a TTL that the expiry in flight is about to
    /// break.
    expiring: HashSet<SessionId>,
    /// When this replica applied each session's current checkpoint (on
    /// every node, leader or not).
    checkpoint_applied: HashMap<SessionId, Instant>,
    /// Lock-delays: when each held-off lock is handed on (`hold_offs`).
    hold_offs: HoldOffs,
}

impl Deadlines {
    fn set(&mut self, id: SessionId, deadline: Instant) {
        if let Some(old) = self.by_session.insert(id, deadline) {
            self.queue.remove(&(old, id));
        }
        self.queue.insert((deadline, id));
    }

    fn forget(&mut self, id: SessionId) {
        if let Some(old) = self.by_session.remove(&id) {
            self.queue.remove(&(old, id));
        }
        self.expiring.remove(&id);
        self.checkpoint_applied.remove(&id);
    }

    /// After removals: memory only, never what is tracked.
    fn shrink_if_sparse(&mut self) {
        shrink_if_sparse(&mut self.by_session);
        shrink_if_sparse(&mut self.checkpoint_applied);
    }
}

/// Gives a mostly empty map's memory back. A `HashMap` keeps its capacity
/// through removals, so without this a former leader would keep a table
/// sized for every session, and every replica one sized for every session
/// checkpointed at the last election (keepalives clear those soon after).
/// Shrinking only below a quarter keeps it amortized O(1) per removal.
fn shrink_if_sparse<K: Eq + Hash, V>(map: &mut HashMap<K, V>) {
    if map.capacity() > 64 && map.len() < map.capacity() / 4 {
        map.shrink_to(map.len() * 2);
    }
}

/// Why the tracker refused a keepalive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeepaliveRefused {
    /// This node does not lead (or has not taken over deadlines yet).
    NotLeading,
    /// The session ended, or its expiry is in flight.
    Ending,
}

/// Shared between the apply loop, the keepalive path and the expiry task.
pub struct SessionTracker {
    deadlines: Mutex<Deadlines>,
    /// Wakes the expiry task when a nearer deadline appears or leadership
    /// changes.
    changed: Notify,
    clock: Box<dyn Clock>,
}

impl SessionTracker {
    /// An empty tracker measuring deadlines on `clock`.
    pub fn new(clock: Box<dyn Clock>) -> Self {
        SessionTracker {
            deadlines: Mutex::default(),
            changed: Notify::new(),
            clock,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Deadlines> {
        self.deadlines.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The tracker's clock's current instant.
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    /// Apply hook: a session was opened.
    pub fn on_opened(&self, id: SessionId, ttl_ms: u64) {
        let now = self.now();
        let mut d = self.lock();
        if d.leading && !d.by_session.contains_key(&id) {
            d.set(id, now + Duration::from_millis(ttl_ms));
            drop(d);
            self.changed.notify_one();
        }
    }

    /// Apply hook: checkpoints were recorded for these sessions.
    pub fn on_checkpointed(&self, ids: impl IntoIterator<Item = SessionId>) {
        let now = self.now();
        let mut d = self.lock();
        for id in ids {
            d.checkpoint_applied.insert(id, now);
        }
    }

    /// Apply hook: checkpoints were cleared.
    pub fn on_renewed(&self, ids: impl IntoIterator<Item = SessionId>) {
        let mut d = self.lock();
        for id in ids {
            d.checkpoint_applied.remove(&id);
        }
        d.shrink_if_sparse();
    }

    /// Apply hook: sessions closed or expired.
    pub fn on_ended(&self, ids: impl IntoIterator<Item = SessionId>) {
        let mut d = self.lock();
        for id in ids {
            d.forget(id);
        }
        d.shrink_if_sparse();
    }

    /// This node became leader and has applied everything committed.
    /// Sets every deadline and returns the sessions to checkpoint.
    pub fn become_leader(
        &self,
        leases: impl Iterator<Item = SessionLease>,
    ) -> Vec<(SessionId, u64)> {
        let now = self.now();
        let mut d = self.lock();
        d.queue.clear();
        d.by_session.clear();
        d.expiring.clear();
        let mut to_checkpoint = Vec::new();
        for lease in leases {
            let deadline = match lease.checkpoint_remaining_ms {
                Some(remaining) => {
                    let applied = d.checkpoint_applied.get(&lease.id).copied().unwrap_or(now);
                    applied + Duration::from_millis(remaining)
                }
                None => {
                    to_checkpoint.push((lease.id, lease.ttl_ms));
                    now + Duration::from_millis(lease.ttl_ms)
                }
            };
            d.set(lease.id, deadline);
        }
        // `clear()` above kept the capacity of the last term's table.
        d.shrink_if_sparse();
        d.leading = true;
        drop(d);
        self.changed.notify_one();
        to_checkpoint
    }

    /// Apply hook: locks were held off by their holder's session end.
    pub fn on_held_off(&self, held: &[HeldOff]) {
        if held.is_empty() {
            return;
        }
        let now = self.now();
        let mut d = self.lock();
        let leading = d.leading;
        d.hold_offs.on_held_off(held, now, leading);
        drop(d);
        if leading {
            self.changed.notify_one();
        }
    }

    /// Apply hook: nodes without an owner were deleted (a held-off one's
    /// delay is over).
    pub fn on_unowned_deleted<'a>(&self, paths: impl Iterator<Item = &'a str>) {
        self.lock().hold_offs.on_deleted(paths);
    }

    /// The state was loaded or replaced by a snapshot and holds exactly
    /// these hold-offs.
    pub fn resync_hold_offs(&self, held: &[HeldOff]) {
        let now = self.now();
        self.lock().hold_offs.resync(held, now);
    }

    /// Right after `become_leader`, under the same read of the state:
    /// time every hold-off the state has.
    pub fn take_over_hold_offs(&self, held: &[HeldOff]) {
        let now = self.now();
        let mut d = self.lock();
        if !d.leading {
            return;
        }
        d.hold_offs.become_leader(held, now);
        drop(d);
        self.changed.notify_one();
    }

    /// Held-off locks whose delay is over (the caller proposes their
    /// end), and the next end after them. Leader only.
    pub fn take_due_hold_offs(&self) -> (Vec<String>, Option<Instant>) {
        let now = self.now();
        let mut d = self.lock();
        if !d.leading {
            return (Vec::new(), None);
        }
        d.hold_offs.take_due(now)
    }

    /// Ending these hold-offs failed: try again after `pause`, while
    /// this node leads.
    pub fn retry_hold_offs(&self, nodes: &[String], pause: Duration) {
        let at = self.now() + pause;
        let mut d = self.lock();
        if !d.leading {
            return;
        }
        d.hold_offs.retry(nodes, at);
        drop(d);
        self.changed.notify_one();
    }

    /// Hold-offs being timed (leader only).
    pub fn hold_offs_scheduled(&self) -> usize {
        self.lock().hold_offs.scheduled()
    }

    /// Leadership lost: deadlines belong to the next leader now.
    pub fn step_down(&self) {
        let mut d = self.lock();
        d.leading = false;
        d.hold_offs.step_down();
        d.queue.clear();
        // Not `clear()`, which would keep the table's capacity.
        d.by_session = HashMap::new();
        d.expiring = HashSet::new();
        drop(d);
        self.changed.notify_one();
    }

    /// Whether deadlines are being enforced (this node leads).
    pub fn is_leading(&self) -> bool {
        self.lock().leading
    }

    /// A keepalive at the leader: the full TTL again, from now. Refused
    /// (nothing changes) unless this node leads and the session is live
    /// here: not ended, and no expiry of it in flight.
    pub fn keepalive(&self, id: SessionId, ttl_ms: u64) -> Result<(), KeepaliveRefused> {
        let now = self.now();
        let mut d = self.lock();
        if !d.leading {
            return Err(KeepaliveRefused::NotLeading);
        }
        if !d.by_session.contains_key(&id) {
            return Err(KeepaliveRefused::Ending);
        }
        d.set(id, now + Duration::from_millis(ttl_ms));
        Ok(())
    }

    /// Sessions past their deadline (removed from the queue: the caller
    /// proposes their expiry), and the next deadline after them.
    pub fn take_due(&self) -> (Vec<SessionId>, Option<Instant>) {
        let now = self.now();
        let mut d = self.lock();
        if !d.leading {
            return (Vec::new(), None);
        }
        let mut due = Vec::new();
        let mut next = None;
        while let Some(&(deadline, id)) = d.queue.first() {
            if deadline > now {
                next = Some(deadline);
                break;
            }
            d.queue.pop_first();
            // A live session's deadline, or a failed expiry's retry; an
            // entry of neither is a retry whose session ended meanwhile.
            if d.by_session.remove(&id).is_some() || d.expiring.contains(&id) {
                d.expiring.insert(id);
                due.push(id);
            }
        }
        if !due.is_empty() {
            d.shrink_if_sparse();
        }
        (due, next)
    }

    /// An expiry proposal failed (no quorum, or no answer in time): try
    /// again after `pause`, while this node still leads. Sessions whose
    /// end was applied meanwhile are not retried.
    pub fn retry_expiry(&self, ids: &[SessionId], pause: Duration) {
        let at = self.now() + pause;
        let mut d = self.lock();
        if !d.leading {
            return;
        }
        for id in ids {
            // Still in `expiring` (so still refused for keepalives: the
            // expiry stays decided) unless its end was applied meanwhile.
            if d.expiring.contains(id) {
                d.queue.insert((at, *id));
            }
        }
        drop(d);
        self.changed.notify_one();
    }

    /// Completes when deadlines or leadership changed.
    pub async fn changed(&self) {
        self.changed.notified().await;
    }

    /// Sessions with a live deadline (leader only).
    pub fn tracked(&self) -> usize {
        self.lock().by_session.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(id: u128, ttl_ms: u64, checkpoint: Option<u64>) -> SessionLease {
        SessionLease {
            id: SessionId(id),
            ttl_ms,
            checkpoint_remaining_ms: checkpoint,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_checkpoint_keeps_counting_down_across_elections() {
        let tracker = SessionTracker::new(Box::new(TokioClock));
        // Applied the checkpoint (1 s remaining), then 3 s of elections.
        tracker.on_checkpointed([SessionId(1)]);
        tokio::time::advance(Duration::from_secs(3)).await;
        let to_checkpoint = tracker
            .become_leader([lease(1, 1_000, Some(1_000)), lease(2, 1_000, None)].into_iter());
        assert_eq!(
            to_checkpoint,
            vec![(SessionId(2), 1_000)],
            "only unchecked sessions"
        );
        let (due, next) = tracker.take_due();
        assert_eq!(due, vec![SessionId(1)], "expired at once, not restarted");
        assert!(next.is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn keepalives_push_the_deadline_and_followers_track_nothing() {
        let tracker = SessionTracker::new(Box::new(TokioClock));
        tracker.on_opened(SessionId(1), 1_000);
        assert_eq!(tracker.tracked(), 0, "a follower keeps no deadlines");
        tracker.become_leader([lease(1, 1_000, None)].into_iter());
        tokio::time::advance(Duration::from_millis(900)).await;
        assert_eq!(tracker.keepalive(SessionId(1), 1_000), Ok(()));
        tokio::time::advance(Duration::from_millis(900)).await;
        assert!(tracker.take_due().0.is_empty());
        tokio::time::advance(Duration::from_millis(200)).await;
        assert_eq!(tracker.take_due().0, vec![SessionId(1)]);
        tracker.step_down();
        assert!(!tracker.is_leading());
    }

    #[tokio::test(start_paused = true)]
    async fn emptied_tables_give_their_memory_back() {
        let tracker = SessionTracker::new(Box::new(TokioClock));
        let ids = (0..10_000u128).map(SessionId);
        tracker.on_checkpointed(ids.clone());
        tracker.become_leader(ids.clone().map(|id| lease(id.0, 1_000, Some(1_000))));
        assert_eq!(tracker.tracked(), 10_000);
        // Keepalives after the election clear all but one checkpoint.
        tracker.on_renewed(ids.clone().skip(1));
        tracker.step_down();
        let d = tracker.lock();
        assert!(d.by_session.capacity() == 0 && d.queue.is_empty());
        assert_eq!(d.checkpoint_applied.len(), 1, "the rest is kept");
        assert!(d.checkpoint_applied.capacity() <= 64, "shrunk");
    }

    #[tokio::test(start_paused = true)]
    async fn a_session_being_expired_is_never_renewed() {
        let tracker = SessionTracker::new(Box::new(TokioClock));
        assert_eq!(
            tracker.keepalive(SessionId(1), 1_000),
            Err(KeepaliveRefused::NotLeading)
        );
        tracker.become_leader([lease(1, 1_000, None)].into_iter());
        tokio::time::advance(Duration::from_millis(1_001)).await;
        assert_eq!(tracker.take_due().0, vec![SessionId(1)]);
        // The expiry is proposed, not yet applied: a keepalive now must not
        // be acknowledged, or the client would count on a TTL the expiry is
        // about to end.
        assert_eq!(
            tracker.keepalive(SessionId(1), 1_000),
            Err(KeepaliveRefused::Ending)
        );
        // The proposal failed: retried later, and still refused meanwhile.
        tracker.retry_expiry(&[SessionId(1)], Duration::from_millis(100));
        assert_eq!(
            tracker.keepalive(SessionId(1), 1_000),
            Err(KeepaliveRefused::Ending)
        );
        assert!(tracker.take_due().0.is_empty(), "not before the pause");
        tokio::time::advance(Duration::from_millis(100)).await;
        assert_eq!(tracker.take_due().0, vec![SessionId(1)], "retried");
        // Applied: gone for good, and a retry of it is dropped.
        tracker.on_ended([SessionId(1)]);
        tracker.retry_expiry(&[SessionId(1)], Duration::ZERO);
        assert!(tracker.take_due().0.is_empty());
        assert_eq!(
            tracker.keepalive(SessionId(1), 1_000),
            Err(KeepaliveRefused::Ending)
        );
    }
}

//! Lock-delay timing (docs/design.md, "Lock-delay"): when a lock's holder
//! loses its session, the core holds the lock off (`raftlock_core`'s
//! `lock_delay.rs`) and the leader ends the hold-off after the lock's
//! delay by proposing `EndLockDelays`. Time lives here, as session
//! deadlines do in `tracker`.
//!
//! Every replica notes, on its own monotonic clock, when it applied each
//! hold-off. A new leader ends each at `applied_at + delay`: the member
//! applied the session's end no earlier than it committed, so the lock is
//! never handed on sooner than the delay after the old leader applied it,
//! and later only by how far this member lagged. A replica that restarted
//! (or installed a snapshot) since cannot know when it first applied a
//! hold-off and notes it at that time instead: it errs long, by at most
//! one delay plus the restart, as checkpointed session deadlines do.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use raftlock_core::HeldOff;
use tokio::time::Instant;

/// The hold-offs one replica knows of.
#[derive(Default)]
pub(crate) struct HoldOffs {
    /// When this replica applied (or, after a restart, first saw) each
    /// held-off node.
    applied: HashMap<String, Instant>,
    /// Leader only: when each hold-off ends, next first.
    queue: BTreeSet<(Instant, String)>,
    /// Leader only: each scheduled node's entry in `queue`.
    by_node: HashMap<String, Instant>,
}

impl HoldOffs {
    /// Apply hook: these nodes were held off now. A leader schedules each.
    pub fn on_held_off(&mut self, held: &[HeldOff], now: Instant, leading: bool) {
        for h in held {
            let applied = *self.applied.entry(h.node.clone()).or_insert(now);
            if leading && !self.by_node.contains_key(&h.node) {
                self.schedule(&h.node, applied + Duration::from_millis(h.delay_ms));
            }
        }
    }

    /// Apply hook: nodes were deleted; a held-off one is over.
    pub fn on_deleted<'a>(&mut self, paths: impl Iterator<Item = &'a str>) {
        if self.applied.is_empty() && self.by_node.is_empty() {
            return;
        }
        for path in paths {
            self.applied.remove(path);
            if let Some(at) = self.by_node.remove(path) {
                self.queue.remove(&(at, path.to_string()));
            }
        }
    }

    /// The state now has exactly these hold-offs (at start, or after a
    /// snapshot replaced it): note the new ones as applied now, forget
    /// the rest.
    pub fn resync(&mut self, held: &[HeldOff], now: Instant) {
        let mut applied = HashMap::with_capacity(held.len());
        for h in held {
            let at = self.applied.get(&h.node).copied().unwrap_or(now);
            applied.insert(h.node.clone(), at);
        }
        self.applied = applied;
    }

    /// This replica leads: schedule every hold-off of the state.
    pub fn become_leader(&mut self, held: &[HeldOff], now: Instant) {
        self.step_down();
        for h in held {
            let applied = *self.applied.entry(h.node.clone()).or_insert(now);
            self.schedule(&h.node, applied + Duration::from_millis(h.delay_ms));
        }
    }

    /// Leadership lost: the next leader times the hold-offs.
    pub fn step_down(&mut self) {
        self.queue.clear();
        self.by_node = HashMap::new();
    }

    /// Hold-offs whose delay is over (the caller proposes their end; a
    /// failed proposal is `retry`d), and the next end after them.
    pub fn take_due(&mut self, now: Instant) -> (Vec<String>, Option<Instant>) {
        let mut due = Vec::new();
        while let Some((at, _)) = self.queue.first() {
            if *at > now {
                return (due, Some(*at));
            }
            if let Some((_, node)) = self.queue.pop_first() {
                self.by_node.remove(&node);
                due.push(node);
            }
        }
        (due, None)
    }

    /// An end proposal failed: try again at `at`, unless the node was
    /// deleted meanwhile.
    pub fn retry(&mut self, nodes: &[String], at: Instant) {
        for node in nodes {
            if self.applied.contains_key(node) && !self.by_node.contains_key(node) {
                self.schedule(node, at);
            }
        }
    }

    /// Hold-offs scheduled (leader only).
    pub fn scheduled(&self) -> usize {
        self.by_node.len()
    }

    fn schedule(&mut self, node: &str, at: Instant) {
        if let Some(old) = self.by_node.insert(node.to_string(), at) {
            self.queue.remove(&(old, node.to_string()));
        }
        self.queue.insert((at, node.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(node: &str, delay_ms: u64) -> HeldOff {
        HeldOff {
            node: node.into(),
            delay_ms,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_leader_ends_a_hold_off_when_it_applied_it_plus_the_delay() {
        let mut h = HoldOffs::default();
        // A follower applies the hold-off, then leads 600 ms later.
        h.on_held_off(&[held("/locks/a/lock-1", 1_000)], Instant::now(), false);
        assert_eq!(h.scheduled(), 0, "a follower schedules nothing");
        tokio::time::advance(Duration::from_millis(600)).await;
        h.become_leader(&[held("/locks/a/lock-1", 1_000)], Instant::now());
        let (due, next) = h.take_due(Instant::now());
        assert!(due.is_empty());
        assert_eq!(
            next.map(|n| n - Instant::now()),
            Some(Duration::from_millis(400)),
            "the rest of the delay, not a new one"
        );
        tokio::time::advance(Duration::from_millis(400)).await;
        assert_eq!(h.take_due(Instant::now()).0, vec!["/locks/a/lock-1"]);
    }

    #[tokio::test(start_paused = true)]
    async fn an_unknown_hold_off_gets_a_full_delay_and_a_deleted_one_none() {
        let mut h = HoldOffs::default();
        h.resync(&[held("/locks/b/lock-2", 500)], Instant::now());
        tokio::time::advance(Duration::from_millis(300)).await;
        // Restarted at the resync: counted from there, never shorter.
        h.become_leader(&[held("/locks/b/lock-2", 500)], Instant::now());
        tokio::time::advance(Duration::from_millis(199)).await;
        assert!(h.take_due(Instant::now()).0.is_empty());
        // Ended by a release of nobody: deleted, not retried.
        h.on_deleted(["/locks/b/lock-2"].into_iter());
        h.retry(&["/locks/b/lock-2".to_string()], Instant::now());
        tokio::time::advance(Duration::from_millis(10)).await;
        assert_eq!(h.take_due(Instant::now()), (Vec::new(), None));
    }
}

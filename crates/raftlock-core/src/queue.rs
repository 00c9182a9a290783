//! One lock or election queue: sequence number → waiting session.
//!
//! The queue is an index beside the tree (its nodes also live in the tree,
//! so the generic API can read them). A node's sequence number is the
//! global revision that created it, i.e. its fencing token: it increases
//! within every queue, never repeats even after a queue empties and is
//! dropped, and `lock-0000000042` names the token it carries. Ordering is
//! numeric, which makes "holder", "immediate predecessor" and "next in
//! line" range lookups: O(log n), no scan of the lock's children.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::path::{join, with_sequence, QUEUE_NODE_PREFIX};
use crate::types::SessionId;

/// A queued session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct QueueEntry {
    pub session: SessionId,
    /// Revision at which this entry became the head (the grant), if it has.
    pub granted_revision: Option<u64>,
}

/// A non-empty queue. Empty queues are dropped from the state, so lock
/// names used once do not accumulate.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LockQueue {
    /// Sequence (= create revision) → entry.
    pub entries: BTreeMap<u64, QueueEntry>,
    /// At most one node per session (idempotent acquire).
    pub by_session: BTreeMap<SessionId, u64>,
}

impl LockQueue {
    pub fn head(&self) -> Option<(u64, &QueueEntry)> {
        self.entries.iter().next().map(|(seq, e)| (*seq, e))
    }

    pub fn sequence_of(&self, session: SessionId) -> Option<u64> {
        self.by_session.get(&session).copied()
    }

    /// The entry immediately ahead of `seq`, if any.
    pub fn predecessor(&self, seq: u64) -> Option<u64> {
        self.entries.range(..seq).next_back().map(|(s, _)| *s)
    }

    /// Appends `session` with the revision of the creating command as
    /// its sequence; the caller checked it is not queued already. Returns
    /// (sequence, is head).
    pub fn push(&mut self, session: SessionId, revision: u64) -> (u64, bool) {
        let seq = revision;
        let head = self.entries.is_empty();
        self.entries.insert(
            seq,
            QueueEntry {
                session,
                granted_revision: head.then_some(revision),
            },
        );
        self.by_session.insert(session, seq);
        (seq, head)
    }

    /// Removes `seq`. If it was the head and someone follows, grants the
    /// follower at `revision` and returns its sequence.
    pub fn remove(&mut self, seq: u64, revision: u64) -> Option<u64> {
        let was_head = self.head().is_some_and(|(h, _)| h == seq);
        let entry = self.entries.remove(&seq)?;
        self.by_session.remove(&entry.session);
        if !was_head {
            return None;
        }
        let (next, next_entry) = self.entries.iter_mut().next()?;
        next_entry.granted_revision = Some(revision);
        Some(*next)
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Tree path of the node with sequence `seq` in the queue at `queue_path`.
pub(crate) fn node_path(queue_path: &str, seq: u64) -> String {
    join(queue_path, &with_sequence(QUEUE_NODE_PREFIX, seq))
}

/// Splits a queue node path into (queue path, sequence).
pub(crate) fn parse_node_path(path: &str) -> Option<(&str, u64)> {
    let (queue_path, name) = path.rsplit_once('/')?;
    let digits = name.strip_prefix(QUEUE_NODE_PREFIX)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((queue_path, digits.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_the_next_in_line_only_when_the_head_leaves() {
        let mut q = LockQueue::default();
        let (a, a_head) = q.push(SessionId(1), 10);
        let (b, b_head) = q.push(SessionId(2), 11);
        let (c, _) = q.push(SessionId(3), 12);
        assert_eq!((a, b, c), (10, 11, 12));
        assert!(a_head && !b_head);
        assert_eq!(q.predecessor(c), Some(b));
        assert_eq!(q.remove(b, 13), None, "removing a waiter grants nobody");
        assert_eq!(q.predecessor(c), Some(a));
        assert_eq!(q.remove(a, 14), Some(c));
        assert_eq!(q.head().map(|(_, e)| e.granted_revision), Some(Some(14)));
    }

    #[test]
    fn node_paths_round_trip() {
        let p = node_path("/locks/a/b", 42);
        assert_eq!(p, "/locks/a/b/lock-0000000042");
        assert_eq!(parse_node_path(&p), Some(("/locks/a/b", 42)));
        assert_eq!(parse_node_path("/locks/a/other"), None);
        assert_eq!(parse_node_path("/locks/a/lock-"), None);
        assert_eq!(parse_node_path("/locks/a/lock-+1"), None);
    }
}

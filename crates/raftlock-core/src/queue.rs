//! One lock or election queue: sequence number → waiting session.
//!
//! The queue is an index beside the tree (its nodes also live in the tree,
//! so the generic API can read them). A node's sequence number is the
//! global revision that created it, i.e. its fencing token: it increases
//! within every queue, never repeats even after a queue empties and is
//! dropped, and `lock-0000000042` names the token it carries. Ordering is
//! numeric, which makes "holder", "immediate predecessor" and "next in
//! line" range lookups: O(log n) (or a scan of at most
//! [`SMALL_QUEUE_MAX`] entries while the queue is short), never a scan of
//! the lock's children.

use std::collections::{btree_map, BTreeMap};

use serde::{Deserialize, Serialize};

use crate::path::{join, with_sequence, QUEUE_NODE_PREFIX};
use crate::types::SessionId;

mod encoding;

/// Longest queue kept as a sorted vector. Most locks have one holder and
/// a few waiters, and two B-tree maps cost a whole leaf node each (~750
/// bytes for a one-entry queue) where a vector of one costs 48. Past this
/// length the maps take over, so deep queues keep O(log n) lookups; a
/// linear scan of at most this many entries is a constant.
pub(crate) const SMALL_QUEUE_MAX: usize = 16;

/// A queued session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct QueueEntry {
    pub session: SessionId,
    /// Revision at which this entry became the head (the grant), if it has.
    pub granted_revision: Option<u64>,
}

/// A non-empty queue. Empty queues are dropped from the state, so lock
/// names used once do not accumulate.
///
/// The representation is a function of the length alone (small up to
/// [`SMALL_QUEUE_MAX`] entries, large beyond), so equal queues are equal
/// values on every replica, and the encoding is the same logical shape
/// either way: both maps, in key order, as before the small form existed.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "encoding::EncodedQueue")]
pub(crate) struct LockQueue {
    repr: Repr,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Repr {
    /// (sequence, entry), sorted by sequence; searched linearly by session.
    Small(Vec<(u64, QueueEntry)>),
    /// Boxed so a small queue, the common case, stays three words.
    Large(Box<LargeQueue>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct LargeQueue {
    /// Sequence (= create revision) → entry.
    entries: BTreeMap<u64, QueueEntry>,
    /// At most one node per session (idempotent acquire).
    by_session: BTreeMap<SessionId, u64>,
}

impl Default for LockQueue {
    fn default() -> Self {
        LockQueue {
            repr: Repr::Small(Vec::new()),
        }
    }
}

impl LockQueue {
    pub fn head(&self) -> Option<(u64, &QueueEntry)> {
        match &self.repr {
            Repr::Small(v) => v.first().map(|(seq, e)| (*seq, e)),
            Repr::Large(l) => l.entries.first_key_value().map(|(seq, e)| (*seq, e)),
        }
    }

    pub fn sequence_of(&self, session: SessionId) -> Option<u64> {
        match &self.repr {
            Repr::Small(v) => v
                .iter()
                .find(|(_, e)| e.session == session)
                .map(|(seq, _)| *seq),
            Repr::Large(l) => l.by_session.get(&session).copied(),
        }
    }

    /// The entry with sequence `seq`, if queued.
    pub fn get(&self, seq: u64) -> Option<&QueueEntry> {
        match &self.repr {
            Repr::Small(v) => small_index(v, seq).ok().map(|i| &v[i].1),
            Repr::Large(l) => l.entries.get(&seq),
        }
    }

    /// The entry immediately ahead of `seq`, if any.
    pub fn predecessor(&self, seq: u64) -> Option<u64> {
        match &self.repr {
            Repr::Small(v) => {
                let at = v.partition_point(|(s, _)| *s < seq);
                at.checked_sub(1).map(|i| v[i].0)
            }
            Repr::Large(l) => l.entries.range(..seq).next_back().map(|(s, _)| *s),
        }
    }

    /// Appends `session` with the revision of the creating command as
    /// its sequence; the caller checked it is not queued already. Returns
    /// (sequence, is head).
    pub fn push(&mut self, session: SessionId, revision: u64) -> (u64, bool) {
        let seq = revision;
        let head = self.is_empty();
        let entry = QueueEntry {
            session,
            granted_revision: head.then_some(revision),
        };
        if self.len() == SMALL_QUEUE_MAX {
            self.grow();
        }
        match &mut self.repr {
            Repr::Small(v) => {
                // Sequences are revisions, so this is the end in practice.
                let at = v.partition_point(|(s, _)| *s < seq);
                v.reserve_exact(1);
                v.insert(at, (seq, entry));
            }
            Repr::Large(l) => {
                l.entries.insert(seq, entry);
                l.by_session.insert(session, seq);
            }
        }
        (seq, head)
    }

    /// Removes `seq`. If it was the head and someone follows, grants the
    /// follower at `revision` and returns its sequence.
    pub fn remove(&mut self, seq: u64, revision: u64) -> Option<u64> {
        let was_head = self.head().is_some_and(|(h, _)| h == seq);
        match &mut self.repr {
            Repr::Small(v) => {
                let at = small_index(v, seq).ok()?;
                v.remove(at);
                v.shrink_to_fit();
            }
            Repr::Large(l) => {
                let entry = l.entries.remove(&seq)?;
                l.by_session.remove(&entry.session);
                if l.entries.len() == SMALL_QUEUE_MAX {
                    self.shrink();
                }
            }
        }
        if !was_head {
            return None;
        }
        let (next, next_entry) = self.head_mut()?;
        next_entry.granted_revision = Some(revision);
        Some(next)
    }

    /// Removes `seq` and grants nobody: for the recipes whose grant rule
    /// is not "the head holds" (`shared.rs` decides who follows).
    pub fn take(&mut self, seq: u64) -> Option<QueueEntry> {
        match &mut self.repr {
            Repr::Small(v) => {
                let at = small_index(v, seq).ok()?;
                let (_, entry) = v.remove(at);
                v.shrink_to_fit();
                Some(entry)
            }
            Repr::Large(l) => {
                let entry = l.entries.remove(&seq)?;
                l.by_session.remove(&entry.session);
                if l.entries.len() == SMALL_QUEUE_MAX {
                    self.shrink();
                }
                Some(entry)
            }
        }
    }

    /// Marks `seq` granted at `revision`, unless it already is.
    pub fn grant(&mut self, seq: u64, revision: u64) {
        let entry = match &mut self.repr {
            Repr::Small(v) => small_index(v, seq).ok().map(|i| &mut v[i].1),
            Repr::Large(l) => l.entries.get_mut(&seq),
        };
        if let Some(entry) = entry {
            entry.granted_revision.get_or_insert(revision);
        }
    }

    /// The last entry in line.
    pub fn last(&self) -> Option<(u64, &QueueEntry)> {
        match &self.repr {
            Repr::Small(v) => v.last().map(|(seq, e)| (*seq, e)),
            Repr::Large(l) => l.entries.last_key_value().map(|(seq, e)| (*seq, e)),
        }
    }

    /// The entries after `seq` (exclusive), in sequence order.
    pub fn after(&self, seq: u64) -> Iter<'_> {
        match &self.repr {
            Repr::Small(v) => {
                let at = v.partition_point(|(s, _)| *s <= seq);
                Iter::Small(v[at..].iter())
            }
            Repr::Large(l) => Iter::Range(
                l.entries
                    .range((std::ops::Bound::Excluded(seq), std::ops::Bound::Unbounded)),
            ),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Small(v) => v.len(),
            Repr::Large(l) => l.entries.len(),
        }
    }

    /// Every entry in sequence order: the head first.
    pub fn iter(&self) -> Iter<'_> {
        match &self.repr {
            Repr::Small(v) => Iter::Small(v.iter()),
            Repr::Large(l) => Iter::Large(l.entries.iter()),
        }
    }

    /// Checks the queue's own consistency: one entry per session, the
    /// representation the length calls for, and (large) both maps agree.
    pub fn check(&self) -> Result<(), &'static str> {
        match &self.repr {
            Repr::Small(v) => {
                if v.len() > SMALL_QUEUE_MAX {
                    return Err("is kept small beyond the small limit");
                }
                if v.windows(2).any(|w| w[0].0 >= w[1].0) {
                    return Err("is out of sequence order");
                }
                let mut sessions: Vec<SessionId> = v.iter().map(|(_, e)| e.session).collect();
                sessions.sort_unstable();
                if sessions.windows(2).any(|w| w[0] == w[1]) {
                    return Err("has a session twice");
                }
            }
            Repr::Large(l) => {
                if l.entries.len() <= SMALL_QUEUE_MAX {
                    return Err("is kept large within the small limit");
                }
                if l.entries.len() != l.by_session.len() {
                    return Err("has a session twice");
                }
                if l.entries
                    .iter()
                    .any(|(seq, e)| l.by_session.get(&e.session) != Some(seq))
                {
                    return Err("has a session index that disagrees with its entries");
                }
            }
        }
        Ok(())
    }

    fn head_mut(&mut self) -> Option<(u64, &mut QueueEntry)> {
        match &mut self.repr {
            Repr::Small(v) => v.first_mut().map(|(seq, e)| (*seq, e)),
            Repr::Large(l) => l.entries.iter_mut().next().map(|(seq, e)| (*seq, e)),
        }
    }

    /// Small → large, when a push would pass the small limit.
    fn grow(&mut self) {
        if let Repr::Small(v) = &mut self.repr {
            let by_session = v.iter().map(|(seq, e)| (e.session, *seq)).collect();
            let entries = std::mem::take(v).into_iter().collect();
            self.repr = Repr::Large(Box::new(LargeQueue {
                entries,
                by_session,
            }));
        }
    }

    /// Large → small, once a removal brings it back to the small limit.
    fn shrink(&mut self) {
        if let Repr::Large(l) = &mut self.repr {
            let entries = std::mem::take(&mut l.entries);
            self.repr = Repr::Small(entries.into_iter().collect());
        }
    }
}

/// Position of `seq` in a small queue (`Err`: where it would go).
fn small_index(v: &[(u64, QueueEntry)], seq: u64) -> Result<usize, usize> {
    v.binary_search_by_key(&seq, |(s, _)| *s)
}

/// A queue's entries in sequence order.
pub(crate) enum Iter<'a> {
    Small(std::slice::Iter<'a, (u64, QueueEntry)>),
    Large(btree_map::Iter<'a, u64, QueueEntry>),
    Range(btree_map::Range<'a, u64, QueueEntry>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (u64, &'a QueueEntry);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Small(i) => i.next().map(|(seq, e)| (*seq, e)),
            Iter::Large(i) => i.next().map(|(seq, e)| (*seq, e)),
            Iter::Range(i) => i.next().map(|(seq, e)| (*seq, e)),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Iter::Small(i) => i.size_hint(),
            Iter::Large(i) => i.size_hint(),
            Iter::Range(i) => i.size_hint(),
        }
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

    use proptest::prelude::*;

    fn is_small(q: &LockQueue) -> bool {
        matches!(q.repr, Repr::Small(_))
    }

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
    fn switches_to_maps_past_the_small_limit_and_back() {
        let mut q = LockQueue::default();
        let n = SMALL_QUEUE_MAX as u64 + 4;
        for i in 0..n {
            q.push(SessionId(i.into()), 100 + i);
            assert_eq!(
                is_small(&q),
                q.len() <= SMALL_QUEUE_MAX,
                "at {} entries",
                q.len()
            );
            assert_eq!(q.check(), Ok(()));
        }
        // Large: lookups by sequence and by session.
        assert_eq!(
            q.head().map(|(s, e)| (s, e.session)),
            Some((100, SessionId(0)))
        );
        assert_eq!(q.predecessor(100), None);
        assert_eq!(q.predecessor(100 + n - 1), Some(100 + n - 2));
        assert_eq!(q.sequence_of(SessionId(7)), Some(107));
        assert_eq!(q.sequence_of(SessionId(n.into())), None);
        // A waiter leaves: nobody is granted, the gap is skipped.
        assert_eq!(q.remove(110, 200), None);
        assert_eq!(q.predecessor(111), Some(109));
        assert_eq!(q.get(110), None);
        // The head leaves while large: the next in line is granted.
        assert_eq!(q.remove(100, 201), Some(101));
        assert_eq!(
            q.head().map(|(s, e)| (s, e.granted_revision)),
            Some((101, Some(201)))
        );
        // Back at the limit: small again, same answers.
        assert_eq!(q.len(), SMALL_QUEUE_MAX + 2);
        q.remove(105, 202);
        assert!(!is_small(&q));
        q.remove(106, 203);
        assert!(is_small(&q) && q.len() == SMALL_QUEUE_MAX);
        assert_eq!(q.check(), Ok(()));
        assert_eq!(q.predecessor(107), Some(104));
        assert_eq!(q.predecessor(111), Some(109));
        assert_eq!(q.sequence_of(SessionId(12)), Some(112));
        assert_eq!(q.sequence_of(SessionId(6)), None);
        // The head leaves while small.
        assert_eq!(q.remove(101, 204), Some(102));
        assert_eq!(
            q.head().map(|(s, e)| (s, e.granted_revision)),
            Some((102, Some(204)))
        );
        let order: Vec<u64> = q.iter().map(|(s, _)| s).collect();
        let expected: Vec<u64> = (102..100 + n)
            .filter(|s| ![105, 106, 110].contains(s))
            .collect();
        assert_eq!(order, expected);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Push(u8),
        /// Removes the entry at this position, if any.
        Remove(prop::sample::Index),
        RemoveAbsent(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0..40u8).prop_map(Op::Push),
            4 => any::<prop::sample::Index>().prop_map(Op::Remove),
            1 => any::<u64>().prop_map(Op::RemoveAbsent),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        /// The compact queue answers exactly like one plain ordered map,
        /// across the small/large boundary in both directions.
        #[test]
        fn answers_like_an_ordered_map(ops in prop::collection::vec(op(), 1..300)) {
            let mut q = LockQueue::default();
            // Sequence → (session, granted at).
            let mut model: BTreeMap<u64, (SessionId, Option<u64>)> = BTreeMap::new();
            let mut revision = 0u64;
            for op in ops {
                revision += 1;
                match op {
                    Op::Push(s) => {
                        let session = SessionId(s.into());
                        if model.values().any(|(m, _)| *m == session) {
                            continue; // the caller never pushes a queued session
                        }
                        let head = model.is_empty();
                        model.insert(revision, (session, head.then_some(revision)));
                        prop_assert_eq!(q.push(session, revision), (revision, head));
                    }
                    Op::Remove(index) => {
                        if model.is_empty() {
                            continue;
                        }
                        let seq = *model.keys().nth(index.index(model.len())).expect("in range");
                        let was_head = model.keys().next() == Some(&seq);
                        model.remove(&seq);
                        let granted = if was_head {
                            model.iter_mut().next().map(|(next, (_, at))| {
                                *at = Some(revision);
                                *next
                            })
                        } else {
                            None
                        };
                        prop_assert_eq!(q.remove(seq, revision), granted);
                    }
                    Op::RemoveAbsent(seq) => {
                        if !model.contains_key(&seq) {
                            prop_assert_eq!(q.remove(seq, revision), None);
                        }
                    }
                }
                prop_assert_eq!(q.check(), Ok(()));
                prop_assert_eq!(is_small(&q), model.len() <= SMALL_QUEUE_MAX);
                prop_assert_eq!(q.len(), model.len());
                prop_assert_eq!(q.is_empty(), model.is_empty());
                let listed: Vec<(u64, SessionId, Option<u64>)> =
                    q.iter().map(|(s, e)| (s, e.session, e.granted_revision)).collect();
                let expected: Vec<(u64, SessionId, Option<u64>)> =
                    model.iter().map(|(s, (m, at))| (*s, *m, *at)).collect();
                prop_assert_eq!(listed, expected);
                prop_assert_eq!(q.head().map(|(s, e)| (s, e.session)), model.iter().next().map(|(s, (m, _))| (*s, *m)));
                for s in 0..40u8 {
                    let session = SessionId(s.into());
                    let expected = model.iter().find(|(_, (m, _))| *m == session).map(|(seq, _)| *seq);
                    prop_assert_eq!(q.sequence_of(session), expected);
                }
                // Every queued sequence, the gaps after them, and both ends.
                let probes = model.keys().flat_map(|s| [*s, s + 1]).chain([0, revision + 1]);
                for probe in probes.collect::<Vec<_>>() {
                    let expected = model.range(..probe).next_back().map(|(s, _)| *s);
                    prop_assert_eq!(q.predecessor(probe), expected, "predecessor of {}", probe);
                    prop_assert_eq!(q.get(probe).map(|e| e.session), model.get(&probe).map(|(m, _)| *m));
                }
            }
        }
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

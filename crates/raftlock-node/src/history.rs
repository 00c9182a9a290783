//! The recent changes of the tree, by revision, for node watches
//! (`GET /v1/nodes/{path}?watch=true&since_revision=R`, docs/api.md).
//!
//! Every replica records, under the state's write lock, the nodes each
//! applied command changed and their values after it, and keeps the
//! newest [`CAPACITY`] of them, within [`CAPACITY_BYTES`]. A watch
//! replays from here what came after its `since_revision`, then follows
//! new changes through a watch channel of the newest revision (subscribe,
//! then read: a change recorded after the read is signalled, never
//! missed). Older history is gone: below the floor a watch is told
//! `compacted` and must read afresh. A snapshot installed from the leader
//! replaces the state without per-node changes, so it empties the
//! history and raises the floor to it.

use std::collections::VecDeque;
use std::sync::Mutex;

use raftlock_core::{Effects, Node, StateMachine};
use tokio::sync::watch;

/// Changes kept per replica, at most.
pub const CAPACITY: usize = 10_000;
/// Bytes of node data and paths kept per replica, at most: node data may
/// be up to the API's `max_data_bytes` each, and 10,000 of those would
/// not fit in memory.
pub const CAPACITY_BYTES: usize = 64 * 1024 * 1024;

/// What a change costs the history's byte budget.
fn weight(change: &Change) -> usize {
    change.path.len() + change.node.as_ref().map_or(0, |n| n.data.len()) + 64
}

/// One node's change at one revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The revision of the command that made it.
    pub revision: u64,
    /// The node's path.
    pub path: String,
    /// The node after the command; `None` when it was deleted.
    pub node: Option<Node>,
}

/// Changes after `since` are no longer all kept: read afresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compacted {
    /// The oldest revision a watch may start after.
    pub floor: u64,
}

struct Inner {
    /// Changes at or below this revision are not (all) kept.
    floor: u64,
    changes: VecDeque<Change>,
    /// The weight of `changes`.
    bytes: usize,
}

/// The recent changes of one replica's tree.
pub struct ChangeHistory {
    inner: Mutex<Inner>,
    /// Changes kept ([`CAPACITY`]; smaller in tests).
    capacity: usize,
    /// The newest recorded revision, to wake watches.
    latest: watch::Sender<u64>,
}

impl ChangeHistory {
    /// An empty history whose floor is the state's revision.
    pub(crate) fn new(revision: u64) -> Self {
        Self::with_capacity(revision, CAPACITY)
    }

    fn with_capacity(revision: u64, capacity: usize) -> Self {
        ChangeHistory {
            capacity,
            inner: Mutex::new(Inner {
                floor: revision,
                changes: VecDeque::new(),
                bytes: 0,
            }),
            latest: watch::channel(revision).0,
        }
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records what one applied command changed (`state` is after it).
    pub(crate) fn record(&self, state: &StateMachine, effects: &Effects) {
        let revision = state.revision();
        let paths = effects
            .deleted
            .iter()
            .map(|d| d.path.as_str())
            .chain(effects.written.iter().map(String::as_str));
        let mut inner = self.inner();
        let mut recorded = false;
        // A path a command both wrote and deleted is recorded once, with
        // its final value.
        let mut seen = std::collections::BTreeSet::new();
        for path in paths {
            if !seen.insert(path) {
                continue;
            }
            let change = Change {
                revision,
                path: path.to_string(),
                node: state.node(path).cloned(),
            };
            inner.bytes += weight(&change);
            inner.changes.push_back(change);
            recorded = true;
        }
        while inner.changes.len() > self.capacity || inner.bytes > CAPACITY_BYTES {
            let Some(old) = inner.changes.pop_front() else {
                break;
            };
            inner.bytes = inner.bytes.saturating_sub(weight(&old));
            inner.floor = inner.floor.max(old.revision);
        }
        drop(inner);
        if recorded {
            self.latest.send_replace(revision);
        }
    }

    /// The whole state was replaced (a snapshot from the leader).
    pub(crate) fn reset(&self, revision: u64) {
        let mut inner = self.inner();
        inner.changes.clear();
        inner.bytes = 0;
        inner.floor = revision;
        drop(inner);
        self.latest.send_replace(revision);
    }

    /// Changes after `since` that `matches`, oldest first.
    pub fn since(
        &self,
        since: u64,
        matches: impl Fn(&str) -> bool,
    ) -> Result<Vec<Change>, Compacted> {
        let inner = self.inner();
        if since < inner.floor {
            return Err(Compacted { floor: inner.floor });
        }
        Ok(inner
            .changes
            .iter()
            .filter(|c| c.revision > since && matches(&c.path))
            .cloned()
            .collect())
    }

    /// Signals each newly recorded revision (subscribe before reading).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.latest.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use raftlock_core::Command;

    use super::*;

    fn put(sm: &mut StateMachine, history: &ChangeHistory, path: &str) {
        let applied = sm.apply(&Command::Put {
            path: path.into(),
            data: vec![1],
            session: None,
            sequential: false,
            expected_version: None,
        });
        assert!(applied.result.is_ok());
        history.record(sm, &applied.effects);
    }

    #[test]
    fn replays_after_a_revision_and_reports_what_it_dropped() {
        let mut sm = StateMachine::new();
        let history = ChangeHistory::with_capacity(0, 4);
        let latest = history.subscribe();
        put(&mut sm, &history, "/a/b"); // rev 1: /a and /a/b
        put(&mut sm, &history, "/a/b"); // rev 2
        let all = history.since(0, |_| true).expect("kept");
        let seen: Vec<(u64, &str)> = all.iter().map(|c| (c.revision, c.path.as_str())).collect();
        assert_eq!(seen, [(1, "/a"), (1, "/a/b"), (2, "/a/b")]);
        assert_eq!(all[2].node.as_ref().map(|n| n.version), Some(2));
        assert_eq!(*latest.borrow(), 2);
        assert_eq!(history.since(1, |p| p == "/a").expect("kept"), vec![]);
        // Two more changes push rev 1 out: a watch from 0 must re-read.
        put(&mut sm, &history, "/c");
        put(&mut sm, &history, "/d");
        assert_eq!(history.since(0, |_| true), Err(Compacted { floor: 1 }));
        assert_eq!(history.since(1, |_| true).map(|c| c.len()), Ok(3));
        history.reset(9);
        assert_eq!(history.since(4, |_| true), Err(Compacted { floor: 9 }));
        assert_eq!(history.since(9, |_| true), Ok(vec![]));
    }
}

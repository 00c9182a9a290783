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
//!
//! The changes are kept encoded (`record.rs`), in blocks of about
//! [`BLOCK_BYTES`]: ~60 bytes for a lock node's change instead of ~160 as
//! a `Change` value. Each block knows its newest revision, so a watch
//! finds where to start by a binary search over the blocks.

use std::collections::VecDeque;
use std::sync::Mutex;

use raftlock_core::{Effects, Node, StateMachine};
use tokio::sync::watch;

mod record;

/// Changes kept per replica, at most.
pub const CAPACITY: usize = 10_000;
/// Bytes of node data and paths kept per replica, at most: node data may
/// be up to the API's `max_data_bytes` each, and 10,000 of those would
/// not fit in memory.
pub const CAPACITY_BYTES: usize = 64 * 1024 * 1024;

/// Encoded changes per block, about: a search skips whole blocks, and a
/// block's own bookkeeping is small beside its changes.
const BLOCK_BYTES: usize = 4096;

/// What a change costs the history's byte budget (its path and data, and
/// a fixed part): the same whether or not it is kept encoded, so which
/// changes are kept does not depend on the encoding.
fn weight(path_len: usize, data_len: usize) -> usize {
    path_len + data_len + 64
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
    /// The kept changes, oldest first.
    blocks: VecDeque<Block>,
    /// How many changes are kept.
    len: usize,
    /// Their weight.
    bytes: usize,
}

/// Encoded changes in revision order.
struct Block {
    /// The changes, one after the other (`record::encode`).
    bytes: Vec<u8>,
    /// Where the oldest change still kept starts (those before it were
    /// dropped: the block goes when its last change does).
    start: usize,
    /// The revision of the block's newest change.
    last_revision: u64,
}

impl Inner {
    /// Keeps the change of `path` at `revision` (`node`: the node after
    /// it, `None` if deleted).
    fn push(&mut self, revision: u64, path: &str, node: Option<&Node>) {
        let data_len = node.map_or(0, |n| n.data.len());
        let most = path.len() + data_len + record::MAX_OVERHEAD;
        let fits = self
            .blocks
            .back()
            .is_some_and(|b| b.bytes.len() + most <= b.bytes.capacity());
        if !fits {
            self.blocks.push_back(Block {
                bytes: Vec::with_capacity(BLOCK_BYTES.max(most)),
                start: 0,
                last_revision: revision,
            });
        }
        if let Some(block) = self.blocks.back_mut() {
            record::encode(revision, path, node, &mut block.bytes);
            block.last_revision = revision;
            self.len += 1;
            self.bytes += weight(path.len(), data_len);
        }
    }

    /// Drops the oldest change and raises the floor to it; false when
    /// nothing is kept.
    fn pop_oldest(&mut self) -> bool {
        let Some(block) = self.blocks.front_mut() else {
            return false;
        };
        let mut reader = record::Reader::new(&block.bytes, block.start);
        let Some((revision, weight)) = reader
            .next_entry()
            .map(|e| (e.revision, weight(e.path.len(), e.data_len())))
        else {
            // Only bytes `record::encode` wrote are here; were they ever
            // unreadable, forgetting everything keeps watches correct
            // (they are told `compacted` and read afresh).
            self.forget_all();
            return false;
        };
        block.start = reader.at();
        if block.start >= block.bytes.len() {
            self.blocks.pop_front();
        }
        self.len -= 1;
        self.bytes = self.bytes.saturating_sub(weight);
        self.floor = self.floor.max(revision);
        true
    }

    /// Drops every change; watches from before now must read afresh.
    fn forget_all(&mut self) {
        if let Some(newest) = self.blocks.back() {
            self.floor = self.floor.max(newest.last_revision);
        }
        self.blocks.clear();
        self.len = 0;
        self.bytes = 0;
    }
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
                blocks: VecDeque::new(),
                len: 0,
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
            inner.push(revision, path, state.node(path));
            recorded = true;
        }
        while inner.len > self.capacity || inner.bytes > CAPACITY_BYTES {
            if !inner.pop_oldest() {
                break;
            }
        }
        drop(inner);
        if recorded {
            self.latest.send_replace(revision);
        }
    }

    /// The whole state was replaced (a snapshot from the leader).
    pub(crate) fn reset(&self, revision: u64) {
        let mut inner = self.inner();
        inner.forget_all();
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
        // The first block with a change after `since`; the blocks are in
        // revision order.
        let first = inner.blocks.partition_point(|b| b.last_revision <= since);
        let mut changes = Vec::new();
        for block in inner.blocks.range(first..) {
            let mut reader = record::Reader::new(&block.bytes, block.start);
            while let Some(entry) = reader.next_entry() {
                if entry.revision <= since {
                    continue;
                }
                if let Ok(path) = std::str::from_utf8(entry.path) {
                    if matches(path) {
                        changes.push(entry.to_change(path));
                    }
                }
            }
        }
        Ok(changes)
    }

    /// Signals each newly recorded revision (subscribe before reading).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.latest.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use raftlock_core::{Command, SessionId};

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

    /// The history as it was kept before it was encoded: a list of
    /// `Change` values under the same limits.
    struct Plain {
        capacity: usize,
        floor: u64,
        changes: VecDeque<Change>,
        bytes: usize,
    }

    impl Plain {
        fn record(&mut self, state: &StateMachine, effects: &Effects) {
            let paths = effects
                .deleted
                .iter()
                .map(|d| d.path.as_str())
                .chain(effects.written.iter().map(String::as_str));
            let mut seen = std::collections::BTreeSet::new();
            for path in paths.filter(|p| seen.insert(*p)) {
                // Changes carry no times or child counters (record.rs: a
                // read gives the stat), so the reference drops them too.
                let node = state.node(path).cloned().map(|n| Node {
                    meta: raftlock_core::NodeMeta::default(),
                    ..n
                });
                self.bytes += weight(path.len(), node.as_ref().map_or(0, |n| n.data.len()));
                self.changes.push_back(Change {
                    revision: state.revision(),
                    path: path.to_string(),
                    node,
                });
            }
            while self.changes.len() > self.capacity || self.bytes > CAPACITY_BYTES {
                let Some(old) = self.changes.pop_front() else {
                    break;
                };
                self.bytes -= weight(
                    old.path.len(),
                    old.node.as_ref().map_or(0, |n| n.data.len()),
                );
                self.floor = self.floor.max(old.revision);
            }
        }

        fn since(
            &self,
            since: u64,
            matches: impl Fn(&str) -> bool,
        ) -> Result<Vec<Change>, Compacted> {
            if since < self.floor {
                return Err(Compacted { floor: self.floor });
            }
            Ok(self
                .changes
                .iter()
                .filter(|c| c.revision > since && matches(&c.path))
                .cloned()
                .collect())
        }
    }

    /// Puts (some ephemeral, some with data larger than a block) and
    /// deletes in a pseudo-random order: the encoded history answers every
    /// question as the plain list does, floor included.
    #[test]
    fn answers_as_the_plain_list_did() {
        let mut sm = StateMachine::new();
        let session = SessionId(0xfeed_0000_0000_0000_0000_0000_0000_beef);
        let opened = sm.apply(&Command::OpenSession {
            id: session,
            owner: "t".into(),
            ttl_ms: 1_000,
        });
        assert!(opened.result.is_ok());
        let capacity = 300;
        let history = ChangeHistory::with_capacity(sm.revision(), capacity);
        let mut plain = Plain {
            capacity,
            floor: sm.revision(),
            changes: VecDeque::new(),
            bytes: 0,
        };
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for step in 0..3_000 {
            let r = next();
            let path = format!("/w/{}/{}", r % 3, (r >> 8) % 40);
            let command = if r % 5 == 0 {
                Command::Delete {
                    path,
                    expected_version: None,
                }
            } else {
                let len = if r % 97 == 0 {
                    5_000
                } else {
                    (r >> 16) as usize % 100
                };
                Command::Put {
                    path,
                    data: vec![(r >> 24) as u8; len],
                    session: (r % 3 == 0).then_some(session),
                    sequential: r % 11 == 0,
                    expected_version: None,
                }
            };
            let applied = sm.apply(&command);
            history.record(&sm, &applied.effects);
            plain.record(&sm, &applied.effects);
            let latest = sm.revision();
            let from = [
                plain.floor.saturating_sub(1),
                plain.floor,
                plain.floor + next() % (latest - plain.floor + 1),
                latest,
            ];
            for since in from {
                assert_eq!(
                    history.since(since, |_| true),
                    plain.since(since, |_| true),
                    "step {step}, since {since}"
                );
                let under_one = |p: &str| p.starts_with("/w/1/");
                assert_eq!(
                    history.since(since, under_one),
                    plain.since(since, under_one)
                );
            }
        }
        assert!(plain.floor > 0, "the test dropped changes");
    }
}

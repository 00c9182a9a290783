//! A flat, ordered key space with etcd's MVCC meaning, beside the node
//! tree and replicated by the same log: arbitrary byte keys and values,
//! each key with its create revision, mod revision, version and lease
//! (a raftlock session), and a bounded history of changes for watches
//! and reads at a past revision, down to a compaction floor.
//!
//! Revisions are the state's one global revision: a write to the key
//! space bumps it exactly as a tree write does, so revisions are
//! comparable across the HTTP API, the ZooKeeper door and the etcd door.
//! A session's end deletes the keys leased to it at the revision of that
//! end, as it deletes the session's ephemeral nodes.
//!
//! - `range`: reads (`RangeRequest`), at the newest revision or a past one;
//! - `write`: `KvOp` (put, delete range, transaction, compact) applied;
//! - `history`: the kept events and the compaction floor.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::types::SessionId;

mod history;
mod range;
mod write;

pub use history::{KvEvent, KvEventKind, HISTORY_MAX_BYTES, HISTORY_MAX_EVENTS};
pub use range::{RangeRequest, RangeResult, SortOrder, SortTarget};
pub use write::{
    DeleteRangeRequest, KvCompare, KvCompareResult, KvCompareTarget, KvOp, KvRequest, KvResponse,
    KvResponseOp, PutRequest, TxnRequest,
};

#[cfg(test)]
mod tests;

/// One key's value and metadata, as etcd's `mvccpb.KeyValue` has them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyValue {
    /// The key.
    pub key: Vec<u8>,
    /// The value.
    pub value: Vec<u8>,
    /// Revision of the write that created the key (since its last delete).
    pub create_revision: u64,
    /// Revision of the key's last write.
    pub mod_revision: u64,
    /// 1 on create, +1 per put; 0 means absent.
    pub version: u64,
    /// The session (etcd lease) the key is attached to.
    pub lease: Option<SessionId>,
}

/// A stored key's value and metadata (the key is the map's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Entry {
    /// Boxed: replaced, never grown.
    pub value: Box<[u8]>,
    pub create_revision: u64,
    pub mod_revision: u64,
    pub version: u64,
    pub lease: Option<SessionId>,
}

impl Entry {
    pub(crate) fn view(&self, key: &[u8]) -> KeyValue {
        KeyValue {
            key: key.to_vec(),
            value: self.value.to_vec(),
            create_revision: self.create_revision,
            mod_revision: self.mod_revision,
            version: self.version,
            lease: self.lease,
        }
    }

    /// Bytes this entry costs beyond its key, about (for the measured
    /// memory per key in docs/etcd.md).
    pub(crate) fn weight(&self) -> usize {
        self.value.len() + std::mem::size_of::<Entry>()
    }
}

/// The key space: current keys, the lease index and the history.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvStore {
    /// Every live key.
    pub(crate) keys: BTreeMap<Box<[u8]>, Entry>,
    /// Keys by the session they are leased to, so a session's end finds
    /// its keys without a scan.
    pub(crate) by_lease: BTreeMap<SessionId, BTreeSet<Box<[u8]>>>,
    /// Recent changes and the compaction floor.
    pub(crate) history: history::History,
}

impl KvStore {
    /// How many keys exist.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True when no key exists.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The current value of `key`.
    pub fn get(&self, key: &[u8]) -> Option<KeyValue> {
        self.keys.get(key).map(|e| e.view(key))
    }

    /// The keys leased to `lease`, in order.
    pub fn lease_keys(&self, lease: SessionId) -> Vec<Vec<u8>> {
        self.by_lease
            .get(&lease)
            .map(|keys| keys.iter().map(|k| k.to_vec()).collect())
            .unwrap_or_default()
    }

    /// The oldest revision still readable and watchable (etcd's compact
    /// revision): ranges below it and watches starting below it are
    /// `Compacted`.
    pub fn compact_revision(&self) -> u64 {
        self.history.compact_revision
    }

    /// Events with revision `>= start` on keys in `[key, range_end)`
    /// (etcd's range conventions), oldest first; `Err(floor)` when some
    /// of them are no longer kept.
    pub fn events_since(
        &self,
        start: u64,
        key: &[u8],
        range_end: &[u8],
    ) -> Result<Vec<KvEvent>, u64> {
        self.history.since(start, |k| in_range(k, key, range_end))
    }

    /// Approximate bytes held: keys, values, entries and the history.
    pub fn approximate_bytes(&self) -> usize {
        let keys: usize = self.keys.iter().map(|(k, e)| k.len() + e.weight()).sum();
        keys + self.history.bytes()
    }

    /// Detaches `key` from its lease, if it has one.
    fn unlease(&mut self, key: &[u8], lease: Option<SessionId>) {
        if let Some(lease) = lease {
            if let Some(keys) = self.by_lease.get_mut(&lease) {
                keys.remove(key);
                if keys.is_empty() {
                    self.by_lease.remove(&lease);
                }
            }
        }
    }

    /// Deletes every key leased to `lease` at `revision` (its session
    /// ended); returns how many went.
    pub(crate) fn end_lease(&mut self, lease: SessionId, revision: u64) -> usize {
        let keys = self.by_lease.remove(&lease).unwrap_or_default();
        let count = keys.len();
        for key in keys {
            if let Some(prev) = self.keys.remove(&key) {
                self.history.record(revision, &key, None, Some(prev));
            }
        }
        self.history.trim();
        count
    }

    /// Checks the key space's own invariants against the sessions.
    pub(crate) fn check(
        &self,
        revision: u64,
        session_exists: impl Fn(SessionId) -> bool,
    ) -> Result<(), String> {
        for (key, e) in &self.keys {
            if e.version == 0 || e.create_revision > e.mod_revision || e.mod_revision > revision {
                return Err(format!("key {key:?} has inconsistent revisions"));
            }
            if let Some(lease) = e.lease {
                if !session_exists(lease) {
                    return Err(format!("key {key:?} outlived its lease {lease}"));
                }
                if !self.by_lease.get(&lease).is_some_and(|s| s.contains(key)) {
                    return Err(format!("key {key:?} is missing from its lease's index"));
                }
            }
        }
        for (lease, keys) in &self.by_lease {
            if keys.is_empty() {
                return Err(format!("lease {lease} keeps an empty key set"));
            }
            for key in keys {
                if self.keys.get(key).and_then(|e| e.lease) != Some(*lease) {
                    return Err(format!("lease {lease} lists {key:?}, not leased to it"));
                }
            }
        }
        self.history.check(revision)
    }
}

/// True when `k` lies in etcd's range `[key, range_end)`: an empty
/// `range_end` means `key` alone, `"\0"` every key from `key` on.
pub fn in_range(k: &[u8], key: &[u8], range_end: &[u8]) -> bool {
    if range_end.is_empty() {
        return k == key;
    }
    if range_end == [0] {
        return k >= key;
    }
    k >= key && k < range_end
}

/// The `range_end` that makes `[key, range_end)` every key with prefix
/// `key` (etcd's `GetPrefixRangeEnd`): `"\0"` when no such end exists.
pub fn prefix_end(key: &[u8]) -> Vec<u8> {
    let mut end = key.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// Every key from `key` on, as a B-tree range over byte-slice keys.
pub(crate) fn from_key(key: &[u8]) -> (std::ops::Bound<&[u8]>, std::ops::Bound<&[u8]>) {
    (std::ops::Bound::Included(key), std::ops::Bound::Unbounded)
}

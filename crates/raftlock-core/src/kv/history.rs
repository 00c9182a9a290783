//! The key space's replicated history: every change of the newest
//! [`HISTORY_MAX_EVENTS`] (within [`HISTORY_MAX_BYTES`]), with the value
//! before it, so a watch can start at a past revision and a range can read
//! the state as of one. Older changes are dropped a whole revision at a
//! time and the floor (etcd's compact revision) rises past them; `Compact`
//! raises it on request. Kept in the state and its snapshots, so every
//! replica answers the same for the same revision.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::{Entry, KeyValue};

/// Events kept at most.
pub const HISTORY_MAX_EVENTS: usize = 10_000;
/// Bytes of keys and values (before and after) kept at most.
pub const HISTORY_MAX_BYTES: usize = 64 * 1024 * 1024;

/// Put or delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum KvEventKind {
    /// The key was created or updated.
    Put,
    /// The key was deleted.
    Delete,
}

/// One key's change at one revision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvEvent {
    /// Put or delete.
    pub kind: KvEventKind,
    /// The key after the change; for a delete, only the key and its
    /// mod revision (the delete's) are set, as etcd sends it.
    pub kv: KeyValue,
    /// The key before the change, if it existed.
    pub prev: Option<KeyValue>,
}

impl KvEvent {
    /// The revision of the change.
    pub fn revision(&self) -> u64 {
        self.kv.mod_revision
    }

    fn weight(&self) -> usize {
        let kv = |k: &KeyValue| k.key.len() + k.value.len() + 64;
        kv(&self.kv) + self.prev.as_ref().map_or(0, kv)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct History {
    /// Oldest first; revisions never decrease.
    events: VecDeque<KvEvent>,
    /// Their weight.
    bytes: usize,
    /// Reads and watches below this revision are refused (etcd's
    /// compact revision; 0 until anything is dropped or compacted).
    pub compact_revision: u64,
}

impl History {
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Records a change of `key` at `revision`: `now` is the entry after
    /// it (`None`: deleted), `prev` the one before.
    pub fn record(&mut self, revision: u64, key: &[u8], now: Option<&Entry>, prev: Option<Entry>) {
        let (kind, kv) = match now {
            Some(e) => (KvEventKind::Put, e.view(key)),
            None => (
                KvEventKind::Delete,
                KeyValue {
                    key: key.to_vec(),
                    value: Vec::new(),
                    create_revision: 0,
                    mod_revision: revision,
                    version: 0,
                    lease: None,
                },
            ),
        };
        let event = KvEvent {
            kind,
            kv,
            prev: prev.map(|p| p.view(key)),
        };
        self.bytes += event.weight();
        self.events.push_back(event);
    }

    /// Drops the oldest revisions until within bounds.
    pub fn trim(&mut self) {
        while self.events.len() > HISTORY_MAX_EVENTS || self.bytes > HISTORY_MAX_BYTES {
            let Some(oldest) = self.events.front().map(KvEvent::revision) else {
                break;
            };
            self.drop_below(oldest + 1);
        }
    }

    /// Drops every event below `revision` and raises the floor to it.
    pub fn drop_below(&mut self, revision: u64) {
        while self.events.front().is_some_and(|e| e.revision() < revision) {
            if let Some(e) = self.events.pop_front() {
                self.bytes -= e.weight();
            }
        }
        self.compact_revision = self.compact_revision.max(revision);
    }

    /// Events at `start` or later whose key `matches`, oldest first;
    /// `Err(floor)` when `start` is below the floor.
    pub fn since(
        &self,
        start: u64,
        matches: impl Fn(&[u8]) -> bool,
    ) -> Result<Vec<super::KvEvent>, u64> {
        if start < self.compact_revision {
            return Err(self.compact_revision);
        }
        let first = self.events.partition_point(|e| e.revision() < start);
        Ok(self
            .events
            .range(first..)
            .filter(|e| matches(&e.kv.key))
            .cloned()
            .collect())
    }

    /// Events after `revision`, newest first: what to undo to read the
    /// state as of `revision`.
    pub fn after_newest_first(&self, revision: u64) -> impl Iterator<Item = &KvEvent> {
        let first = self.events.partition_point(|e| e.revision() <= revision);
        self.events.range(first..).rev()
    }

    pub fn check(&self, revision: u64) -> Result<(), String> {
        let mut last = self.compact_revision;
        for e in &self.events {
            if e.revision() < last || e.revision() > revision {
                return Err(format!(
                    "history event at revision {} is out of order",
                    e.revision()
                ));
            }
            last = e.revision();
        }
        let bytes: usize = self.events.iter().map(KvEvent::weight).sum();
        if bytes != self.bytes {
            return Err("history weight is miscounted".into());
        }
        Ok(())
    }
}

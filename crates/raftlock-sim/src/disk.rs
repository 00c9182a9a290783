//! A member's simulated disk: what its log store wrote, and how much of it
//! a sync made durable.
//!
//! Writes land in `live` at once (what the running store reads back) and
//! queue as unsynced operations; a sync applies them, in order, to
//! `durable`. A crash throws the queue away: the member restarts from
//! `durable`, as after a power loss. The vote and snapshots are durable
//! once written (the real stores sync them before returning).

use std::collections::{BTreeMap, VecDeque};

use openraft::{Entry, LogId, Vote};
use raftlock_node::{Member as RaftMember, NodeId, TypeConfig};

/// A snapshot as stored: its meta and the state machine's bytes.
pub type StoredSnapshot = (openraft::SnapshotMeta<NodeId, RaftMember>, Vec<u8>);

/// The log as of some point: entries by index, and how far it was purged.
#[derive(Clone, Default)]
pub struct LogImage {
    /// Entries by index.
    pub entries: BTreeMap<u64, Entry<TypeConfig>>,
    /// The last purged log id.
    pub purged: Option<LogId<NodeId>>,
    /// The committed log id openraft saved.
    pub committed: Option<LogId<NodeId>>,
}

/// One write to the log.
pub enum DiskOp {
    /// Entries appended.
    Append(Vec<Entry<TypeConfig>>),
    /// Entries from this index on removed.
    Truncate(u64),
    /// Entries up to this log id removed.
    Purge(LogId<NodeId>),
    /// The committed log id, durable with the next sync (as
    /// `raftlock-storage` keeps it for its next mark record).
    Committed(Option<LogId<NodeId>>),
}

impl LogImage {
    fn apply(&mut self, op: &DiskOp) {
        match op {
            DiskOp::Append(entries) => {
                for e in entries {
                    self.entries.insert(e.log_id.index, e.clone());
                }
            }
            DiskOp::Truncate(index) => {
                self.entries.split_off(index);
            }
            DiskOp::Purge(log_id) => {
                self.entries = self.entries.split_off(&(log_id.index + 1));
                self.purged = Some(*log_id);
            }
            DiskOp::Committed(c) => self.committed = *c,
        }
    }
}

/// A member's disk.
#[derive(Default)]
pub struct Disk {
    /// Bumped by every crash: a store opened before it writes nothing more.
    pub epoch: u64,
    /// What survives a crash.
    pub durable: LogImage,
    /// What the running store sees.
    pub live: LogImage,
    /// Written, not yet synced, with their sequence numbers.
    unsynced: VecDeque<(u64, DiskOp)>,
    /// Sequence number of the next write.
    next_seq: u64,
    /// The vote, durable once saved.
    pub vote: Option<Vote<NodeId>>,
    /// The newest snapshot, durable once written.
    pub snapshot: Option<StoredSnapshot>,
    /// Operations lost to crashes, for the run's summary.
    pub lost_writes: u64,
    /// Torn records found (and cut off) when a crashed member reopened.
    pub torn_records: u64,
}

impl Disk {
    /// Writes `op`: visible at once, durable after a sync reaches the
    /// returned sequence number.
    pub fn write(&mut self, op: DiskOp) -> u64 {
        self.live.apply(&op);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.unsynced.push_back((seq, op));
        seq
    }

    /// Makes every write up to `seq` durable.
    pub fn sync_to(&mut self, seq: u64) {
        while self.unsynced.front().is_some_and(|(s, _)| *s <= seq) {
            if let Some((_, op)) = self.unsynced.pop_front() {
                self.durable.apply(&op);
            }
        }
    }

    /// A power loss in the middle of writing back: the first `kept`
    /// unsynced writes reached the platter before the power went, the next
    /// one only partly. A partly written append keeps the entries before
    /// `torn_at` whole; the record it was writing is torn, and its checksum
    /// fails when the store reopens, which cuts the log there (as
    /// `raftlock-storage`'s open truncates a torn tail). Whatever was never
    /// acknowledged may survive this way; nothing acknowledged is lost.
    pub fn crash_torn(&mut self, kept: usize, torn_at: usize) {
        for _ in 0..kept.min(self.unsynced.len()) {
            if let Some((_, op)) = self.unsynced.pop_front() {
                self.durable.apply(&op);
            }
        }
        if let Some((_, DiskOp::Append(entries))) = self.unsynced.front() {
            if !entries.is_empty() {
                let whole = torn_at.min(entries.len() - 1);
                let prefix = DiskOp::Append(entries[..whole].to_vec());
                self.durable.apply(&prefix);
                // The torn record: found by its checksum at open, cut off.
                self.torn_records += 1;
            }
        }
        self.crash();
    }

    /// A power loss: unsynced writes are gone, and stores opened before
    /// it are stale.
    pub fn crash(&mut self) {
        self.lost_writes += self.unsynced.len() as u64;
        self.unsynced.clear();
        self.live = self.durable.clone();
        self.epoch += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{CommittedLeaderId, EntryPayload};

    fn entry(index: u64) -> Entry<TypeConfig> {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
            payload: EntryPayload::Blank,
        }
    }

    #[test]
    fn a_crash_keeps_what_was_synced_and_loses_the_rest() {
        let mut d = Disk::default();
        let a = d.write(DiskOp::Append(vec![entry(1), entry(2)]));
        d.write(DiskOp::Append(vec![entry(3)]));
        assert_eq!(d.live.entries.len(), 3);
        d.sync_to(a);
        d.crash();
        assert_eq!(d.live.entries.keys().copied().collect::<Vec<_>>(), [1, 2]);
        assert_eq!(d.lost_writes, 1);
        assert_eq!(d.epoch, 1);
    }

    #[test]
    fn a_torn_crash_keeps_a_prefix_of_the_unsynced_writes_and_cuts_the_torn_record() {
        let mut d = Disk::default();
        let a = d.write(DiskOp::Append(vec![entry(1)]));
        d.sync_to(a);
        d.write(DiskOp::Append(vec![entry(2)]));
        d.write(DiskOp::Append(vec![entry(3), entry(4), entry(5)]));
        d.write(DiskOp::Append(vec![entry(6)]));
        // The second unsynced write reached the disk up to its second entry.
        d.crash_torn(1, 1);
        assert_eq!(
            d.live.entries.keys().copied().collect::<Vec<_>>(),
            [1, 2, 3]
        );
        assert_eq!(d.torn_records, 1);
        assert_eq!(d.lost_writes, 2);
        // A torn append always loses at least its last entry.
        let mut d = Disk::default();
        d.write(DiskOp::Append(vec![entry(1), entry(2)]));
        d.crash_torn(0, 9);
        assert_eq!(d.live.entries.keys().copied().collect::<Vec<_>>(), [1]);
        assert_eq!(d.torn_records, 1);
    }

    #[test]
    fn truncate_and_purge_replay_in_order() {
        let mut d = Disk::default();
        d.write(DiskOp::Append((1..=5).map(entry).collect()));
        d.write(DiskOp::Truncate(4));
        let last = d.write(DiskOp::Purge(entry(1).log_id));
        d.sync_to(last);
        d.crash();
        assert_eq!(d.live.entries.keys().copied().collect::<Vec<_>>(), [2, 3]);
        assert_eq!(d.live.purged.map(|l| l.index), Some(1));
    }
}

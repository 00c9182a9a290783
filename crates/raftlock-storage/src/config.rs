//! Configuration of the sled-backed log store: one struct, documented defaults.

use std::path::PathBuf;

/// Default for [`SledLogConfig::cache_capacity_bytes`]: 64 MiB.
///
/// sled's own default is 1 GiB and it is a soft cap (resident memory can
/// grow past it, sled issues #1309 and #1410). A Raft log is written once,
/// read back mostly by replication of recent entries, and purged after each
/// snapshot, so a small page cache costs little and keeps a node's memory
/// predictable.
pub const DEFAULT_CACHE_CAPACITY_BYTES: u64 = 64 * 1024 * 1024;

/// How hard a durability barrier (the step before an append is acknowledged
/// to openraft, a vote is saved, or the log is truncated/purged) pushes data
/// towards the disk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Durability {
    /// Survive power loss: sled's `flush()` followed by `fdatasync` of sled's
    /// data file, plus `fsync` of any new large-value (blob) file and of the
    /// directories whose entries changed. This is the only mode a production
    /// node should use.
    #[default]
    Fsync,
    /// Survive a process crash (`kill -9`) but not power loss: sled's
    /// `flush()` alone, which writes the data with `sync_file_range` (page
    /// cache written back, disk cache and file metadata not flushed; sled
    /// github.com/spacejam/sled/issues/1452). For tests and benchmarks that want to measure or avoid
    /// the cost of real syncs.
    FlushOnly,
}

/// Where and how to open a [`SledLogStore`](crate::SledLogStore) (the name
/// is kept from when the log lived in sled: sled still holds the vote, the
/// purge pointer and the metadata).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SledLogConfig {
    /// Directory holding the sled database (created if missing). One
    /// directory per node; it must not be shared by two processes (sled
    /// takes an exclusive file lock).
    pub path: PathBuf,
    /// Upper bound (soft) on sled's in-memory page cache, in bytes.
    /// Default: [`DEFAULT_CACHE_CAPACITY_BYTES`] (64 MiB).
    pub cache_capacity_bytes: u64,
    /// What a durability barrier does. Default: [`Durability::Fsync`].
    pub durability: Durability,
    /// When `true`, `append` reports the entries to openraft as persisted
    /// once they are written (readable), and their durability only through
    /// [`DurableIndex`](crate::DurableIndex), so the Raft core does not stop
    /// for each sync. Safe only for a caller that holds back every effect
    /// of an entry until `DurableIndex` covers it (see that type). Default:
    /// `false` (openraft is told after the barrier).
    pub deferred_durability: bool,
    /// When `true`, `purge` deletes only what a durable snapshot covers, as
    /// reported through [`SnapshotFloor`](crate::SnapshotFloor), and defers
    /// the rest until the floor rises (openraft 0.9 may purge before the
    /// snapshot covering the entries is on disk: see that type). Nothing is
    /// purged until the caller raises the floor. Default: `false` (a purge
    /// deletes what openraft asks, at once).
    pub snapshot_gated_purge: bool,
    /// Size at which a log segment file is closed and the next one begun
    /// (a purge deletes whole segments, so it is also the unit in which
    /// disk space comes back). Default: 16 MiB. A batch of entries larger
    /// than this gets a segment of its own.
    pub segment_bytes: u64,
}

impl SledLogConfig {
    /// Configuration with every setting at its default, stored in `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            cache_capacity_bytes: DEFAULT_CACHE_CAPACITY_BYTES,
            durability: Durability::default(),
            deferred_durability: false,
            snapshot_gated_purge: false,
            segment_bytes: crate::segment::DEFAULT_SEGMENT_BYTES,
        }
    }

    /// Sets [`SledLogConfig::cache_capacity_bytes`].
    pub fn with_cache_capacity_bytes(mut self, bytes: u64) -> Self {
        self.cache_capacity_bytes = bytes;
        self
    }

    /// Sets [`SledLogConfig::durability`].
    pub fn with_durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Sets [`SledLogConfig::deferred_durability`].
    pub fn with_deferred_durability(mut self, deferred: bool) -> Self {
        self.deferred_durability = deferred;
        self
    }

    /// Sets [`SledLogConfig::segment_bytes`].
    pub fn with_segment_bytes(mut self, bytes: u64) -> Self {
        self.segment_bytes = bytes;
        self
    }

    /// Sets [`SledLogConfig::snapshot_gated_purge`].
    pub fn with_snapshot_gated_purge(mut self, gated: bool) -> Self {
        self.snapshot_gated_purge = gated;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_small_cache_and_fsync() {
        let cfg = SledLogConfig::new("/tmp/x");
        assert_eq!(cfg.cache_capacity_bytes, 64 * 1024 * 1024);
        assert_eq!(cfg.durability, Durability::Fsync);
        assert!(!cfg.deferred_durability);
        assert!(!cfg.snapshot_gated_purge);
    }
}

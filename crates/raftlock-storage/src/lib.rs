//! Durable Raft log storage for raftlock.
//!
//! [`SledLogStore`] implements openraft 0.9's v2 storage traits
//! ([`RaftLogStorage`](openraft::storage::RaftLogStorage) and
//! [`RaftLogReader`](openraft::RaftLogReader)) for any openraft type
//! config. This crate is the only place that knows about sled and the log's
//! files: the node crate sees openraft's traits, [`SledLogConfig`] and
//! [`StoreError`], so another engine can replace it behind the same traits.
//!
//! Layout (format 2): the log's entries in segment files of our own
//! (`segment-<seq>.log`: records with a CRC each, appended with `pwrite`
//! into zero-filled space, truncations and the committed log id as records
//! too); sled holds the vote and the last purged log id (one tree each)
//! and a `meta` tree for the node's own records ([`MetaStore`]); a small
//! watermark record checks that sled lost neither.
//!
//! Durability: a dedicated worker thread runs *barriers* (`fdatasync` of
//! the segment written since the last one; sled's flush and `fdatasync`
//! only when sled was written; see [`Durability`]). An append's callback
//! fires only after a barrier that
//! started after the append was written; appends queued while a barrier runs
//! share the next one (group commit). Votes, truncations and purges wait for
//! a barrier before returning. [`DurableIndex`] follows the durable prefix
//! of the log; with [`SledLogConfig::deferred_durability`] it, not the
//! callback, is what says an append is on disk. With
//! [`SledLogConfig::snapshot_gated_purge`] a purge deletes only what a
//! durable snapshot covers ([`SnapshotFloor`]).
//!
//! ```no_run
//! # async fn demo() -> Result<(), raftlock_storage::StoreError> {
//! use std::io::Cursor; // `declare_raft_types!` names it
//! use raftlock_storage::{SledLogConfig, SledLogStore};
//! openraft::declare_raft_types!(pub MyConfig);
//! let config = SledLogConfig::new("/var/lib/raftlock/node-1/log");
//! let store = SledLogStore::<MyConfig>::open(&config)?;
//! let meta = store.meta(); // keep before giving `store` to openraft
//! meta.put("node_id", &1u64).await?;
//! # Ok(()) }
//! ```

// Embedders read these docs: every public item says what it is for
// (a warning, made an error by `cargo clippy -- -D warnings` in CI).
#![warn(missing_docs)]

mod barrier;
mod cell;
mod codec;
mod config;
mod durable;
mod error;
mod floor;
mod meta;
mod migrate;
mod reader;
mod segment;
mod sled_dirty;
mod store;
mod sync_worker;
mod watermark;

pub use config::{Durability, SledLogConfig, DEFAULT_CACHE_CAPACITY_BYTES};
pub use durable::DurableIndex;
pub use error::{EngineError, StoreError};
pub use floor::SnapshotFloor;
pub use meta::MetaStore;
pub use reader::SledLogReader;
pub use segment::DEFAULT_SEGMENT_BYTES;
/// The segment log itself and its file-system seam, for the deterministic
/// simulator, which runs the real log over a simulated disk.
#[cfg(feature = "simulation")]
pub use segment::{LogFile, OpenResult, Opened, SegmentFs, SegmentLog, StdFs, SyncTicket};
pub use store::SledLogStore;
pub use sync_worker::{SyncMeter, SyncStall, SyncStats};

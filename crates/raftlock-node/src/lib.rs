//! # raftlock-node
//!
//! One raftlock replica: openraft over a sled log (`raftlock-storage`),
//! the core state machine in memory with snapshots on disk, an HTTP
//! transport between nodes, the leader's in-memory session tracker, and a
//! registry that wakes only the successor of each deleted lock node.
//!
//! Embed it: [`Node::start_from_cluster_file`] starts a member from the
//! cluster file `raftlock serve` reads (or build a [`NodeConfig`] and call
//! [`Node::start`]) inside your tokio runtime, and use the handle's
//! operations ([`Node::open_session`], [`Node::acquire`], …). Three copies
//! of the application form the cluster. The HTTP API crate serves the same
//! operations to other languages.

#![warn(missing_docs)]

mod config;
mod disk;
mod door_addrs;
mod embed;
mod error;
#[doc(hidden)]
pub mod fuzzing;
mod history;
#[cfg(feature = "internals")]
mod internals;
mod local;
mod node;
mod ops;
mod raft;
mod replica;
mod sessions;
mod shutdown;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod simulation;
pub use raft::join;
mod stats;
mod status;
mod transport;

pub use config::{check_address, BindAddrs, ClusterSettings, ConfigError, NodeConfig};
pub use disk::backup::{
    restore, Backup, BackupError, BackupHeader, BackupSummary, RestoreError, Restored,
    BACKUP_FORMAT,
};
pub use disk::identity::{Identity, IdentityError};
pub use disk::snapshot_file::SnapshotFileError;
pub use door_addrs::{all_door_addrs, door_addrs, BoundDoor, DoorAddrs, MemberDoorError};
pub use error::{core_code, MembershipError, NodeError};
pub use history::{Change, ChangeHistory, Compacted};
pub use local::LocalCluster;
pub use node::{Node, StartError};
pub use ops::acquire::AcquireOptions;
pub use ops::kv_ops::{KvEvents, KvStats, LeaseView, MAX_LEASE_ID};
pub use ops::observe::ElectionChanges;
pub use ops::primitives::MultiGrant;
pub use ops::queue_ops::Enqueue;
pub use ops::tree_ops::{
    AtRevision, NodeAndChildren, NodeView, PutNode, TxnAnswer, TxnOutcome, Written,
};
pub use ops::views::{SessionCounts, StateCounts};
pub use ops::{Consistency, Grant, NodeCounters, OpenedSession};
pub use raft::typ::{Member, NodeId};
/// openraft's wiring, for the simulator (`internals` feature).
#[cfg(feature = "internals")]
pub use raft::typ::{Proposal, Raft, Reply, TypeConfig};
pub use raftlock_api as api;
pub use raftlock_core as core;
pub use raftlock_tls::{ClientAuth, TlsSettings};
pub use replica::membership::{MembershipMember, MembershipView};
pub use status::{ClusterStatus, MemberStatus};
pub use transport::peer_guard::PeerState;

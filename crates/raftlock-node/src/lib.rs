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

mod acquire;
mod backup;
mod config;
mod disk_space;
mod door_addrs;
mod embed;
mod error;
mod founding;
#[doc(hidden)]
pub mod fuzzing;
mod history;
mod hold_offs;
mod identity;
#[cfg(feature = "internals")]
mod internals;
pub mod join;
mod kinds;
mod kv_ops;
mod leader;
mod local;
mod member_tls;
mod network;
mod node;
mod observe;
mod ops;
mod peer_guard;
mod pipe;
mod primitives;
mod queue_ops;
mod quorum;
mod replica;
mod routes;
mod shutdown;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod simulation;
mod snapshot_file;
mod state_machine;
mod stats;
mod status;
mod storage_watch;
mod tracker;
mod tree_ops;
mod typ;
mod views;
mod waiters;

pub use acquire::AcquireOptions;
pub use backup::{
    restore, Backup, BackupError, BackupHeader, BackupSummary, RestoreError, Restored,
    BACKUP_FORMAT,
};
pub use config::{check_address, BindAddrs, ClusterSettings, ConfigError, NodeConfig};
pub use door_addrs::{all_door_addrs, door_addrs, DoorAddrs};
pub use error::{core_code, MembershipError, NodeError};
pub use history::{Change, ChangeHistory, Compacted};
pub use identity::{Identity, IdentityError};
pub use kv_ops::{KvEvents, KvStats, LeaseView, MAX_LEASE_ID};
pub use local::LocalCluster;
pub use node::{Node, StartError};
pub use observe::ElectionChanges;
pub use ops::{Consistency, Grant, NodeCounters, OpenedSession};
pub use peer_guard::PeerState;
pub use primitives::MultiGrant;
pub use queue_ops::Enqueue;
pub use raftlock_api as api;
pub use raftlock_core as core;
pub use raftlock_tls::{ClientAuth, TlsSettings};
pub use replica::membership::{MembershipMember, MembershipView};
pub use snapshot_file::SnapshotFileError;
pub use status::{ClusterStatus, MemberStatus};
pub use tree_ops::{
    AtRevision, NodeAndChildren, NodeView, PutNode, TxnAnswer, TxnOutcome, Written,
};
pub use typ::{Member, NodeId};
/// openraft's wiring, for the simulator (`internals` feature).
#[cfg(feature = "internals")]
pub use typ::{Proposal, Raft, Reply, TypeConfig};
pub use views::{SessionCounts, StateCounts};

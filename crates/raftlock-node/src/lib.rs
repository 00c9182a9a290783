//! # raftlock-node
//!
//! One raftlock replica: openraft over a sled log (`raftlock-storage`),
//! the core state machine in memory with snapshots on disk, an HTTP
//! transport between nodes, the leader's in-memory session tracker, and a
//! registry that wakes only the successor of each deleted lock node.
//!
//! Embed it: build a [`NodeConfig`] (or load a cluster file), call
//! [`Node::start`] inside your tokio runtime, and use the handle's
//! operations ([`Node::open_session`], [`Node::acquire`], …). Three copies
//! of the application form the cluster. The HTTP API crate serves the same
//! operations to other languages.

mod config;
mod error;
mod leader;
mod local;
mod network;
mod node;
mod ops;
mod proposer;
mod routes;
mod rpc;
mod snapshot_file;
mod state_machine;
pub mod tracker;
mod typ;
pub mod waiters;

pub use config::{ClusterSettings, ConfigError, NodeConfig};
pub use error::NodeError;
pub use local::LocalCluster;
pub use node::{Node, StartError};
pub use ops::{ClusterStatus, Consistency, Grant, MemberStatus, NodeCounters, OpenedSession};
pub use raftlock_core as core;
pub use typ::{Member, NodeId, Proposal, Raft, Reply, TypeConfig};

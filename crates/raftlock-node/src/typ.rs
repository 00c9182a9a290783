//! The openraft type configuration: what travels in the log and back.

use std::io::Cursor;

use raftlock_core::{Applied, Command};
use serde::{Deserialize, Serialize};

/// A cluster member's addresses, as recorded in the Raft membership.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// Client HTTP API (`host:port`).
    pub api_addr: String,
    /// Internal Raft and forwarding routes (`host:port`).
    pub raft_addr: String,
}

impl std::fmt::Display for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "api {} raft {}", self.api_addr, self.raft_addr)
    }
}

/// One log entry's payload: commands proposed together (concurrent
/// writes coalesced by a node's proposer, see `proposer`), applied in
/// order, each on its own: one failing leaves the others standing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal(pub Vec<Command>);

impl Proposal {
    pub fn one(command: Command) -> Self {
        Proposal(vec![command])
    }
}

impl std::fmt::Display for Proposal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} command(s)", self.0.len())
    }
}

/// What applying one log entry returned: the state machine's outcome for
/// each command of its proposal, in order; empty for Raft's own entries
/// (blank, membership).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reply(pub Vec<Applied>);

openraft::declare_raft_types!(
    /// raftlock's Raft types.
    pub TypeConfig:
        D = Proposal,
        R = Reply,
        NodeId = u64,
        Node = Member,
        SnapshotData = Cursor<Vec<u8>>,
);

pub type NodeId = u64;
pub type Raft = openraft::Raft<TypeConfig>;
pub type LogId = openraft::LogId<NodeId>;
pub type StoredMembership = openraft::StoredMembership<NodeId, Member>;
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, Member>;
pub type StorageError = openraft::StorageError<NodeId>;

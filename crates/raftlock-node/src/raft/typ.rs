//! The openraft type configuration: what travels in the log and back.

use std::io::Cursor;

use raftlock_core::{Applied, Command};
use serde::{Deserialize, Serialize};

/// A cluster member as recorded in the Raft membership: its addresses and
/// which incarnation of its data directory is the member (see
/// `identity`). Part of the log and snapshot encoding.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// Client HTTP API (`host:port`).
    pub api_addr: String,
    /// Internal Raft and forwarding routes (`host:port`).
    pub raft_addr: String,
    /// The member's data-directory incarnation; 0 where not known yet (a
    /// config file's entry, a join request): the founder and the leader
    /// fill it in from the member itself before it enters the membership.
    pub incarnation: u64,
}

impl Member {
    /// A member at these addresses, incarnation not known yet.
    pub fn new(api_addr: impl Into<String>, raft_addr: impl Into<String>) -> Self {
        Member {
            api_addr: api_addr.into(),
            raft_addr: raft_addr.into(),
            incarnation: 0,
        }
    }
}

impl std::fmt::Display for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "api {} raft {}", self.api_addr, self.raft_addr)?;
        if self.incarnation != 0 {
            write!(f, " incarnation {:016x}", self.incarnation)?;
        }
        Ok(())
    }
}

/// One log entry's payload: commands proposed together (concurrent
/// writes coalesced by a node's proposer, see `proposer`), applied in
/// order, each on its own: one failing leaves the others standing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal(pub Vec<Command>);

impl Proposal {
    /// A proposal of a single command.
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

/// A member's id, as in the cluster file.
pub type NodeId = u64;
/// The openraft instance with raftlock's types.
pub type Raft = openraft::Raft<TypeConfig>;
pub type LogId = openraft::LogId<NodeId>;
pub type StoredMembership = openraft::StoredMembership<NodeId, Member>;
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, Member>;
pub type StorageError = openraft::StorageError<NodeId>;

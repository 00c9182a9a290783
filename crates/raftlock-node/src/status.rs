//! The cluster as this member sees it: roles, term, log and apply
//! positions, and health, for `GET /v1/cluster`, `/v1/health`, the CLI's
//! `status` and metrics.

use serde::{Deserialize, Serialize};

use crate::node::Node;
use crate::raft::typ::NodeId;

/// A member as this node sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberStatus {
    /// The member's id.
    pub id: NodeId,
    /// Its client API address (`host:port`).
    pub api_addr: String,
    /// Its Raft address (`host:port`).
    pub raft_addr: String,
    /// `leader`, `follower`, `candidate` or `learner`, as this node knows.
    pub role: String,
    /// False for a learner (being added: receives the log, does not vote).
    pub voter: bool,
    /// Known for this node, and for followers when this node leads.
    pub applied_index: Option<u64>,
}

/// The cluster as this node sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterStatus {
    /// The answering node's id.
    pub id: NodeId,
    /// The leader it knows, if any.
    pub leader_id: Option<NodeId>,
    /// Its current Raft term.
    pub term: u64,
    /// Its last log index (`None` before any entry).
    pub last_log_index: Option<u64>,
    /// The last log index applied to its state machine.
    pub applied_index: u64,
    /// Every member, as it sees them.
    pub members: Vec<MemberStatus>,
}

impl Node {
    /// The cluster as this node sees it.
    pub fn status(&self) -> ClusterStatus {
        let m = self.replica.raft.metrics().borrow().clone();
        let applied_index = m.last_applied.map_or(0, |l| l.index);
        let matched = m.replication.clone().unwrap_or_default();
        let voters: std::collections::BTreeSet<NodeId> =
            m.membership_config.membership().voter_ids().collect();
        let members = m
            .membership_config
            .nodes()
            .map(|(id, member)| {
                let role = if !voters.contains(id) {
                    "learner"
                } else if Some(*id) == m.current_leader {
                    "leader"
                } else if *id == m.id {
                    if m.state == openraft::ServerState::Candidate {
                        "candidate"
                    } else {
                        "follower"
                    }
                } else {
                    "follower"
                };
                MemberStatus {
                    id: *id,
                    api_addr: member.api_addr.clone(),
                    raft_addr: member.raft_addr.clone(),
                    role: role.to_string(),
                    voter: voters.contains(id),
                    applied_index: if *id == m.id {
                        Some(applied_index)
                    } else {
                        matched.get(id).cloned().flatten().map(|l| l.index)
                    },
                }
            })
            .collect();
        ClusterStatus {
            id: m.id,
            leader_id: m.current_leader,
            term: m.current_term,
            last_log_index: m.last_log_index,
            applied_index,
            members,
        }
    }

    /// True when a leader is known and this replica has applied what it
    /// has in its log.
    pub fn is_healthy(&self) -> bool {
        if self.replaced().is_some() {
            return false;
        }
        let m = self.replica.raft.metrics().borrow().clone();
        m.current_leader.is_some() && m.last_applied.map(|l| l.index) >= m.last_log_index
    }
}

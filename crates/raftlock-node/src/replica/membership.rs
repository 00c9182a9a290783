//! Membership changes at the leader: add a member (as a learner, then,
//! once it has caught up, promoted to voter through openraft's joint
//! consensus) and remove one. Both reach the leader through the one
//! leader path (`at_leader`), like writes.
//!
//! Every step is bounded in time, as everything on the leader path is:
//! the catch-up of a new member by [`CATCH_UP_WAIT`], each membership
//! commit by the leader wait. A change that fails half-way leaves a state
//! that the same request, retried, completes: a learner that did not
//! catch up in time stays a learner and keeps receiving the log.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{ClientWriteError, RaftError};
use openraft::{ChangeMembers, ServerState};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::{PeerIdentity, Replica};
use crate::config::check_address;
use crate::error::NodeError;
use crate::raft::typ::{Member, NodeId, StoredMembership};
use crate::transport::network::route;

/// Longest a new member may take to catch up (receive a snapshot and the
/// log after it) before the add answers [`MembershipError::NotCaughtUp`].
/// The member stays a learner and keeps catching up; the same add,
/// retried, promotes it.
pub(crate) const CATCH_UP_WAIT: Duration = Duration::from_secs(60);

/// Longest the leader waits for a member to be added to say who it is.
const IDENTITY_WAIT: Duration = Duration::from_secs(2);

/// Why a membership change was refused. Nothing changed unless said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum MembershipError {
    /// The id is already a member with other addresses. Addresses are
    /// part of a member's identity: remove it first, or use a new id.
    #[error("node {id} is already a member at {existing}; remove it first or use another id")]
    MemberExists {
        /// The id asked for.
        id: NodeId,
        /// The addresses it is a member at.
        existing: String,
    },
    /// Removing an id the membership does not have.
    #[error("node {id} is not a member")]
    UnknownMember {
        /// The id asked for.
        id: NodeId,
    },
    /// Removing the only voter would leave nobody to decide anything.
    #[error("node {id} is the last voter; a cluster keeps at least one")]
    LastVoter {
        /// The only voter.
        id: NodeId,
    },
    /// Another change is still being committed; retry shortly.
    #[error("another membership change is in progress; retry: {0}")]
    InProgress(String),
    /// The new member did not catch up within the wait. It stays a
    /// learner (it receives the log but does not vote); retrying the add
    /// promotes it once it has caught up.
    #[error("node {id} did not catch up within {waited_ms} ms; it stays a learner, retry the add to promote it (is its raft_addr reachable from the leader?)")]
    NotCaughtUp {
        /// The member being added.
        id: NodeId,
        /// How long the leader waited for it.
        waited_ms: u64,
    },
    /// The request itself is malformed (a bad address).
    #[error("{0}")]
    Invalid(String),
    /// This member's data directory is not the incarnation the cluster's
    /// membership names for it (it was wiped): it serves nothing until it
    /// is removed and added again. The message names the fix.
    #[error("{message}")]
    Replaced {
        /// This member's id.
        id: NodeId,
        /// What happened and the fix.
        message: String,
    },
    /// The member to add belongs to another cluster (its data directory
    /// says so).
    #[error("{message}")]
    OtherCluster {
        /// The member to add.
        id: NodeId,
        /// Which cluster it belongs to.
        message: String,
    },
    /// The member to add did not answer at its raft_addr, so its identity
    /// (incarnation) cannot be recorded; nothing changed.
    #[error("node {id} did not answer at its raft_addr: {message}")]
    Unreachable {
        /// The member to add.
        id: NodeId,
        /// Why it could not be reached.
        message: String,
    },
}

/// One member of the Raft membership.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MembershipMember {
    /// The member's id.
    pub id: NodeId,
    /// Its client API address (`host:port`).
    pub api_addr: String,
    /// Its Raft address (`host:port`), which the leader dials.
    pub raft_addr: String,
    /// Which incarnation of the member's data directory the membership
    /// names (docs/design.md, "Member identity").
    pub incarnation: u64,
    /// A voter counts for elections and commits; a learner only receives
    /// the log (a member being added, until it has caught up).
    pub voter: bool,
}

/// The membership as one member knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MembershipView {
    /// Log index of the membership entry (0 before any).
    pub log_index: u64,
    /// True while a joint configuration (old and new voters) is in force.
    pub joint: bool,
    /// Voters and learners, by id.
    pub members: Vec<MembershipMember>,
}

impl MembershipView {
    pub(crate) fn of(stored: &StoredMembership) -> Self {
        let m = stored.membership();
        let voters: BTreeSet<NodeId> = m.voter_ids().collect();
        MembershipView {
            log_index: stored.log_id().map_or(0, |l| l.index),
            joint: m.get_joint_config().len() > 1,
            members: m
                .nodes()
                .map(|(id, node)| MembershipMember {
                    id: *id,
                    api_addr: node.api_addr.clone(),
                    raft_addr: node.raft_addr.clone(),
                    incarnation: node.incarnation,
                    voter: voters.contains(id),
                })
                .collect(),
        }
    }

    /// The ids of the voters.
    pub fn voters(&self) -> Vec<NodeId> {
        self.members
            .iter()
            .filter(|m| m.voter)
            .map(|m| m.id)
            .collect()
    }
}

fn refused(e: MembershipError) -> NodeError {
    NodeError::Membership(e)
}

impl Replica {
    /// The membership this member has (committed or not).
    pub fn membership_view(&self) -> MembershipView {
        MembershipView::of(&self.raft.metrics().borrow().membership_config)
    }

    /// Adds `id` at `member`'s addresses as a voter (leader only). An id
    /// that already is a voter at the same addresses and incarnation is
    /// answered as done, so a retry (or a restarted `--join`) is harmless.
    /// The incarnation is asked of the member itself.
    pub(crate) async fn add_member_here(
        &self,
        id: NodeId,
        mut member: Member,
    ) -> Result<MembershipView, NodeError> {
        for (key, addr) in [
            ("api_addr", &member.api_addr),
            ("raft_addr", &member.raft_addr),
        ] {
            check_address(addr)
                .map_err(|m| refused(MembershipError::Invalid(format!("{key}: {m}"))))?;
        }
        let _one_at_a_time = self.membership_change.lock().await;
        self.refuse_unless_leading()?;
        let current = self.membership_view();
        let listed = current.members.iter().find(|m| m.id == id);
        if let Some(m) =
            listed.filter(|m| m.api_addr != member.api_addr || m.raft_addr != member.raft_addr)
        {
            return Err(refused(MembershipError::MemberExists {
                id,
                existing: format!("api {} raft {}", m.api_addr, m.raft_addr),
            }));
        }
        member.incarnation = self.incarnation_of(id, &member).await?;
        match listed {
            Some(m) if m.incarnation != member.incarnation => {
                return Err(refused(MembershipError::MemberExists {
                    id,
                    existing: format!(
                        "api {} raft {} as incarnation {:016x}, while the member there now is incarnation {:016x} (its data was wiped)",
                        m.api_addr, m.raft_addr, m.incarnation, member.incarnation
                    ),
                }));
            }
            Some(m) if m.voter && !current.joint => return Ok(current),
            _ => {}
        }
        tracing::info!(id, %member, "adding a member: as a learner first");
        let raft = self.raft.current();
        let added = self
            .bounded_change(raft.add_learner(id, member, false))
            .await?;
        self.await_caught_up(id, added).await?;
        tracing::info!(id, "new member caught up; promoting it to voter");
        let voters = BTreeSet::from([id]);
        self.bounded_change(raft.change_membership(ChangeMembers::AddVoterIds(voters), false))
            .await?;
        Ok(self.membership_view())
    }

    /// Asks the member at `member.raft_addr` for its identity: the
    /// incarnation the membership will name. Refuses a member of another
    /// cluster, or one whose data directory is another member's.
    async fn incarnation_of(&self, id: NodeId, member: &Member) -> Result<u64, NodeError> {
        self.peers.learn(std::iter::once((&id, member)));
        let answer: PeerIdentity = self
            .peers
            .call(id, route::IDENTITY, &(), IDENTITY_WAIT)
            .await
            .map_err(|e| {
                refused(MembershipError::Unreachable {
                    id,
                    message: e.to_string(),
                })
            })?;
        let theirs = answer.identity;
        if theirs.member_id != id {
            return Err(refused(MembershipError::Invalid(format!(
                "the member at raft_addr {} is member {}, not {id}",
                member.raft_addr, theirs.member_id
            ))));
        }
        let ours = self.guard.identity.get().cluster_id;
        if let (Some(theirs), Some(ours)) = (theirs.cluster_id, ours) {
            if theirs != ours {
                return Err(refused(MembershipError::OtherCluster {
                    id,
                    message: format!(
                        "node {id} belongs to cluster {:016x}, this cluster is {:016x}; wipe its data directory to add it here",
                        theirs, ours
                    ),
                }));
            }
        }
        Ok(theirs.incarnation)
    }

    /// Removes `id` (leader only). Removing the leader itself is allowed:
    /// openraft keeps it leading until the membership without it is
    /// committed, then it steps down and the others elect a leader.
    pub(crate) async fn remove_member_here(&self, id: NodeId) -> Result<MembershipView, NodeError> {
        let _one_at_a_time = self.membership_change.lock().await;
        self.refuse_unless_leading()?;
        let current = self.membership_view();
        let Some(target) = current.members.iter().find(|m| m.id == id) else {
            return Err(refused(MembershipError::UnknownMember { id }));
        };
        let ids = BTreeSet::from([id]);
        let change = if target.voter {
            if current.voters() == [id] {
                return Err(refused(MembershipError::LastVoter { id }));
            }
            ChangeMembers::RemoveVoters(ids)
        } else {
            ChangeMembers::RemoveNodes(ids)
        };
        tracing::info!(id, "removing a member");
        // `retain: false`: a removed voter leaves the membership entirely
        // rather than staying on as a learner.
        let raft = self.raft.current();
        self.bounded_change(raft.change_membership(change, false))
            .await?;
        Ok(self.membership_view())
    }

    /// `NoLeader` unless this node leads, has a quorum, and is a voter in
    /// the newest membership it knows. The last check matters after this
    /// leader removed itself: until another member is elected, followers
    /// still forward to it, and openraft 0.9.25 panics its Raft core
    /// ("Only leader is allowed to call update_effective_membership()")
    /// when a removed leader is asked for another change.
    fn refuse_unless_leading(&self) -> Result<(), NodeError> {
        let voter = {
            let m = self.raft.metrics();
            let m = m.borrow();
            m.state == ServerState::Leader
                && m.membership_config
                    .membership()
                    .voter_ids()
                    .any(|v| v == self.id)
        };
        if !voter || self.leadership_lapsed() {
            return Err(NodeError::NoLeader);
        }
        Ok(())
    }

    /// Runs one openraft membership call, bounded by twice the leader wait
    /// (a change commits two entries: joint, then uniform). Returns the
    /// log index of the last entry it committed.
    async fn bounded_change<F>(&self, change: F) -> Result<u64, NodeError>
    where
        F: std::future::Future<
            Output = Result<
                openraft::raft::ClientWriteResponse<crate::raft::typ::TypeConfig>,
                RaftError<NodeId, ClientWriteError<NodeId, Member>>,
            >,
        >,
    {
        let wait = 2 * self.leader_wait();
        let outcome = tokio::time::timeout(wait, change).await.map_err(|_| {
            NodeError::OutcomeUnknown(format!(
                "membership change not committed within {} ms; it may still be (see GET /v1/cluster/members)",
                wait.as_millis()
            ))
        })?;
        match outcome {
            Ok(response) => Ok(response.log_id.index),
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_))) => {
                Err(NodeError::NoLeader)
            }
            Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(e))) => {
                use openraft::error::ChangeMembershipError as E;
                Err(refused(match e {
                    E::InProgress(e) => MembershipError::InProgress(e.to_string()),
                    other => MembershipError::Invalid(other.to_string()),
                }))
            }
            Err(RaftError::Fatal(e)) => {
                if self.shutdown.is_stopping() {
                    Err(NodeError::ShuttingDown)
                } else {
                    Err(NodeError::OutcomeUnknown(e.to_string()))
                }
            }
        }
    }

    /// Waits until the leader has replicated to learner `id` at least up
    /// to `index` (the entry that added it: everything before it, by log
    /// or snapshot), so that promoting it does not stall commits.
    async fn await_caught_up(&self, id: NodeId, index: u64) -> Result<(), NodeError> {
        let deadline = Instant::now() + CATCH_UP_WAIT;
        let mut metrics = self.raft.metrics();
        loop {
            {
                let m = metrics.borrow_and_update();
                if m.state != ServerState::Leader {
                    return Err(NodeError::NoLeader);
                }
                let matched = m
                    .replication
                    .as_ref()
                    .and_then(|r| r.get(&id).cloned().flatten())
                    .map(|l| l.index);
                if matched.is_some_and(|i| i >= index) {
                    return Ok(());
                }
            }
            tokio::select! {
                changed = metrics.changed() => if changed.is_err() { return Err(NodeError::ShuttingDown) },
                _ = tokio::time::sleep_until(deadline) => {
                    return Err(refused(MembershipError::NotCaughtUp {
                        id,
                        waited_ms: CATCH_UP_WAIT.as_millis() as u64,
                    }))
                }
                _ = self.shutdown.stopped() => return Err(NodeError::ShuttingDown),
            }
        }
    }
}

/// Keeps the peer client's address book in step with the membership this
/// node knows (from its log or snapshot, and from the leader), so a
/// follower can forward to, and vote with, members added at run time.
/// Removed members are kept: a stale address is harmless, and a leader
/// removed from the membership may still be the one to forward to.
pub(crate) async fn follow_membership(replica: Arc<Replica>) {
    let mut metrics = replica.raft.metrics();
    loop {
        {
            let m = metrics.borrow_and_update();
            replica
                .peers
                .learn(m.membership_config.membership().nodes());
        }
        tokio::select! {
            changed = metrics.changed() => if changed.is_err() { return },
            _ = replica.shutdown.stopped() => return,
        }
    }
}

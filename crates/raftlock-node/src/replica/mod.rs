//! This member's part in the cluster: the Raft handle, the one path by
//! which anything reaches the leader ([`at_leader`]), the proposer that
//! batches writes onto that path (and [`keepalives`], which groups
//! keepalives), and what the leader answers itself ([`keepalive`]).
//!
//! Every operation of the node reaches the leader through here, bounded in
//! time: it ends with an answer, `NoLeader` (certainly not applied) or
//! `OutcomeUnknown` (may have been applied), never by hanging.

pub(crate) mod at_leader;
pub(crate) mod group;
pub(crate) mod keepalive;
pub(crate) mod keepalives;
pub(crate) mod membership;
pub(crate) mod proposer;
pub(crate) mod raft_slot;

use std::sync::Arc;
use std::time::Duration;

use openraft::ServerState;
use tokio::time::Instant;

use crate::config::NodeConfig;
use crate::disk::identity::Identity;
use crate::error::NodeError;
use crate::raft::state_machine::Shared;
use crate::raft::typ::NodeId;
use crate::sessions::quorum::{Leadership, QuorumClock};
use crate::shutdown::Shutdown;
use crate::transport::network::PeerClient;
use crate::transport::peer_guard::PeerGuard;
use proposer::Proposer;
use raft_slot::RaftSlot;

/// Pause between attempts while a known leader cannot be reached, so a
/// dead leader is not hammered until the election settles.
const RETRY_PAUSE: Duration = Duration::from_millis(20);

/// One member's Raft side. Shared by the node's handle, its background
/// tasks and its internal routes.
pub(crate) struct Replica {
    pub id: NodeId,
    pub config: Arc<NodeConfig>,
    /// The current Raft instance and its log store's durability (rebuilt
    /// in place after a full disk, see `storage_watch.rs`).
    pub raft: RaftSlot,
    /// The applied state, waiters and session tracker.
    pub shared: Arc<Shared>,
    /// Forwards operations to the leader.
    pub peers: PeerClient,
    /// Coalesces this node's writes into proposals.
    pub proposer: Proposer,
    /// Coalesces this node's keepalives into requests to the leader.
    pub keepalives: keepalives::Keepalives,
    /// When peers last accepted this node's leadership (fed by the
    /// transport); what a leader's answers from memory rest on.
    pub quorum: Arc<QuorumClock>,
    /// Serialises membership changes on this leader: openraft refuses a
    /// change while another is uncommitted, so queue rather than refuse.
    pub membership_change: tokio::sync::Mutex<()>,
    /// This member's identity and the check on its Raft traffic.
    pub guard: Arc<PeerGuard>,
    pub shutdown: Shutdown,
}

/// What a member answers on its identity route: who its data directory
/// is, and whether it already has a membership (founding asks both).
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub(crate) struct PeerIdentity {
    pub identity: Identity,
    pub initialized: bool,
}

impl Replica {
    /// The current leader as this node sees it.
    pub fn leader(&self) -> Option<NodeId> {
        self.raft.metrics().borrow().current_leader
    }

    /// Longest this node waits for a leader (to be elected, or to answer).
    pub fn leader_wait(&self) -> Duration {
        self.config.leader_wait()
    }

    /// Longest a leader waits for a quorum to confirm its leadership
    /// before it answers `NoLeader`: a few heartbeat rounds, and never
    /// past the point where followers start an election.
    fn confirm_wait(&self) -> Duration {
        let s = &self.config.settings;
        Duration::from_millis((4 * s.heartbeat_interval_ms).max(s.election_timeout_min_ms))
    }

    /// Waits until a quorum has accepted this node's leadership through
    /// requests sent at or after `since`. `NoLeader` if this node stops
    /// leading, or no quorum answers within a few heartbeat rounds: an
    /// isolated leader never confirms, so it never answers from memory.
    pub async fn confirm_leadership(&self, since: Instant) -> Result<(), NodeError> {
        let deadline = since + self.confirm_wait();
        let mut metrics = self.raft.metrics();
        let mut recorded = self.quorum.subscribe();
        loop {
            {
                let m = metrics.borrow_and_update();
                if m.state != ServerState::Leader {
                    return Err(NodeError::NoLeader);
                }
                let leadership = Leadership {
                    me: self.id,
                    vote: &m.vote,
                    membership: m.membership_config.membership(),
                };
                let confirmed = self.quorum.confirmed_at(&leadership, Instant::now());
                if confirmed.is_some_and(|t| t >= since) {
                    return Ok(());
                }
            }
            tokio::select! {
                _ = recorded.changed() => {}
                _ = metrics.changed() => {}
                _ = tokio::time::sleep_until(deadline) => return Err(NodeError::NoLeader),
                _ = self.shutdown.stopped() => return Err(NodeError::ShuttingDown),
            }
        }
    }

    /// True when this node leads but no quorum has accepted its leadership
    /// for longer than a follower waits before campaigning: it is cut off,
    /// and a write proposed here would wait for a quorum that is not
    /// there (openraft 0.9 does not step such a leader down).
    pub fn leadership_lapsed(&self) -> bool {
        // Every write asks: read the metrics in place rather than cloning
        // them (membership maps included) each time.
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        if m.state != ServerState::Leader {
            return false;
        }
        let leadership = Leadership {
            me: self.id,
            vote: &m.vote,
            membership: m.membership_config.membership(),
        };
        let now = Instant::now();
        let lapse = Duration::from_millis(self.config.settings.election_timeout_max_ms);
        match self.quorum.confirmed_at(&leadership, now) {
            Some(t) => now.saturating_duration_since(t) > lapse,
            // Newly elected, no heartbeat answered yet: the election itself
            // was a quorum's answer.
            None => false,
        }
    }

    /// Waits until the known leader changes, a short pause passes, or the
    /// deadline; fails with `NoLeader` at the deadline.
    pub async fn await_leader_change(&self, deadline: Instant) -> Result<(), NodeError> {
        let mut metrics = self.raft.metrics();
        let before = metrics.borrow_and_update().current_leader;
        let pause_end = Instant::now() + RETRY_PAUSE;
        tokio::select! {
            _ = metrics.wait_for(|m| m.current_leader != before && m.current_leader.is_some()) => {}
            _ = tokio::time::sleep_until(pause_end.min(deadline)) => {}
            _ = self.shutdown.stopped() => return Err(NodeError::ShuttingDown),
        }
        if Instant::now() >= deadline {
            return Err(NodeError::NoLeader);
        }
        Ok(())
    }

    /// Waits until this replica has applied `index`.
    pub async fn await_applied(&self, index: u64, deadline: Instant) -> Result<(), NodeError> {
        let mut applied = self.shared.applied_index.subscribe();
        tokio::select! {
            result = applied.wait_for(|a| *a >= index) => result.map(|_| ()).map_err(|_| NodeError::ShuttingDown),
            _ = tokio::time::sleep_until(deadline) => Err(NodeError::NoLeader),
            _ = self.shutdown.stopped() => Err(NodeError::ShuttingDown),
        }
    }

    /// True once the membership is known (the cluster was initialized).
    pub(crate) fn peer_identity(&self) -> PeerIdentity {
        PeerIdentity {
            identity: self.guard.identity.get(),
            initialized: self.is_initialized_now(),
        }
    }

    /// `MemberReplaced` while the cluster names another incarnation of
    /// this member: it serves nothing (its state is not the cluster's)
    /// until it is removed and added again.
    pub(crate) fn refuse_if_replaced(&self) -> Result<(), NodeError> {
        match self.guard.replaced_message() {
            Some(message) => Err(NodeError::Membership(
                crate::error::MembershipError::Replaced {
                    id: self.id,
                    message,
                },
            )),
            None => Ok(()),
        }
    }

    /// `StorageFailed` (`DiskFull` for `ENOSPC`) once a durability barrier
    /// or a write of this member's log failed: nothing this member writes can be trusted to be on disk
    /// any more (the failure is sticky, see `raftlock_storage::DurableIndex`),
    /// so it takes part in no write, read index or keepalive.
    pub(crate) fn refuse_if_storage_failed(&self) -> Result<(), NodeError> {
        self.raft.durable().current().map(|_| ()).map_err(|e| {
            if e.is_out_of_space() {
                NodeError::DiskFull(e.to_string())
            } else {
                NodeError::StorageFailed(e.to_string())
            }
        })
    }

    pub fn is_initialized_now(&self) -> bool {
        self.raft
            .metrics()
            .borrow()
            .membership_config
            .nodes()
            .next()
            .is_some()
    }
}

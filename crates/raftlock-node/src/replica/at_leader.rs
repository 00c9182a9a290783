//! The one path to the leader. Writes, keepalives and read indexes are all
//! answered by the leader; a follower forwards them over one internal
//! route. Every step is bounded in time, and every failure says whether the
//! request can have taken effect:
//!
//! - `NoLeader`: certainly not applied (no leader known, the request never
//!   reached it, or the leader refused before proposing). Always retried
//!   here until the leader wait passes.
//! - `OutcomeUnknown`: the leader may have applied it (sent but no answer,
//!   or proposed but not committed in time). Retried here only when
//!   applying twice is harmless.

use std::future::Future;
use std::time::Duration;

use openraft::error::{ClientWriteError, RaftError};
use raftlock_core::{Applied, Command, Effects, SessionId};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::membership::{MembershipView, CATCH_UP_WAIT};
use super::Replica;
use crate::error::NodeError;
use crate::raft::typ::{Member, NodeId, Proposal, Reply};
use crate::transport::network::{route, CallError};

/// What a follower asks the leader to do.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum LeaderRequest {
    /// Commit these commands as one log entry.
    Write(Proposal),
    /// Renew this session (see `keepalive`).
    Keepalive(SessionId),
    /// The leader's read index.
    ReadIndex,
    /// Add this member (learner, caught up, then voter; `membership`).
    AddMember { id: NodeId, member: Member },
    /// Remove this member.
    RemoveMember { id: NodeId },
    /// Renew these sessions (keepalives that queued together on a
    /// follower, `keepalives.rs`). Last, so the variants before it keep
    /// their encoding: a lone keepalive still travels as `Keepalive`.
    Keepalives(Vec<SessionId>),
}

impl LeaderRequest {
    /// How long a follower waits for the leader's answer: a little longer
    /// than the leader's own bound, so its answer (an unknown outcome,
    /// with its reason) arrives rather than our timeout.
    fn answer_within(&self, leader_wait: Duration) -> Duration {
        match self {
            // A new member's catch-up, then two membership commits.
            LeaderRequest::AddMember { .. } => CATCH_UP_WAIT + 3 * leader_wait,
            LeaderRequest::RemoveMember { .. } => 3 * leader_wait,
            _ => leader_wait + leader_wait / 4,
        }
    }
}

/// The leader's answer to a [`LeaderRequest`] of the same kind.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum LeaderAnswer {
    /// The entry's log index and one result per command.
    Written { index: u64, reply: Reply },
    /// The session's TTL, restarted.
    KeptAlive { ttl_ms: u64 },
    /// Every write acknowledged before the request is at or below it.
    ReadIndex(u64),
    /// The membership after a change.
    Membership(MembershipView),
    /// One result (the TTL) per session of a `Keepalives`, in order.
    KeptAliveEach(Vec<Result<u64, NodeError>>),
}

fn mismatch(answer: LeaderAnswer) -> NodeError {
    NodeError::internal(format!(
        "the leader answered a different request: {answer:?}"
    ))
}

impl Replica {
    /// Retries `attempt` until it succeeds, fails for good, or the leader
    /// wait passes: `NoLeader` always (nothing was applied), an unknown
    /// outcome only when `idempotent`.
    pub async fn at_leader<T, F, Fut>(
        &self,
        idempotent: bool,
        mut attempt: F,
    ) -> Result<T, NodeError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, NodeError>>,
    {
        self.refuse_if_replaced()?;
        self.refuse_if_storage_failed()?;
        let deadline = Instant::now() + self.leader_wait();
        loop {
            match attempt().await {
                Err(NodeError::NoLeader) if Instant::now() < deadline => {}
                // The leader's disk failed and it refused before proposing
                // (nothing applied); it is stepping down: wait for the next.
                Err(NodeError::StorageFailed(_) | NodeError::DiskFull(_))
                    if Instant::now() < deadline && self.refuse_if_storage_failed().is_ok() => {}
                // A lost answer (e.g. a pooled connection that closed under
                // the request) is resent only when applying twice is harmless.
                Err(NodeError::OutcomeUnknown(_)) if idempotent && Instant::now() < deadline => {}
                other => return other,
            }
            self.await_leader_change(deadline).await?;
        }
    }

    /// One attempt: answered here when this node leads, else forwarded to
    /// the leader it knows.
    pub async fn once(&self, request: LeaderRequest) -> Result<LeaderAnswer, NodeError> {
        match self.leader() {
            Some(leader) if leader == self.id => self.answer_here(request).await,
            Some(leader) => self.forward(leader, &request).await,
            None => Err(NodeError::NoLeader),
        }
    }

    /// Answers `request` as the leader (the internal route's handler too).
    pub async fn answer_here(&self, request: LeaderRequest) -> Result<LeaderAnswer, NodeError> {
        // A leader whose disk failed could not make the write durable, and
        // must not confirm reads or keepalives from a state it is leaving.
        self.refuse_if_storage_failed()?;
        match request {
            LeaderRequest::Write(proposal) => {
                let (index, reply) = self.write_here(proposal).await?;
                Ok(LeaderAnswer::Written { index, reply })
            }
            LeaderRequest::Keepalive(id) => {
                let ttl_ms = self.keepalive_here(id).await?;
                Ok(LeaderAnswer::KeptAlive { ttl_ms })
            }
            LeaderRequest::Keepalives(ids) => Ok(LeaderAnswer::KeptAliveEach(
                self.keepalive_many_here(&ids).await,
            )),
            LeaderRequest::ReadIndex => self.read_index_here().await.map(LeaderAnswer::ReadIndex),
            LeaderRequest::AddMember { id, member } => self
                .add_member_here(id, member)
                .await
                .map(LeaderAnswer::Membership),
            LeaderRequest::RemoveMember { id } => self
                .remove_member_here(id)
                .await
                .map(LeaderAnswer::Membership),
        }
    }

    /// Commits `command` through whichever node leads (in the next
    /// proposal of this node's proposer). Returns the log index and
    /// outcome.
    pub async fn write(&self, command: Command) -> Result<(u64, Applied), NodeError> {
        let idempotent = command.is_idempotent();
        self.at_leader(idempotent, || self.proposer.submit(self, command.clone()))
            .await
    }

    /// Renews a session at the leader (together with the keepalives
    /// queued with it on this node, `keepalives.rs`); returns its TTL.
    pub async fn keepalive(&self, id: SessionId) -> Result<u64, NodeError> {
        // A keepalive is idempotent: an unknown outcome is retried too.
        self.at_leader(true, || self.keepalives.submit(self, id))
            .await
    }

    /// One attempt to renew one session, by itself.
    pub(crate) async fn keepalive_once(&self, id: SessionId) -> Result<u64, NodeError> {
        match self.once(LeaderRequest::Keepalive(id)).await? {
            LeaderAnswer::KeptAlive { ttl_ms } => Ok(ttl_ms),
            other => Err(mismatch(other)),
        }
    }

    /// One attempt to renew `ids` together: one result per id, in order.
    pub(crate) async fn keepalive_many_once(
        &self,
        ids: Vec<SessionId>,
    ) -> Vec<Result<u64, NodeError>> {
        let count = ids.len();
        let all = |e: NodeError| -> Vec<Result<u64, NodeError>> {
            (0..count).map(|_| Err(e.clone())).collect()
        };
        match self.once(LeaderRequest::Keepalives(ids)).await {
            Ok(LeaderAnswer::KeptAliveEach(results)) if results.len() == count => results,
            Ok(other) => all(mismatch(other)),
            Err(e) => all(e),
        }
    }

    /// Adds (`Some(member)`) or removes (`None`) member `id` through the
    /// leader. An add is retried after a lost answer (adding a voter
    /// again at the same addresses is a no-op); a removal is not (its
    /// retry would be refused as an unknown member).
    pub async fn change_member(
        &self,
        id: NodeId,
        member: Option<Member>,
    ) -> Result<MembershipView, NodeError> {
        let idempotent = member.is_some();
        let request = match member {
            Some(member) => LeaderRequest::AddMember { id, member },
            None => LeaderRequest::RemoveMember { id },
        };
        let answer = self
            .at_leader(idempotent, || self.once(request.clone()))
            .await?;
        match answer {
            LeaderAnswer::Membership(view) => Ok(view),
            other => Err(mismatch(other)),
        }
    }

    /// Waits until this replica reflects every write acknowledged before
    /// the call (read index from the leader, then the local apply).
    pub async fn linearizable_barrier(&self) -> Result<(), NodeError> {
        if cfg!(feature = "inject-stale-reads") {
            // Deliberate bug, see Cargo.toml: the harness must catch it.
            return Ok(());
        }
        let deadline = Instant::now() + self.leader_wait();
        let answer = self
            .at_leader(true, || self.once(LeaderRequest::ReadIndex))
            .await?;
        match answer {
            LeaderAnswer::ReadIndex(index) => self.await_applied(index, deadline).await,
            other => Err(mismatch(other)),
        }
    }

    /// Proposes `proposal` on this node, which must be the leader, and
    /// waits for it to be committed and applied, at most the leader wait.
    pub async fn write_here(&self, proposal: Proposal) -> Result<(u64, Reply), NodeError> {
        self.refuse_if_storage_failed()?;
        if self.leadership_lapsed() {
            // Cut off from the quorum: refuse before appending anything, so
            // the caller may retry elsewhere.
            return Err(NodeError::NoLeader);
        }
        let started = std::time::Instant::now();
        let raft = self.raft.current();
        let write = raft.client_write(proposal);
        let outcome = match tokio::time::timeout(self.leader_wait(), write).await {
            Ok(outcome) => outcome,
            Err(_) => {
                return Err(NodeError::OutcomeUnknown(format!(
                    "not committed within {} ms; it may still be",
                    self.leader_wait().as_millis()
                )))
            }
        };
        match outcome {
            Ok(response) => {
                // Append, replication to a quorum with its fsyncs, apply.
                self.shared.stats.committed(started.elapsed());
                let mut reply = response.data;
                // Effects are for this replica's waiters, already told;
                // a forwarding follower applies the entry itself.
                for applied in &mut reply.0 {
                    applied.effects = Effects::default();
                }
                Ok((response.log_id.index, reply))
            }
            // openraft answers ForwardToLeader only for entries it never
            // appended or truncated: certainly not applied.
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_))) => {
                Err(NodeError::NoLeader)
            }
            Err(RaftError::APIError(e)) => Err(NodeError::internal(e)),
            Err(RaftError::Fatal(e)) => {
                if self.shutdown.is_stopping() {
                    Err(NodeError::ShuttingDown)
                } else {
                    Err(NodeError::OutcomeUnknown(e.to_string()))
                }
            }
        }
    }

    /// Proposes one command here (leader only) and returns its outcome.
    pub async fn write_one_here(&self, command: Command) -> Result<Applied, NodeError> {
        let (_, Reply(mut results)) = self.write_here(Proposal::one(command)).await?;
        results
            .pop()
            .ok_or_else(|| NodeError::internal("a command had no result"))
    }

    /// The leader's read index: every write acknowledged before this call
    /// is at or below it. openraft confirms leadership with a heartbeat
    /// round to a quorum (failing fast without one), then waits for this
    /// replica to apply up to the index: bounded by the leader wait.
    async fn read_index_here(&self) -> Result<u64, NodeError> {
        match tokio::time::timeout(
            self.leader_wait(),
            self.raft.current().ensure_linearizable(),
        )
        .await
        {
            Ok(Ok(log_id)) => Ok(log_id.map_or(0, |l| l.index)),
            Ok(Err(RaftError::APIError(_))) | Err(_) => Err(NodeError::NoLeader),
            Ok(Err(RaftError::Fatal(e))) => Err(NodeError::internal(e)),
        }
    }

    /// Sends `request` to `leader`, mapping transport failures: not sent =
    /// no leader (retry), sent but unanswered = outcome unknown.
    async fn forward(
        &self,
        leader: u64,
        request: &LeaderRequest,
    ) -> Result<LeaderAnswer, NodeError> {
        let timeout = request.answer_within(self.leader_wait());
        let answer: Result<Result<LeaderAnswer, NodeError>, CallError> = self
            .peers
            .call(leader, route::LEADER, request, timeout)
            .await;
        match answer {
            Ok(result) => result,
            Err(CallError::NotSent(_)) => Err(NodeError::NoLeader),
            Err(CallError::NoAnswer(m)) => Err(NodeError::OutcomeUnknown(m)),
        }
    }
}

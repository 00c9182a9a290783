//! Getting a command committed from any node, and reads that are
//! linearizable from any node: the leader does the work, a follower
//! forwards to it over the internal routes.

use std::time::Duration;

use openraft::error::{ClientWriteError, RaftError};
use raftlock_core::{Applied, Command, Effects, SessionId};
use tokio::time::Instant;

use crate::error::NodeError;
use crate::network::{route, CallError};
use crate::node::Inner;
use crate::typ::{NodeId, Proposal, Reply};

/// Pause between attempts while a known leader cannot be reached, so a
/// dead leader is not hammered until the election settles.
const RETRY_PAUSE: Duration = Duration::from_millis(20);

impl Inner {
    /// The current leader as this node sees it.
    pub fn leader(&self) -> Option<NodeId> {
        self.raft.metrics().borrow().current_leader
    }

    /// Proposes `proposal` on this node, which must be the leader.
    /// `NoLeader` means it certainly was not applied (openraft answers
    /// ForwardToLeader only for entries it never appended or truncated).
    pub async fn write_here(&self, proposal: Proposal) -> Result<(u64, Reply), NodeError> {
        match self.raft.client_write(proposal).await {
            Ok(response) => {
                let mut reply = response.data;
                // Effects are for this replica's waiters, already told;
                // a forwarding follower applies the entry itself.
                for applied in &mut reply.0 {
                    applied.effects = Effects::default();
                }
                Ok((response.log_id.index, reply))
            }
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_))) => {
                Err(NodeError::NoLeader)
            }
            Err(RaftError::APIError(e)) => Err(NodeError::internal(e)),
            Err(RaftError::Fatal(e)) => {
                if *self.stopping.borrow() {
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

    /// Commits `command` through whichever node leads (in the next
    /// proposal of this node's proposer), waiting up to the configured
    /// leader wait for one. Returns the log index and outcome.
    pub async fn write(&self, command: Command) -> Result<(u64, Applied), NodeError> {
        let deadline = Instant::now() + self.config.leader_wait();
        loop {
            match self.proposer.propose(self, command.clone()).await {
                Ok(done) => return Ok(done),
                Err(NodeError::NoLeader) if Instant::now() < deadline => {
                    self.await_leader_change(deadline).await?
                }
                // A lost answer (e.g. a pooled connection that closed under
                // the request) is resent only when applying twice is harmless.
                Err(NodeError::OutcomeUnknown(_))
                    if command.is_idempotent() && Instant::now() < deadline =>
                {
                    self.await_leader_change(deadline).await?
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Sends a forwarded operation to `leader`, mapping transport failures:
    /// not sent = no leader (retry), sent but unanswered = outcome unknown.
    pub(crate) async fn forward<Req: serde::Serialize, Resp: serde::de::DeserializeOwned>(
        &self,
        leader: NodeId,
        route: &str,
        request: &Req,
    ) -> Result<Resp, NodeError> {
        let answer: Result<Result<Resp, NodeError>, CallError> = self
            .peers
            .call(leader, route, request, self.config.leader_wait())
            .await;
        match answer {
            Ok(result) => result,
            Err(CallError::NotSent(_)) => Err(NodeError::NoLeader),
            Err(CallError::NoAnswer(m)) => Err(NodeError::OutcomeUnknown(m)),
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
            _ = self.stopped() => return Err(NodeError::ShuttingDown),
        }
        if Instant::now() >= deadline {
            return Err(NodeError::NoLeader);
        }
        Ok(())
    }

    /// A keepalive at the leader. A checkpointed session is renewed through
    /// the log before the keepalive is acknowledged (see `tracker`).
    pub async fn keepalive_here(&self, id: SessionId) -> Result<u64, NodeError> {
        if *self.stopping.borrow() {
            return Err(NodeError::ShuttingDown);
        }
        if !self.shared.tracker.is_leading() {
            // Not leader, or elected but still taking over deadlines.
            return Err(NodeError::NoLeader);
        }
        let lease = self.shared.read().session_lease(id).ok_or(NodeError::Core(
            raftlock_core::CoreError::SessionNotFound(id),
        ))?;
        if lease.checkpoint_remaining_ms.is_some() {
            self.write_one_here(Command::RenewSessions { ids: vec![id] })
                .await?
                .result?;
        }
        self.shared.tracker.keepalive(id, lease.ttl_ms);
        Ok(lease.ttl_ms)
    }

    /// Forwards a keepalive to the leader (or handles it here).
    pub async fn keepalive(&self, id: SessionId) -> Result<u64, NodeError> {
        let deadline = Instant::now() + self.config.leader_wait();
        loop {
            let outcome = match self.leader() {
                Some(leader) if leader == self.id => self.keepalive_here(id).await,
                Some(leader) => self.forward(leader, route::KEEPALIVE, &id).await,
                None => Err(NodeError::NoLeader),
            };
            match outcome {
                // A keepalive is idempotent: an unknown outcome is retried too.
                Err(NodeError::NoLeader | NodeError::OutcomeUnknown(_))
                    if Instant::now() < deadline =>
                {
                    self.await_leader_change(deadline).await?
                }
                other => return other,
            }
        }
    }

    /// The leader's read index: every write acknowledged before this call
    /// is at or below it.
    pub async fn read_index_here(&self) -> Result<u64, NodeError> {
        match self.raft.ensure_linearizable().await {
            Ok(log_id) => Ok(log_id.map_or(0, |l| l.index)),
            Err(RaftError::APIError(_)) => Err(NodeError::NoLeader),
            Err(RaftError::Fatal(e)) => Err(NodeError::internal(e)),
        }
    }

    /// Waits until this replica reflects every write acknowledged before
    /// the call (read index from the leader, then the local apply).
    pub async fn linearizable_barrier(&self) -> Result<(), NodeError> {
        if cfg!(feature = "inject-stale-reads") {
            // Deliberate bug, see Cargo.toml: the harness must catch it.
            return Ok(());
        }
        let deadline = Instant::now() + self.config.leader_wait();
        let index = loop {
            let outcome = match self.leader() {
                Some(leader) if leader == self.id => self.read_index_here().await,
                Some(leader) => self.forward(leader, route::READ_INDEX, &()).await,
                None => Err(NodeError::NoLeader),
            };
            match outcome {
                Ok(index) => break index,
                Err(NodeError::NoLeader | NodeError::OutcomeUnknown(_))
                    if Instant::now() < deadline =>
                {
                    self.await_leader_change(deadline).await?
                }
                Err(e) => return Err(e),
            }
        };
        self.await_applied(index, deadline).await
    }

    /// Waits until this replica has applied `index`.
    pub async fn await_applied(&self, index: u64, deadline: Instant) -> Result<(), NodeError> {
        let mut applied = self.shared.applied_index.subscribe();
        tokio::select! {
            result = applied.wait_for(|a| *a >= index) => result.map(|_| ()).map_err(|_| NodeError::ShuttingDown),
            _ = tokio::time::sleep_until(deadline) => Err(NodeError::NoLeader),
            _ = self.stopped() => Err(NodeError::ShuttingDown),
        }
    }
}

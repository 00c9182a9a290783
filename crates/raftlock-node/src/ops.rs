//! What an application (or the HTTP server) can do with a node: the same
//! operations the API exposes, in-process.

use std::sync::Arc;
use std::time::Duration;

use raftlock_core::{
    Acquisition, Command, CoreError, Effects, Position, QueueKind, Response, SessionId,
    StateMachine,
};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;
use tokio::time::Instant;

use crate::error::NodeError;
use crate::node::{Inner, Node};
use crate::typ::NodeId;

/// How fresh a read must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Consistency {
    /// Reflects every write acknowledged before the read (read index).
    #[default]
    Linearizable,
    /// This replica's state as it is; may lag the leader.
    Stale,
}

/// A granted lock or won election.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    pub node: String,
    pub fencing_token: u64,
    pub session: SessionId,
    /// Revision at which the grant happened.
    pub since_revision: u64,
}

/// A session as opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenedSession {
    pub id: SessionId,
    pub ttl_ms: u64,
}

/// A member as this node sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberStatus {
    pub id: NodeId,
    pub api_addr: String,
    pub raft_addr: String,
    pub role: String,
    /// Known for this node, and for followers when this node leads.
    pub applied_index: Option<u64>,
}

/// The cluster as this node sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterStatus {
    pub id: NodeId,
    pub leader_id: Option<NodeId>,
    pub term: u64,
    pub last_log_index: Option<u64>,
    pub committed_index: Option<u64>,
    pub applied_index: u64,
    pub members: Vec<MemberStatus>,
}

/// Counters for metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NodeCounters {
    /// Waiter wake-ups delivered since start.
    pub wakeups: u64,
    /// Waiter registrations right now.
    pub waiter_registrations: usize,
    /// Sessions with a deadline (non-zero on the leader only).
    pub tracked_sessions: usize,
    /// Proposals this node sent to the leader (or proposed as leader)
    /// for its clients' writes, and the commands they carried:
    /// `proposed_commands / proposals` is the batching factor.
    pub proposals: u64,
    pub proposed_commands: u64,
    /// Snapshots installed from the leader since start. Each replaced the
    /// whole state without per-node effects: whoever follows
    /// [`Node::subscribe`] must resync when this moves.
    pub snapshots_installed: u64,
}

fn unexpected(response: Response) -> NodeError {
    NodeError::Internal(format!("unexpected response {response:?}"))
}

impl Node {
    /// Opens a session; the TTL must lie within the configured bounds.
    pub async fn open_session(
        &self,
        owner: &str,
        ttl: Duration,
    ) -> Result<OpenedSession, NodeError> {
        let s = &self.inner.config.settings;
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        if ttl_ms < s.session_ttl_min_ms || ttl_ms > s.session_ttl_max_ms {
            return Err(CoreError::Invalid(format!(
                "ttl_ms must be between {} and {}",
                s.session_ttl_min_ms, s.session_ttl_max_ms
            ))
            .into());
        }
        let id = SessionId(rand::random());
        let command = Command::OpenSession {
            id,
            owner: owner.to_string(),
            ttl_ms,
        };
        match self.inner.write(command).await?.1.result? {
            Response::SessionOpened { id, ttl_ms } => Ok(OpenedSession { id, ttl_ms }),
            other => Err(unexpected(other)),
        }
    }

    /// Restarts the session's TTL; returns it.
    pub async fn keepalive(&self, id: SessionId) -> Result<Duration, NodeError> {
        self.inner.keepalive(id).await.map(Duration::from_millis)
    }

    /// Ends the session, releasing all its locks.
    pub async fn close_session(&self, id: SessionId) -> Result<(), NodeError> {
        self.inner
            .write(Command::CloseSession { id })
            .await?
            .1
            .result?;
        Ok(())
    }

    /// Queues the session in a lock (or election) and waits up to `wait`
    /// for the grant; `Duration::ZERO` is a try-lock. On timeout the node
    /// this call created is withdrawn; one queued by an earlier call stays.
    pub async fn acquire(
        &self,
        kind: QueueKind,
        name: &str,
        session: SessionId,
        data: Vec<u8>,
        wait: Duration,
    ) -> Result<Grant, NodeError> {
        let deadline = Instant::now() + wait;
        let try_only = wait.is_zero();
        let command = Command::Acquire {
            kind,
            name: name.to_string(),
            session,
            data,
            wait: !try_only,
        };
        let (index, applied) = self.inner.write(command).await?;
        let acquisition = match applied.result? {
            Response::Acquired(a) => a,
            other => return Err(unexpected(other)),
        };
        // Our replica must have applied the acquire before it can judge it.
        self.inner
            .await_applied(index, Instant::now() + self.inner.config.leader_wait())
            .await?;
        if try_only && !acquisition.held {
            let holder = self.inner.shared.read().holder(kind, name);
            return Err(CoreError::LockHeld {
                lock: name.to_string(),
                holder: holder.map_or(session, |h| h.session),
            }
            .into());
        }
        match self
            .wait_for_grant(kind, name, session, &acquisition, deadline)
            .await
        {
            Err(NodeError::Timeout) if acquisition.created => {
                self.withdraw(kind, name, session, &acquisition.node).await
            }
            other => other,
        }
    }

    /// Withdraws the node a timed-out acquire created, unless it was
    /// granted in the meantime: then the grant stands and is returned, so
    /// the lock is neither orphaned nor handed on while a retry of the same
    /// session believes it holds it.
    async fn withdraw(
        &self,
        kind: QueueKind,
        name: &str,
        session: SessionId,
        node: &str,
    ) -> Result<Grant, NodeError> {
        let command = Command::Release {
            kind,
            name: name.to_string(),
            session,
            withdraw: Some(node.to_string()),
        };
        match self.inner.write(command).await {
            Ok((index, applied)) => match applied.result {
                Err(CoreError::AlreadyGranted { .. }) => {
                    let deadline = Instant::now() + self.inner.config.leader_wait();
                    self.inner.await_applied(index, deadline).await?;
                    grant_of(&self.inner.shared.read(), kind, name, session)
                }
                Ok(_) | Err(_) => Err(NodeError::Timeout),
            },
            Err(e) => {
                tracing::warn!(node, "could not withdraw a timed-out acquire: {e}");
                Err(NodeError::Timeout)
            }
        }
    }

    /// Waits on the immediate predecessor only, re-checking after each
    /// wake-up until the node holds, is gone, or the deadline passes.
    async fn wait_for_grant(
        &self,
        kind: QueueKind,
        name: &str,
        session: SessionId,
        acquisition: &Acquisition,
        deadline: Instant,
    ) -> Result<Grant, NodeError> {
        loop {
            let guard = {
                let state = self.inner.shared.read();
                match state.position(&acquisition.node) {
                    Ok(Position::Holder) => return grant_of(&state, kind, name, session),
                    Ok(Position::Behind(predecessor)) => self
                        .inner
                        .shared
                        .waiters
                        .register(vec![predecessor, acquisition.node.clone()]),
                    Err(_) if state.session(session).is_none() => {
                        return Err(CoreError::SessionNotFound(session).into())
                    }
                    Err(_) => return Err(NodeError::Withdrawn),
                }
            };
            tokio::select! {
                _ = guard.woken() => {}
                _ = tokio::time::sleep_until(deadline) => return Err(NodeError::Timeout),
                _ = self.inner.stopped() => return Err(NodeError::ShuttingDown),
            }
        }
    }

    /// Deletes the session's node in the queue (release, or cancel a wait).
    pub async fn release(
        &self,
        kind: QueueKind,
        name: &str,
        session: SessionId,
    ) -> Result<(), NodeError> {
        let command = Command::Release {
            kind,
            name: name.to_string(),
            session,
            withdraw: None,
        };
        self.inner.write(command).await?.1.result?;
        Ok(())
    }

    /// Changes the election leader's value.
    pub async fn proclaim(
        &self,
        name: &str,
        session: SessionId,
        value: Vec<u8>,
    ) -> Result<(), NodeError> {
        let command = Command::Proclaim {
            name: name.to_string(),
            session,
            value,
        };
        self.inner.write(command).await?.1.result?;
        Ok(())
    }

    /// Commits any command; for generic node writes and tools.
    pub async fn submit(&self, command: Command) -> Result<Response, NodeError> {
        Ok(self.inner.write(command).await?.1.result?)
    }

    /// Runs `f` on the state, after a read-index barrier unless stale.
    pub async fn read<T>(
        &self,
        consistency: Consistency,
        f: impl FnOnce(&StateMachine) -> T,
    ) -> Result<T, NodeError> {
        if consistency == Consistency::Linearizable {
            self.inner.linearizable_barrier().await?;
        }
        Ok(f(&self.inner.shared.read()))
    }

    /// Effects of every command applied on this replica from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Effects>> {
        self.inner.shared.changes.subscribe()
    }

    /// Waits until some node is leader and this node knows it.
    pub async fn wait_for_leader(&self, timeout: Duration) -> Result<NodeId, NodeError> {
        let mut metrics = self.inner.raft.metrics();
        let leader = tokio::time::timeout(timeout, async {
            let m = metrics.wait_for(|m| m.current_leader.is_some()).await;
            m.map(|m| m.current_leader)
        })
        .await;
        match leader {
            Ok(Ok(Some(id))) => Ok(id),
            Ok(Ok(None)) | Err(_) => Err(NodeError::NoLeader),
            Ok(Err(_)) => Err(NodeError::ShuttingDown),
        }
    }

    /// The cluster as this node sees it.
    pub fn status(&self) -> ClusterStatus {
        let m = self.inner.raft.metrics().borrow().clone();
        let applied_index = m.last_applied.map_or(0, |l| l.index);
        let matched = m.replication.clone().unwrap_or_default();
        let members = m
            .membership_config
            .nodes()
            .map(|(id, member)| {
                let role = if Some(*id) == m.current_leader {
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
            committed_index: m.last_applied.map(|l| l.index),
            applied_index,
            members,
        }
    }

    /// True when a leader is known and this replica has applied what it
    /// has in its log.
    pub fn is_healthy(&self) -> bool {
        let m = self.inner.raft.metrics().borrow().clone();
        m.current_leader.is_some() && m.last_applied.map(|l| l.index) >= m.last_log_index
    }

    /// Counters for metrics and tests.
    pub fn counters(&self) -> NodeCounters {
        let shared = &self.inner.shared;
        NodeCounters {
            wakeups: shared.waiters.wakeups(),
            waiter_registrations: shared.waiters.registered(),
            tracked_sessions: shared.tracker.tracked(),
            proposals: self.inner.proposer.proposals(),
            proposed_commands: self.inner.proposer.commands(),
            snapshots_installed: shared.snapshots_installed(),
        }
    }

    /// The openraft handle, for tests and tools (e.g. forcing an election).
    pub fn raft(&self) -> &crate::typ::Raft {
        &self.inner.raft
    }
}

fn grant_of(
    state: &StateMachine,
    kind: QueueKind,
    name: &str,
    session: SessionId,
) -> Result<Grant, NodeError> {
    let holder = state
        .holder(kind, name)
        .filter(|h| h.session == session)
        .ok_or(NodeError::Withdrawn)?;
    Ok(Grant {
        node: holder.node,
        fencing_token: holder.fencing_token,
        session,
        since_revision: holder.granted_revision.unwrap_or(holder.fencing_token),
    })
}

impl Inner {
    /// Forwarded-to-leader entry points, for the internal routes.
    pub(crate) fn is_initialized_now(&self) -> bool {
        self.raft
            .metrics()
            .borrow()
            .membership_config
            .nodes()
            .next()
            .is_some()
    }
}

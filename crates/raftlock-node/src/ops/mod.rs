//! What an application (or the HTTP server) can do with a node: the same
//! operations the API exposes, in-process. Acquiring is its own flow
//! (`acquire.rs`), and so is the cluster's status (`status.rs`).

pub(crate) mod acquire;
pub(crate) mod kinds;
pub(crate) mod kv_ops;
pub(crate) mod observe;
pub(crate) mod primitives;
pub(crate) mod queue_ops;
pub(crate) mod tree_ops;
pub(crate) mod views;
pub(crate) mod waiters;

use std::sync::Arc;
use std::time::Duration;

use raftlock_core::{Command, CoreError, Effects, QueueKind, Response, SessionId, StateMachine};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use crate::error::NodeError;
use crate::node::Node;
use crate::raft::typ::NodeId;

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
    /// The session's queue node (`/locks/{name}/lock-…`), now the holder.
    pub node: String,
    /// The grant's fencing token: larger than every earlier grant's of the
    /// same lock (docs/design.md).
    pub fencing_token: u64,
    /// The session that holds it.
    pub session: SessionId,
    /// Revision at which the grant happened.
    pub since_revision: u64,
}

/// A session as opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenedSession {
    /// The new session's id.
    pub id: SessionId,
    /// Its TTL as granted, in milliseconds.
    pub ttl_ms: u64,
    /// The state's revision right after it opened.
    pub revision: u64,
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
    /// Commands carried by those proposals.
    pub proposed_commands: u64,
    /// Requests that carried this node's keepalives to the leader (or to
    /// its own leader role), and the keepalives they carried:
    /// `keepalives_sent / keepalive_requests` is the grouping factor.
    pub keepalive_requests: u64,
    /// See `keepalive_requests`.
    pub keepalives_sent: u64,
    /// Sessions this node expired as leader (no keepalive within the TTL).
    pub sessions_expired: u64,
    /// Times this node saw a new leader (the first one it learns included).
    pub leader_changes: u64,
    /// Proposals this node committed as leader, and the time they took in
    /// microseconds (append, replication to a quorum with its fsyncs,
    /// apply): `commit_micros / commits` is the mean commit latency.
    pub commits: u64,
    /// See `commits`.
    pub commit_micros: u64,
    /// Log durability barriers (sled flush + `fdatasync`) run, and the time
    /// they took in microseconds: the fsync latency.
    pub fsyncs: u64,
    /// See `fsyncs`.
    pub fsync_micros: u64,
    /// Snapshots installed from the leader since start. Each replaced the
    /// whole state without per-node effects: whoever follows
    /// [`Node::subscribe`] must resync when this moves.
    pub snapshots_installed: u64,
}

pub(crate) fn unexpected(response: Response) -> NodeError {
    NodeError::Internal(format!("unexpected response {response:?}"))
}

impl Node {
    /// Opens a session; the TTL must lie within the configured bounds.
    pub async fn open_session(
        &self,
        owner: &str,
        ttl: Duration,
    ) -> Result<OpenedSession, NodeError> {
        self.open_session_as(None, owner, ttl).await
    }

    /// Opens a session on behalf of `principal` (the HTTP API's
    /// authenticated token name), recorded in the replicated state so every
    /// member can refuse the session to other principals. `None` is
    /// [`open_session`](Self::open_session): no owner beyond the label.
    pub async fn open_session_as(
        &self,
        principal: Option<&str>,
        owner: &str,
        ttl: Duration,
    ) -> Result<OpenedSession, NodeError> {
        let s = &self.replica.config.settings;
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        if ttl_ms < s.session_ttl_min_ms || ttl_ms > s.session_ttl_max_ms {
            return Err(CoreError::Invalid(format!(
                "ttl_ms must be between {} and {}",
                s.session_ttl_min_ms, s.session_ttl_max_ms
            ))
            .into());
        }
        let id = SessionId(rand::random());
        self.open_checked(id, principal, owner.to_string(), ttl_ms)
            .await
    }

    /// Opens session `id` (its TTL already checked), on behalf of
    /// `principal` when one is given.
    pub(crate) async fn open_checked(
        &self,
        id: SessionId,
        principal: Option<&str>,
        owner: String,
        ttl_ms: u64,
    ) -> Result<OpenedSession, NodeError> {
        let command = match principal {
            None => Command::OpenSession { id, owner, ttl_ms },
            Some(principal) => Command::OpenSessionAs {
                id,
                principal: principal.to_string(),
                owner,
                ttl_ms,
            },
        };
        let (_, applied) = self.replica.write(command).await?;
        match applied.result? {
            Response::SessionOpened { id, ttl_ms } => Ok(OpenedSession {
                id,
                ttl_ms,
                revision: applied.revision,
            }),
            other => Err(unexpected(other)),
        }
    }

    /// Restarts the session's TTL; returns it.
    pub async fn keepalive(&self, id: SessionId) -> Result<Duration, NodeError> {
        self.replica.keepalive(id).await.map(Duration::from_millis)
    }

    /// Ends the session, releasing all its locks.
    pub async fn close_session(&self, id: SessionId) -> Result<(), NodeError> {
        self.close_session_at(id).await.map(|_| ())
    }

    /// As [`close_session`](Self::close_session); returns the state's
    /// revision right after the session closed (etcd's LeaseRevoke
    /// answers it).
    pub async fn close_session_at(&self, id: SessionId) -> Result<u64, NodeError> {
        let (_, applied) = self.replica.write(Command::CloseSession { id }).await?;
        applied.result?;
        Ok(applied.revision)
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
        self.replica.write(command).await?.1.result?;
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
        self.replica.write(command).await?.1.result?;
        Ok(())
    }

    /// Commits any command: the typed operations' common path.
    pub(crate) async fn submit(&self, command: Command) -> Result<Response, NodeError> {
        Ok(self.replica.write(command).await?.1.result?)
    }

    /// Runs `f` on the state, after a read-index barrier unless stale:
    /// the typed reads' common path.
    pub(crate) async fn read<T>(
        &self,
        consistency: Consistency,
        f: impl FnOnce(&StateMachine) -> T,
    ) -> Result<T, NodeError> {
        self.replica.refuse_if_replaced()?;
        if consistency == Consistency::Linearizable {
            self.replica.linearizable_barrier().await?;
        }
        Ok(f(&self.replica.shared.read()))
    }

    /// This replica's recent node changes by revision, for watches.
    pub fn history(&self) -> &crate::ChangeHistory {
        &self.replica.shared.history
    }

    /// Completes once this node has begun shutting down: for waits
    /// outside this crate (an embedded client's node watch) that must not
    /// outlive it.
    pub async fn stopped(&self) {
        self.replica.shutdown.stopped().await
    }

    /// Effects of every command applied on this replica from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Effects>> {
        self.replica.shared.changes.subscribe()
    }

    /// Waits until some node is leader and this node knows it.
    pub async fn wait_for_leader(&self, timeout: Duration) -> Result<NodeId, NodeError> {
        let mut metrics = self.replica.raft.metrics();
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

    /// Counters for metrics and tests.
    pub fn counters(&self) -> NodeCounters {
        let shared = &self.replica.shared;
        let (sessions_expired, leader_changes, commits, commit_micros) = shared.stats.read();
        let sync = self.sync_stats();
        NodeCounters {
            wakeups: shared.waiters.wakeups(),
            waiter_registrations: shared.waiters.registered(),
            tracked_sessions: shared.tracker.tracked(),
            proposals: self.replica.proposer.requests(),
            proposed_commands: self.replica.proposer.items(),
            keepalive_requests: self.replica.keepalives.requests(),
            keepalives_sent: self.replica.keepalives.items(),
            snapshots_installed: shared.snapshots_installed(),
            sessions_expired,
            leader_changes,
            commits,
            commit_micros,
            fsyncs: sync.barriers,
            fsync_micros: sync.barrier_micros,
        }
    }

    /// Adds member `id` at `member`'s addresses, through the leader: as a
    /// learner first, then, once it has caught up (by snapshot if the log
    /// it needs was purged), as a voter through joint consensus. Returns
    /// the new membership. Adding a voter again at the same addresses is a
    /// no-op; at other addresses it is refused (`MemberExists`).
    pub async fn add_member(
        &self,
        id: crate::raft::typ::NodeId,
        member: crate::raft::typ::Member,
    ) -> Result<crate::MembershipView, NodeError> {
        self.replica.change_member(id, Some(member)).await
    }

    /// Removes member `id` through the leader (never the last voter). The
    /// leader may remove itself: it steps down once the change commits.
    pub async fn remove_member(
        &self,
        id: crate::raft::typ::NodeId,
    ) -> Result<crate::MembershipView, NodeError> {
        self.replica.change_member(id, None).await
    }

    /// This member's data-directory identity: member id, incarnation and
    /// cluster id (docs/design.md, "Member identity").
    pub fn identity(&self) -> crate::Identity {
        self.replica.guard.identity.get()
    }

    /// Why this member refuses to serve, while the cluster's membership
    /// names another incarnation of it (its data was wiped): the message,
    /// which names the fix. `None` normally.
    pub fn replaced(&self) -> Option<String> {
        self.replica.guard.replaced_message()
    }

    /// How member `id` looks from here: for this member itself `ok`, or
    /// `member_replaced` while the cluster names another incarnation of
    /// it; for a peer, how it last answered this member's Raft requests
    /// (`None`: this member sent it none, as a follower usually has not).
    pub fn member_state(&self, id: crate::raft::typ::NodeId) -> Option<crate::PeerState> {
        if id == self.id() {
            return Some(if self.replaced().is_some() {
                crate::PeerState::Replaced
            } else {
                crate::PeerState::Ok
            });
        }
        self.replica.guard.peer_state(id)
    }

    /// The membership as this member knows it (no read index).
    pub fn membership(&self) -> crate::MembershipView {
        self.replica.membership_view()
    }
}

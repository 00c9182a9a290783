//! The acquire flow: queue the session in a lock (or election), wait on the
//! immediate predecessor only, and never leave a node queued behind a
//! caller that was told nothing is queued.
//!
//! A session has at most one node per queue (a retried acquire returns the
//! existing node), so "the node of this session in this queue" is what a
//! timed-out wait withdraws, whichever request created it. Each way an
//! acquire can end says truthfully what is left:
//!
//! | ending | what is left queued |
//! |---|---|
//! | granted | the held node |
//! | `Timeout` | nothing (withdrawn), or the waiting node with `keep_queued` |
//! | `LockHeld` (try-lock) | nothing |
//! | `OutcomeUnknown` | maybe the node: the caller must release to cancel |
//! | `SessionNotFound` | nothing (the session's nodes went with it) |

use std::time::Duration;

use raftlock_core::{
    Acquisition, Command, CoreError, Position, QueueKind, Response, SessionId, StateMachine,
};
use tokio::time::Instant;

use crate::error::NodeError;
use crate::node::Node;
use crate::ops::Grant;

/// How long to wait for a grant, and what a timeout leaves behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcquireOptions {
    /// Longest wait for the grant; zero is a try-lock.
    pub wait: Duration,
    /// On timeout, keep the waiting node queued (its place in line) instead
    /// of withdrawing it. For callers that wait in several long polls: each
    /// poll re-attaches to the same node, so a long wait keeps its FIFO
    /// place. The caller must release the lock when it gives up.
    pub keep_queued: bool,
}

impl AcquireOptions {
    /// Wait up to `wait`, withdrawing the node on timeout.
    pub fn wait(wait: Duration) -> Self {
        AcquireOptions {
            wait,
            keep_queued: false,
        }
    }
}

impl Node {
    /// Queues the session in a lock (or election) and waits up to `wait`
    /// for the grant; `Duration::ZERO` is a try-lock. On timeout the
    /// session's waiting node is withdrawn.
    pub async fn acquire(
        &self,
        kind: QueueKind,
        name: &str,
        session: SessionId,
        data: Vec<u8>,
        wait: Duration,
    ) -> Result<Grant, NodeError> {
        self.acquire_with(kind, name, session, data, AcquireOptions::wait(wait))
            .await
    }

    /// [`Node::acquire`] with every option.
    pub async fn acquire_with(
        &self,
        kind: QueueKind,
        name: &str,
        session: SessionId,
        data: Vec<u8>,
        options: AcquireOptions,
    ) -> Result<Grant, NodeError> {
        self.acquire_with_delay(kind, name, session, data, None, options)
            .await
    }

    /// [`Node::acquire_with`], naming the lock's lock-delay (docs/api.md,
    /// "Lock-delay"): after a holder's session ends, nobody is granted the
    /// lock for this long. The acquire that creates the lock's queue fixes
    /// it; another value is refused while anyone is queued. Locks only
    /// (`kind` must be `Lock` when `lock_delay_ms` is given), and without
    /// data.
    pub async fn acquire_with_delay(
        &self,
        kind: QueueKind,
        name: &str,
        session: SessionId,
        data: Vec<u8>,
        lock_delay_ms: Option<u64>,
        options: AcquireOptions,
    ) -> Result<Grant, NodeError> {
        let replica = &self.replica;
        let deadline = Instant::now() + options.wait;
        let try_only = options.wait.is_zero();
        let command = match lock_delay_ms {
            Some(lock_delay_ms) if kind == QueueKind::Lock && data.is_empty() => {
                Command::AcquireWithDelay {
                    name: name.to_string(),
                    session,
                    wait: !try_only,
                    lock_delay_ms,
                }
            }
            Some(_) => {
                return Err(CoreError::Invalid(
                    "a lock-delay is for locks without data only".into(),
                )
                .into())
            }
            None => Command::Acquire {
                kind,
                name: name.to_string(),
                session,
                data,
                wait: !try_only,
            },
        };
        let (index, applied) = replica.write(command).await?;
        let acquisition = match applied.result? {
            Response::Acquired(a) => a,
            other => return Err(crate::ops::unexpected(other)),
        };
        // Our replica must have applied the acquire before it can judge it.
        let caught_up = Instant::now() + replica.leader_wait();
        match replica.await_applied(index, caught_up).await {
            Ok(()) => {}
            Err(NodeError::NoLeader) => {
                return self.not_caught_up(kind, name, session, &acquisition).await
            }
            Err(e) => return Err(e),
        }
        if try_only && !acquisition.held {
            let holder = replica.shared.read().holder(kind, name);
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
            Err(NodeError::Timeout) if options.keep_queued => Err(NodeError::Timeout),
            Err(NodeError::Timeout) => self.withdraw(kind, name, session, &acquisition.node).await,
            other => other,
        }
    }

    /// The acquire committed, but this replica did not apply it in time,
    /// so it cannot wait for the grant here. Withdraw the node; only if
    /// that is certain may the caller be told nothing is queued.
    async fn not_caught_up(
        &self,
        kind: QueueKind,
        name: &str,
        session: SessionId,
        acquisition: &Acquisition,
    ) -> Result<Grant, NodeError> {
        let unknown = |why: String| {
            NodeError::OutcomeUnknown(format!(
                "the acquire committed but this member has not applied it yet; {why}; \
                 release the lock to cancel"
            ))
        };
        let command = withdrawal(kind, name, session, &acquisition.node);
        match self.replica.write(command).await {
            Ok((_, applied)) => match applied.result {
                // Withdrawn, or gone with its session: nothing is queued.
                Ok(_) => Err(NodeError::NoLeader),
                Err(CoreError::SessionNotFound(id)) => Err(CoreError::SessionNotFound(id).into()),
                Err(e) => Err(unknown(format!("withdrawing it failed: {e}"))),
            },
            Err(e) => Err(unknown(format!("withdrawing it failed: {e}"))),
        }
    }

    /// Withdraws the session's waiting node after its wait ran out, unless
    /// it was granted in the meantime: then the grant stands and is
    /// returned, so the lock is neither orphaned nor handed on while a
    /// retry of the same session believes it holds it. When the withdrawal
    /// fails, the node may still be queued: that is `OutcomeUnknown`, never
    /// `Timeout` (which promises nothing is left).
    async fn withdraw(
        &self,
        kind: QueueKind,
        name: &str,
        session: SessionId,
        node: &str,
    ) -> Result<Grant, NodeError> {
        let replica = &self.replica;
        match replica.write(withdrawal(kind, name, session, node)).await {
            Ok((index, applied)) => match applied.result {
                Ok(_) => Err(NodeError::Timeout),
                Err(CoreError::AlreadyGranted { .. }) => {
                    let deadline = Instant::now() + replica.leader_wait();
                    match replica.await_applied(index, deadline).await {
                        Ok(()) => grant_of(&replica.shared.read(), kind, name, session),
                        Err(NodeError::NoLeader) => Err(NodeError::OutcomeUnknown(
                            "the lock was granted while its wait ran out, but this member \
                             has not applied the grant yet; release the lock to cancel"
                                .into(),
                        )),
                        Err(e) => Err(e),
                    }
                }
                Err(CoreError::SessionNotFound(id)) => Err(CoreError::SessionNotFound(id).into()),
                // The node is gone already (released by another request of
                // the session): nothing is queued.
                Err(_) => Err(NodeError::Timeout),
            },
            Err(e) => {
                tracing::warn!(node, "could not withdraw a timed-out acquire: {e}");
                Err(NodeError::OutcomeUnknown(format!(
                    "the wait ran out, but withdrawing the queued node failed ({e}); \
                     release the lock to cancel"
                )))
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
        let shared = &self.replica.shared;
        loop {
            let guard = {
                let state = shared.read();
                match state.position(&acquisition.node) {
                    Ok(Position::Holder) => return grant_of(&state, kind, name, session),
                    Ok(Position::Behind(predecessor)) => shared
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
                _ = self.replica.shutdown.stopped() => return Err(NodeError::ShuttingDown),
            }
        }
    }
}

/// Deletes `node` only if it is the session's and still waiting.
fn withdrawal(kind: QueueKind, name: &str, session: SessionId, node: &str) -> Command {
    Command::Release {
        kind,
        name: name.to_string(),
        session,
        withdraw: Some(node.to_string()),
    }
}

/// The session's grant in the queue, read from this replica.
pub(crate) fn grant_of(
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

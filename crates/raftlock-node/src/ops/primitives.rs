//! Acquire and release for read-write locks, semaphores and multi-locks
//! (the core's `shared.rs` and `multilock.rs`).
//!
//! The flow is the lock's (`acquire.rs`): propose, wait for this replica
//! to apply it, wait for the grant, and on timeout withdraw the waiting
//! node (or set) unless it was granted meanwhile. What differs is what a
//! waiter listens for:
//! - a read-write lock or semaphore entry can be granted while its
//!   predecessor stays (a writer's release grants a whole run of readers),
//!   so it waits under [`granted_key`] of its own node, which the apply
//!   loop signals for exactly the entries a command granted: no herd;
//! - a multi-lock waits on its predecessor in each lock it does not head
//!   yet, as a lock waiter does in one.
//!
//! Either also waits on its own node(s), whose deletion means the session
//! ended or the entry was released.

use raftlock_core::{
    Command, CoreError, MultiStatus, Response, RwMode, SessionId, SharedKind, StateMachine,
};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::error::NodeError;
use crate::node::Node;
use crate::ops::acquire::AcquireOptions;
use crate::ops::waiters::granted_key;
use crate::ops::{unexpected, Grant};

/// A granted multi-lock: one grant per lock, in the order they were named.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MultiGrant {
    /// Each lock's name and grant.
    pub locks: Vec<(String, Grant)>,
}

/// Where a waiting entry stands on this replica.
enum Standing<T> {
    Held(T),
    /// Wake when one of these keys is signalled.
    Waiting(Vec<String>),
    Gone,
}

type Judge<'a, T> = Box<dyn Fn(&StateMachine) -> Standing<T> + Send + Sync + 'a>;

/// What the generic flow needs to know about one primitive.
struct Flow<'a, T> {
    session: SessionId,
    options: AcquireOptions,
    /// Where the entry stands on a state.
    judge: Judge<'a, T>,
    /// Deletes the entry only if still waiting (`AlreadyGranted` if not).
    withdrawal: Command,
    /// For a try-acquire that found its earlier node still waiting.
    busy: CoreError,
}

impl Node {
    /// Takes a read-write lock for reading or writing, waiting up to
    /// `options.wait` (zero: try once).
    pub async fn acquire_rwlock(
        &self,
        name: &str,
        session: SessionId,
        mode: RwMode,
        options: AcquireOptions,
    ) -> Result<Grant, NodeError> {
        let command = Command::AcquireRwLock {
            name: name.to_string(),
            session,
            mode,
            wait: !options.wait.is_zero(),
        };
        self.acquire_shared(SharedKind::RwLock, name, session, command, options)
            .await
    }

    /// Takes one of a semaphore's `permits` places, waiting up to
    /// `options.wait`. The first acquire fixes `permits` while anyone is
    /// queued; another value is refused (`LimitMismatch`).
    pub async fn acquire_semaphore(
        &self,
        name: &str,
        session: SessionId,
        permits: u64,
        options: AcquireOptions,
    ) -> Result<Grant, NodeError> {
        let command = Command::AcquireSemaphore {
            name: name.to_string(),
            session,
            permits,
            wait: !options.wait.is_zero(),
        };
        self.acquire_shared(SharedKind::Semaphore, name, session, command, options)
            .await
    }

    /// Releases (or cancels the wait for) the session's place in a
    /// read-write lock or semaphore.
    pub async fn release_shared(
        &self,
        kind: SharedKind,
        name: &str,
        session: SessionId,
    ) -> Result<(), NodeError> {
        let command = Command::ReleaseShared {
            kind,
            name: name.to_string(),
            session,
            withdraw: None,
        };
        self.replica.write(command).await?.1.result?;
        Ok(())
    }

    /// Takes every lock in `locks` or none, waiting up to `options.wait`.
    pub async fn acquire_multi(
        &self,
        locks: &[String],
        session: SessionId,
        options: AcquireOptions,
    ) -> Result<MultiGrant, NodeError> {
        let command = Command::AcquireMulti {
            locks: locks.to_vec(),
            session,
            wait: !options.wait.is_zero(),
        };
        let (index, applied) = self.replica.write(command).await?;
        let acquisition = match applied.result? {
            Response::MultiAcquired(a) => a,
            other => return Err(unexpected(other)),
        };
        let seq = acquisition.fencing_token;
        let judge = move |state: &StateMachine| match state.multi_status(locks, session) {
            MultiStatus::Held(nodes) => Standing::Held(MultiGrant {
                locks: locks
                    .iter()
                    .zip(nodes)
                    .map(|(name, node)| {
                        let since = state
                            .holder(raftlock_core::QueueKind::Lock, name)
                            .and_then(|h| h.granted_revision)
                            .unwrap_or(seq);
                        let grant = Grant {
                            node,
                            fencing_token: seq,
                            session,
                            since_revision: since,
                        };
                        (name.clone(), grant)
                    })
                    .collect(),
            }),
            MultiStatus::Waiting { predecessors, own } => {
                Standing::Waiting(predecessors.into_iter().chain(own).collect())
            }
            MultiStatus::Gone => Standing::Gone,
        };
        let flow = Flow {
            session,
            options,
            judge: Box::new(judge),
            withdrawal: Command::ReleaseMulti {
                locks: locks.to_vec(),
                session,
                withdraw: Some(seq),
            },
            busy: CoreError::LockHeld {
                lock: locks.join(","),
                holder: session,
            },
        };
        self.wait_for(index, flow).await
    }

    /// Releases every lock of a multi-lock together (or cancels its wait).
    pub async fn release_multi(
        &self,
        locks: &[String],
        session: SessionId,
    ) -> Result<(), NodeError> {
        let command = Command::ReleaseMulti {
            locks: locks.to_vec(),
            session,
            withdraw: None,
        };
        self.replica.write(command).await?.1.result?;
        Ok(())
    }

    async fn acquire_shared(
        &self,
        kind: SharedKind,
        name: &str,
        session: SessionId,
        command: Command,
        options: AcquireOptions,
    ) -> Result<Grant, NodeError> {
        let (index, applied) = self.replica.write(command).await?;
        let acquisition = match applied.result? {
            Response::Acquired(a) => a,
            other => return Err(unexpected(other)),
        };
        let node = acquisition.node.clone();
        let judge = move |state: &StateMachine| match state.shared_entry(kind, name, session) {
            Some(e) if e.node != node => Standing::Gone,
            Some(e) => match e.granted_revision {
                Some(since) => Standing::Held(Grant {
                    node: e.node,
                    fencing_token: e.fencing_token,
                    session,
                    since_revision: since,
                }),
                None => Standing::Waiting(vec![granted_key(&e.node), e.node]),
            },
            None => Standing::Gone,
        };
        let holder = self
            .replica
            .shared
            .read()
            .shared_queue(kind, name)
            .holders
            .first()
            .map_or(session, |h| h.session);
        let flow = Flow {
            session,
            options,
            judge: Box::new(judge),
            withdrawal: Command::ReleaseShared {
                kind,
                name: name.to_string(),
                session,
                withdraw: Some(acquisition.node),
            },
            busy: CoreError::LockHeld {
                lock: name.to_string(),
                holder,
            },
        };
        self.wait_for(index, flow).await
    }

    /// After the acquire at log `index` committed: wait for this replica
    /// to apply it, then for the grant, withdrawing on timeout.
    async fn wait_for<T>(&self, index: u64, flow: Flow<'_, T>) -> Result<T, NodeError> {
        let replica = &self.replica;
        let deadline = Instant::now() + flow.options.wait;
        let caught_up = Instant::now() + replica.leader_wait();
        match replica.await_applied(index, caught_up).await {
            Ok(()) => {}
            Err(NodeError::NoLeader) => {
                return match self.withdraw_entry(&flow).await {
                    Withdrawal::Done => Err(NodeError::NoLeader),
                    Withdrawal::Granted | Withdrawal::Unknown(_) => Err(NodeError::OutcomeUnknown(
                        "the acquire committed but this member has not applied it yet, \
                             and withdrawing it failed; release to cancel"
                            .into(),
                    )),
                    Withdrawal::SessionEnded => {
                        Err(CoreError::SessionNotFound(flow.session).into())
                    }
                }
            }
            Err(e) => return Err(e),
        }
        let waited = self
            .wait_until(&flow, deadline, flow.options.wait.is_zero())
            .await;
        match waited {
            Err(NodeError::Timeout) if flow.options.keep_queued => Err(NodeError::Timeout),
            Err(NodeError::Timeout) => match self.withdraw_entry(&flow).await {
                Withdrawal::Done => Err(NodeError::Timeout),
                Withdrawal::SessionEnded => Err(CoreError::SessionNotFound(flow.session).into()),
                // Granted while the wait ran out: the grant stands.
                Withdrawal::Granted => {
                    let deadline = Instant::now() + replica.leader_wait();
                    self.wait_until(&flow, deadline, false)
                        .await
                        .map_err(|e| match e {
                            NodeError::Timeout => NodeError::OutcomeUnknown(
                                "granted while the wait ran out, but this member has not \
                                 applied the grant yet; release to cancel"
                                    .into(),
                            ),
                            other => other,
                        })
                }
                Withdrawal::Unknown(e) => Err(NodeError::OutcomeUnknown(format!(
                    "the wait ran out, but withdrawing the queued entry failed ({e}); \
                     release to cancel"
                ))),
            },
            other => other,
        }
    }

    /// Re-judges after every wake-up until the entry holds, is gone, or
    /// the deadline passes. `try_only`: a waiting entry is `busy` at once.
    async fn wait_until<T>(
        &self,
        flow: &Flow<'_, T>,
        deadline: Instant,
        try_only: bool,
    ) -> Result<T, NodeError> {
        let shared = &self.replica.shared;
        loop {
            let guard = {
                let state = shared.read();
                match (flow.judge)(&state) {
                    Standing::Held(grant) => return Ok(grant),
                    Standing::Waiting(_) if try_only => return Err(flow.busy.clone().into()),
                    Standing::Waiting(keys) => shared.waiters.register(keys),
                    Standing::Gone if state.session(flow.session).is_none() => {
                        return Err(CoreError::SessionNotFound(flow.session).into())
                    }
                    Standing::Gone => return Err(NodeError::Withdrawn),
                }
            };
            tokio::select! {
                _ = guard.woken() => {}
                _ = tokio::time::sleep_until(deadline) => return Err(NodeError::Timeout),
                _ = self.replica.shutdown.stopped() => return Err(NodeError::ShuttingDown),
            }
        }
    }

    async fn withdraw_entry<T>(&self, flow: &Flow<'_, T>) -> Withdrawal {
        match self.replica.write(flow.withdrawal.clone()).await {
            Ok((index, applied)) => match applied.result {
                Ok(_) => Withdrawal::Done,
                Err(CoreError::AlreadyGranted { .. }) => {
                    // Judge the grant on a replica that applied it.
                    let deadline = Instant::now() + self.replica.leader_wait();
                    match self.replica.await_applied(index, deadline).await {
                        Ok(()) => Withdrawal::Granted,
                        Err(e) => Withdrawal::Unknown(e.to_string()),
                    }
                }
                Err(CoreError::SessionNotFound(_)) => Withdrawal::SessionEnded,
                // Gone already (released by another request): nothing
                // is queued.
                Err(_) => Withdrawal::Done,
            },
            Err(e) => Withdrawal::Unknown(e.to_string()),
        }
    }
}

enum Withdrawal {
    Done,
    Granted,
    SessionEnded,
    Unknown(String),
}

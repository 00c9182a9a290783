//! Typed reads: the contract's views of the state (`raftlock_api`), built
//! here once for every front door (the HTTP API, the embedded client).
//! Session ids are shown in full; a front door that serves several
//! principals redacts them for the caller.

use raftlock_api::election::{ElectionLine, ElectionView, LeaderView};
use raftlock_api::lock::{FencingAnswer, Holder, LockBody, LockLine, Waiter};
use raftlock_api::session::{self, SessionList};
use raftlock_api::shared::{SharedHolder, SharedLine, SharedQueue, SharedWaiter};
use raftlock_core::path::validate_lock_name;
use raftlock_core::{QueueEntryView, QueueKind, SessionId, SessionView, SharedKind, StateMachine};

use crate::error::NodeError;
use crate::node::Node;
use crate::ops::kinds::CoreQueue;
use crate::ops::Consistency;

/// A holder as the contract shows it.
pub(crate) fn holder_of(e: QueueEntryView) -> Holder {
    Holder {
        session_id: Some(e.session.to_string()),
        since_revision: e.granted_revision.unwrap_or(e.fencing_token),
        owner: e.owner,
        principal: e.principal,
        node: e.node,
        fencing_token: e.fencing_token,
    }
}

/// An election's leader as the contract shows it.
pub(crate) fn leader_of(e: QueueEntryView) -> LeaderView {
    LeaderView {
        session_id: Some(e.session.to_string()),
        principal: e.principal,
        // Values arrive as JSON strings or Rust strings: UTF-8.
        value: String::from_utf8_lossy(&e.data).into_owned(),
        node: e.node,
        fencing_token: e.fencing_token,
    }
}

/// Election `name` in `state`.
pub(crate) fn election_of(state: &StateMachine, name: &str) -> ElectionView {
    ElectionView {
        election: name.to_string(),
        leader: state.holder(QueueKind::Election, name).map(leader_of),
    }
}

/// A waiter as the contract shows it.
pub(crate) fn waiter_of(e: QueueEntryView) -> Waiter {
    Waiter {
        session_id: Some(e.session.to_string()),
        owner: e.owner,
        principal: e.principal,
        node: e.node,
    }
}

/// A read-write lock entry's mode (its node's data); none for a semaphore.
fn shared_mode(kind: SharedKind, e: &QueueEntryView) -> Option<String> {
    (kind == SharedKind::RwLock).then(|| String::from_utf8_lossy(&e.data).into_owned())
}

fn shared_holder(kind: SharedKind, e: QueueEntryView) -> SharedHolder {
    SharedHolder {
        session_id: Some(e.session.to_string()),
        mode: shared_mode(kind, &e),
        since_revision: e.granted_revision.unwrap_or(e.fencing_token),
        owner: e.owner,
        principal: e.principal,
        node: e.node,
        fencing_token: e.fencing_token,
    }
}

fn shared_waiter(kind: SharedKind, e: QueueEntryView) -> SharedWaiter {
    SharedWaiter {
        session_id: Some(e.session.to_string()),
        mode: shared_mode(kind, &e),
        owner: e.owner,
        principal: e.principal,
        node: e.node,
    }
}

/// The shared kind behind `kind`, or why it has none.
fn shared_kind(kind: raftlock_api::QueueKind) -> Result<SharedKind, NodeError> {
    match CoreQueue::from(kind) {
        CoreQueue::Shared(kind) => Ok(kind),
        CoreQueue::Plain(_) => Err(raftlock_core::CoreError::Invalid(format!(
            "{} are not shared queues",
            kind.segment()
        ))
        .into()),
    }
}

/// A session as the contract shows it.
fn session_view(v: SessionView) -> session::SessionView {
    session::SessionView {
        session_id: v.id.to_string(),
        owner: v.owner,
        principal: v.principal,
        ttl_ms: v.ttl_ms,
        nodes: v.nodes,
    }
}

/// How many sessions the cluster holds, and how many of them one owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SessionCounts {
    /// Every live session.
    pub total: usize,
    /// The sessions of the principal asked about, or (without one) of the
    /// owner label.
    pub owned: usize,
}

/// How much this member's replica holds, as of one read (for metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StateCounts {
    /// The replica's revision.
    pub revision: u64,
    /// Open sessions.
    pub sessions: usize,
    /// Tree nodes, the root excluded.
    pub nodes: usize,
    /// Queues with a holder (locks and elections).
    pub held: usize,
    /// Queued nodes that do not hold.
    pub waiters: usize,
}

/// A lock's lock-delay in the contract's shape: `None` for none.
fn delay_of(s: &StateMachine, name: &str) -> Option<u64> {
    let delay = s.lock_delay(name);
    (delay > 0).then_some(delay)
}

impl Node {
    /// A lock's holder, its waiters in queue order, its lock-delay and
    /// whether it is held off, as of one read.
    pub async fn lock(&self, name: &str, consistency: Consistency) -> Result<LockBody, NodeError> {
        validate_lock_name(name)?;
        self.read(consistency, |s| {
            let view = s.queue(QueueKind::Lock, name);
            LockBody {
                lock: name.to_string(),
                holder: view.holder.map(holder_of),
                waiters: view.waiters.into_iter().map(waiter_of).collect(),
                lock_delay_ms: delay_of(s, name),
                held_off: s.lock_held_off(name),
            }
        })
        .await
    }

    /// The locks with a holder or waiters whose name starts with `prefix`
    /// and that `visible` lets through, in name order, as of one read.
    pub async fn locks(
        &self,
        prefix: &str,
        consistency: Consistency,
        visible: impl Fn(&str) -> bool,
    ) -> Result<Vec<LockLine>, NodeError> {
        self.read(consistency, |s| {
            s.queues(QueueKind::Lock, prefix)
                .into_iter()
                .filter(|q| visible(&q.name))
                .map(|q| LockLine {
                    lock_delay_ms: delay_of(s, &q.name),
                    held_off: s.lock_held_off(&q.name),
                    holder: q.holder.map(holder_of),
                    waiters: q.waiters,
                    lock: q.name,
                })
                .collect()
        })
        .await
    }

    /// Is `token` the current holder's fencing token of lock `name`? A
    /// linearizable read.
    pub async fn check_fencing(&self, name: &str, token: u64) -> Result<FencingAnswer, NodeError> {
        validate_lock_name(name)?;
        let (valid, current_token) = self
            .read(Consistency::Linearizable, |s| s.fencing_check(name, token))
            .await?;
        Ok(FencingAnswer {
            valid,
            current_token,
        })
    }

    /// A read-write lock's or semaphore's holders and waiters in queue
    /// order and a semaphore's permits, as of one read.
    pub async fn shared(
        &self,
        kind: raftlock_api::QueueKind,
        name: &str,
        consistency: Consistency,
    ) -> Result<SharedQueue, NodeError> {
        let kind = shared_kind(kind)?;
        validate_lock_name(name)?;
        self.read(consistency, |s| {
            let view = s.shared_queue(kind, name);
            SharedQueue {
                holders: view
                    .holders
                    .into_iter()
                    .map(|e| shared_holder(kind, e))
                    .collect(),
                waiters: view
                    .waiters
                    .into_iter()
                    .map(|e| shared_waiter(kind, e))
                    .collect(),
                limit: view.limit,
            }
        })
        .await
    }

    /// The read-write locks or semaphores with holders or waiters whose
    /// name starts with `prefix` and that `visible` lets through, in name
    /// order, as of one read.
    pub async fn shared_list(
        &self,
        kind: raftlock_api::QueueKind,
        prefix: &str,
        consistency: Consistency,
        visible: impl Fn(&str) -> bool,
    ) -> Result<Vec<SharedLine>, NodeError> {
        let kind = shared_kind(kind)?;
        self.read(consistency, |s| {
            s.shared_queues(kind, prefix)
                .into_iter()
                .filter(|q| visible(&q.name))
                .map(|q| SharedLine {
                    name: q.name,
                    holders: q
                        .holders
                        .into_iter()
                        .map(|e| shared_holder(kind, e))
                        .collect(),
                    waiters: q.waiters,
                    limit: q.limit,
                })
                .collect()
        })
        .await
    }

    /// How many entries a queue holds (holders included) and whether
    /// `session` is one of them, from this member's replica (no Raft round
    /// trip: for admission limits, which may be a little stale).
    pub async fn queue_place(
        &self,
        kind: raftlock_api::QueueKind,
        name: &str,
        session: SessionId,
    ) -> Result<(usize, bool), NodeError> {
        let queue = CoreQueue::from(kind);
        self.read(Consistency::Stale, |s| queue.place(s, name, session))
            .await
    }

    /// A live session and the nodes it owns; `None` if there is none.
    pub async fn session(
        &self,
        id: SessionId,
        consistency: Consistency,
    ) -> Result<Option<session::SessionView>, NodeError> {
        self.read(consistency, |s| s.session(id).map(session_view))
            .await
    }

    /// The live sessions whose principal `visible` lets through, in
    /// session id order: at most `limit`, and whether more matched.
    pub async fn sessions(
        &self,
        consistency: Consistency,
        visible: impl Fn(Option<&str>) -> bool,
        limit: usize,
    ) -> Result<SessionList, NodeError> {
        let mut views = self
            .read(consistency, |s| {
                s.session_leases()
                    .filter_map(|lease| s.session(lease.id))
                    .filter(|view| visible(view.principal.as_deref()))
                    .take(limit.saturating_add(1))
                    .collect::<Vec<_>>()
            })
            .await?;
        let truncated = views.len() > limit;
        views.truncate(limit);
        Ok(SessionList {
            sessions: views.into_iter().map(session_view).collect(),
            truncated,
        })
    }

    /// The principal that opened session `id` (`Some(None)`: opened
    /// without tokens), or `None` if there is no such session.
    pub async fn session_principal(
        &self,
        id: SessionId,
        consistency: Consistency,
    ) -> Result<Option<Option<String>>, NodeError> {
        self.read(consistency, |s| {
            s.session_principal(id).map(|p| p.map(str::to_string))
        })
        .await
    }

    /// Whether session `id` is live.
    pub async fn session_exists(
        &self,
        id: SessionId,
        consistency: Consistency,
    ) -> Result<bool, NodeError> {
        self.read(consistency, |s| s.session_lease(id).is_some())
            .await
    }

    /// Whether session `id` owns nodes (holds or waits for a lock, permit
    /// or election, or has ephemeral nodes), from this member's replica:
    /// no Raft round trip. `false` when this member cannot tell.
    pub async fn session_owns_nodes(&self, id: SessionId) -> bool {
        self.read(Consistency::Stale, |s| {
            s.session(id).is_some_and(|v| !v.nodes.is_empty())
        })
        .await
        .unwrap_or(false)
    }

    /// The cluster's session count and, when `count_owned`, the sessions
    /// of `principal` (or, without one, of the owner label `owner`), from
    /// this member's replica.
    pub async fn session_counts(
        &self,
        owner: &str,
        principal: Option<&str>,
        count_owned: bool,
    ) -> Result<SessionCounts, NodeError> {
        self.read(Consistency::Stale, |s| SessionCounts {
            total: s.session_count(),
            owned: match (count_owned, principal) {
                (false, _) => 0,
                (true, Some(principal)) => s.sessions_of_principal(principal),
                (true, None) => s.sessions_owned_by(owner),
            },
        })
        .await
    }

    /// How much this member's replica holds, without a Raft round trip
    /// (metrics must answer without a leader).
    pub async fn state_counts(&self) -> Result<StateCounts, NodeError> {
        self.read(Consistency::Stale, |s| {
            let counts = s.counts();
            StateCounts {
                revision: s.revision(),
                sessions: counts.sessions,
                nodes: counts.nodes,
                held: counts.held,
                waiters: counts.waiters,
            }
        })
        .await
    }

    /// An election's leader, as of one read.
    pub async fn election(
        &self,
        name: &str,
        consistency: Consistency,
    ) -> Result<ElectionView, NodeError> {
        validate_lock_name(name)?;
        self.read(consistency, |s| election_of(s, name)).await
    }

    /// The elections with a leader or candidates whose name starts with
    /// `prefix` and that `visible` lets through, in name order.
    pub async fn elections(
        &self,
        prefix: &str,
        consistency: Consistency,
        visible: impl Fn(&str) -> bool,
    ) -> Result<Vec<ElectionLine>, NodeError> {
        self.read(consistency, |s| {
            s.queues(QueueKind::Election, prefix)
                .into_iter()
                .filter(|q| visible(&q.name))
                .map(|q| ElectionLine {
                    election: q.name,
                    leader: q.holder.map(leader_of),
                    candidates: q.waiters,
                })
                .collect()
        })
        .await
    }
}

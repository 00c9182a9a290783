//! Commands proposed through Raft, and what applying one returns.
//!
//! Keepalives are deliberately absent: they never touch the log. Session
//! expiry is a command the leader proposes, so every replica deletes the
//! same nodes at the same log index without reading a clock.

use serde::{Deserialize, Serialize};

use crate::error::CoreError;
use crate::shared::{RwMode, SharedKind};
use crate::tree_ops::{TreeOp, TreeOpResult};
use crate::txn::{Compare, HolderGuard, TxnOp};
use crate::types::{QueueKind, SessionId};

/// A state change, as stored in the Raft log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// Opens a session whose id the proposer drew (128 random bits). A
    /// retry with the same id and parameters is a no-op that succeeds.
    OpenSession {
        /// The new session's id.
        id: SessionId,
        /// A label for humans (listings show it), not an identity.
        owner: String,
        /// Time to live without a keepalive, within the cluster's bounds.
        ttl_ms: u64,
    },
    /// The client ends its session; every node it owns is deleted.
    CloseSession {
        /// The session to close.
        id: SessionId,
    },
    /// The leader saw no keepalive for the session's TTL.
    ExpireSession {
        /// The session that expired.
        id: SessionId,
    },
    /// A new leader records each session's remaining TTL as of its
    /// election, so a later leader counts down from there instead of
    /// restarting at a full TTL (repeated failovers cannot keep a silent
    /// session alive forever, etcd#9888). Unknown ids are skipped.
    CheckpointSessions {
        /// Each session with its remaining TTL in milliseconds.
        sessions: Vec<(SessionId, u64)>,
    },
    /// A keepalive reached a checkpointed session: clear the checkpoint
    /// (committed before the keepalive is acknowledged), so no later
    /// leader expires it earlier than its client was promised.
    RenewSessions {
        /// The sessions whose checkpoint a keepalive cleared.
        ids: Vec<SessionId>,
    },
    /// Creates or updates a generic node (API `PUT /v1/nodes/{path}`).
    Put {
        /// Canonical node path (`/config/db`); for a sequential create,
        /// the prefix the counter is appended to.
        path: String,
        /// The node's new data.
        data: Vec<u8>,
        /// Owner of a created node, making it ephemeral.
        session: Option<SessionId>,
        /// Append `-` and a zero-padded counter of the parent to the last
        /// component; always creates. The HTTP edge drops a trailing `-`
        /// first (`path::sequential_request_path`).
        sequential: bool,
        /// Compare-and-set: 0 means "must not exist".
        expected_version: Option<u64>,
    },
    /// Deletes a generic node without children.
    Delete {
        /// Canonical node path.
        path: String,
        /// Compare-and-delete: refused unless the node has this version.
        expected_version: Option<u64>,
    },
    /// Queues the session in a lock or election: creates an ephemeral
    /// sequential node unless the session already has one there, in which
    /// case that node is returned unchanged (idempotent acquire).
    Acquire {
        /// Lock or election.
        kind: QueueKind,
        /// The lock's or election's name (`orders/42`).
        name: String,
        /// The session that queues.
        session: SessionId,
        /// Node data (an election candidate's value; empty for locks).
        data: Vec<u8>,
        /// False for try-lock: refuse with `LockHeld` instead of queueing
        /// behind another session.
        wait: bool,
    },
    /// Deletes the session's node in a queue (release if held, cancel if
    /// waiting). With `withdraw`, only if that exact node is the
    /// session's and still *waiting*: a timed-out acquire withdraws its own
    /// node this way, so it can neither remove a node a later acquire
    /// created nor take away a grant a concurrent retry of the same
    /// session was just given (`AlreadyGranted` then).
    Release {
        /// Lock or election.
        kind: QueueKind,
        /// The lock's or election's name.
        name: String,
        /// The session whose node goes.
        session: SessionId,
        /// The full path of the waiting node to withdraw, if this is a
        /// withdrawal.
        withdraw: Option<String>,
    },
    /// The election leader changes its value.
    Proclaim {
        /// The election's name.
        name: String,
        /// The leader's session (refused for any other).
        session: SessionId,
        /// The new value.
        value: Vec<u8>,
    },
    /// Opens a session on behalf of an authenticated principal (the name
    /// of the bearer token that asked, docs/security.md): only that
    /// principal, or a cluster admin, may use the session afterwards.
    /// Otherwise as `OpenSession`. Appended last, so logs and snapshots
    /// written before it existed still decode (bincode numbers variants).
    OpenSessionAs {
        /// The new session's id.
        id: SessionId,
        /// The token name the session belongs to.
        principal: String,
        /// A label for humans, as in `OpenSession`.
        owner: String,
        /// Time to live without a keepalive.
        ttl_ms: u64,
    },
    /// Queues the session in a read-write lock (`shared.rs`): readers at
    /// the head share it, a writer holds alone, FIFO. Idempotent like
    /// `Acquire` (a different mode than the queued one is refused).
    AcquireRwLock {
        /// The lock's name.
        name: String,
        /// The session that queues.
        session: SessionId,
        /// Read or write.
        mode: RwMode,
        /// False for try-lock: refuse with `LockHeld` instead of waiting.
        wait: bool,
    },
    /// Queues the session in a semaphore of `permits` holders
    /// (`shared.rs`). The first acquire fixes the limit while anyone is
    /// queued; a different one is refused with `LimitMismatch`.
    AcquireSemaphore {
        /// The semaphore's name.
        name: String,
        /// The session that queues.
        session: SessionId,
        /// How many may hold at once.
        permits: u64,
        /// False for try-acquire.
        wait: bool,
    },
    /// Deletes the session's node in a read-write lock or semaphore, as
    /// `Release` does for locks (with the same `withdraw`).
    ReleaseShared {
        /// Read-write lock or semaphore.
        kind: SharedKind,
        /// Its name.
        name: String,
        /// The session whose node goes.
        session: SessionId,
        /// The full path of the waiting node to withdraw, if this is a
        /// withdrawal.
        withdraw: Option<String>,
    },
    /// Queues the session in every named lock at once (`multilock.rs`):
    /// it holds when it heads all of them. Idempotent.
    AcquireMulti {
        /// The locks' names (mutexes, as in `Acquire`).
        locks: Vec<String>,
        /// The session that queues.
        session: SessionId,
        /// False for try-lock: refuse unless every lock is free.
        wait: bool,
    },
    /// Deletes the session's nodes in every named lock.
    ReleaseMulti {
        /// The locks' names.
        locks: Vec<String>,
        /// The session whose nodes go.
        session: SessionId,
        /// Withdraw only the set queued at this sequence, and only while
        /// it does not hold.
        withdraw: Option<u64>,
    },
    /// A node write that commits only while `guard`'s fencing token is
    /// the lock's current holder, checked in the same log entry (API
    /// `PUT /v1/nodes/{path}` with `if_holder`; `txn.rs`). Appended after
    /// every older variant, so older logs still decode.
    GuardedWrite {
        /// The lock and token that must still hold.
        guard: HolderGuard,
        /// The write.
        op: TxnOp,
    },
    /// Compares, then `success` if all hold, else `failure`, atomically
    /// (API `POST /v1/txn`; `txn.rs`).
    Txn {
        /// Conditions, all of which must hold for `success`.
        compare: Vec<Compare>,
        /// Writes when every compare holds.
        success: Vec<TxnOp>,
        /// Writes otherwise.
        failure: Vec<TxnOp>,
    },
    /// Queues the session in a mutex with a lock-delay (`lock_delay.rs`):
    /// as `Acquire` of a lock with empty data, and the acquire that
    /// creates the lock's queue fixes its delay; a different one is
    /// refused while anyone is queued. Appended last, so older logs
    /// still decode.
    AcquireWithDelay {
        /// The lock's name.
        name: String,
        /// The session that queues.
        session: SessionId,
        /// False for try-lock.
        wait: bool,
        /// After the holder's session ends, nobody is granted the lock
        /// for this long (0: no delay); at most `MAX_LOCK_DELAY_MS`.
        lock_delay_ms: u64,
    },
    /// The leader measured these held-off nodes' delays out: delete each
    /// that is still held off and grant the next in line. Others are
    /// skipped, so a retry or a late proposal is harmless.
    EndLockDelays {
        /// Full paths of the held-off nodes.
        nodes: Vec<String>,
    },
    /// Strict tree operations, all or nothing (`tree_ops.rs`): the
    /// ZooKeeper door's writes. Appended last, so older logs still decode.
    TreeOps {
        /// The operations, applied in order.
        ops: Vec<TreeOp>,
    },
    /// A node write (`Put`, `Delete`, `Txn`, `GuardedWrite`, `TreeOps`)
    /// with its proposer's wall-clock time, which becomes the created and
    /// modified times of the nodes it writes (ZooKeeper's `ctime` and
    /// `mtime`). The state's clock keeps the latest time seen and never
    /// goes back, so a proposer whose clock lags writes the previous time
    /// again; unstamped commands (locks, sessions) use that clock too.
    /// Any other command inside is refused. Appended last, so older logs
    /// still decode.
    Stamped {
        /// Milliseconds since the Unix epoch on the proposer.
        time_ms: u64,
        /// The write.
        command: Box<Command>,
    },
    /// A write to the etcd-style flat key space (`kv/`). Appended last,
    /// so older logs still decode.
    Kv(crate::kv::KvOp),
}

impl Command {
    /// True when applying the command twice has the same effect as once,
    /// so a proposal whose answer was lost may be sent again: open (same
    /// id), acquire (the session's existing node is returned, with
    /// `created: false`), and the leader's checkpoint/renew bookkeeping.
    pub fn is_idempotent(&self) -> bool {
        if let Command::Stamped { command, .. } = self {
            return command.is_idempotent();
        }
        matches!(
            self,
            Command::OpenSession { .. }
                | Command::OpenSessionAs { .. }
                | Command::Acquire { .. }
                | Command::AcquireRwLock { .. }
                | Command::AcquireSemaphore { .. }
                | Command::AcquireMulti { .. }
                | Command::AcquireWithDelay { .. }
                | Command::EndLockDelays { .. }
                | Command::CheckpointSessions { .. }
                | Command::RenewSessions { .. }
        )
    }
}

impl Command {
    /// True for the node writes `Stamped` may carry.
    pub fn takes_a_time(&self) -> bool {
        matches!(
            self,
            Command::Put { .. }
                | Command::Delete { .. }
                | Command::Txn { .. }
                | Command::GuardedWrite { .. }
                | Command::TreeOps { .. }
        )
    }
}

/// What a successful command produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// A session exists (opened now, or by an earlier retry).
    SessionOpened {
        /// Its id.
        id: SessionId,
        /// The TTL it was granted.
        ttl_ms: u64,
    },
    /// Closed or expired; lists the nodes that went with it.
    SessionEnded {
        /// The session that ended.
        id: SessionId,
        /// Paths of the nodes it owned, now deleted.
        deleted: Vec<String>,
    },
    /// A generic node was written.
    Put {
        /// Its full path (with the counter, for a sequential create).
        path: String,
        /// True when this write created it.
        created: bool,
        /// Its version after the write (1 when created).
        version: u64,
        /// The revision that created it.
        create_revision: u64,
        /// The revision of this write.
        mod_revision: u64,
        /// The session the node belongs to (kept from its creation by an
        /// update), so a PUT answers without a second, linearizable read.
        ephemeral_owner: Option<SessionId>,
    },
    /// A generic node was deleted.
    Deleted {
        /// Its path.
        path: String,
    },
    /// Checkpoints recorded or cleared, for this many sessions.
    SessionsCheckpointed {
        /// How many listed sessions existed and had their checkpoint
        /// changed (unknown ids and unchanged values are skipped).
        count: usize,
    },
    /// The session is queued (or already was): its place.
    Acquired(Acquisition),
    /// The session's queue node was deleted.
    Released {
        /// The deleted node's path.
        node: String,
        /// True when it held the lock (the next waiter is granted).
        was_holder: bool,
    },
    /// The election leader's value changed.
    Proclaimed {
        /// The leader's queue node, which carries the new value.
        node: String,
    },
    /// The session's multi-lock is queued (or already was).
    MultiAcquired(MultiAcquisition),
    /// The session's nodes in a multi-lock's locks were deleted.
    MultiReleased {
        /// The deleted nodes' paths.
        nodes: Vec<String>,
        /// True when the set held (every node headed its queue).
        was_holder: bool,
    },
    /// A transaction ran (appended last, as `Command::Txn`).
    Txn {
        /// True when every compare held and `success` ran.
        succeeded: bool,
        /// One answer per operation of the branch that ran, in order.
        responses: Vec<Response>,
    },
    /// Held-off locks were handed on (`Command::EndLockDelays`).
    LockDelaysEnded {
        /// The held-off nodes deleted (those still held off).
        nodes: Vec<String>,
    },
    /// Strict tree operations ran (`Command::TreeOps`).
    TreeOps {
        /// One answer per operation, in order.
        results: Vec<TreeOpResult>,
    },
    /// A key-space write ran (`Command::Kv`).
    Kv(crate::kv::KvResponse),
}

/// A multi-lock's place after an acquire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MultiAcquisition {
    /// The session's node in each lock, in the order the locks were named.
    pub nodes: Vec<String>,
    /// The nodes' shared create revision: each lock's fencing token.
    pub fencing_token: u64,
    /// True when the set holds every lock.
    pub held: bool,
    /// False when an earlier acquire had already queued this set.
    pub created: bool,
}

/// The session's place in a queue after an acquire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Acquisition {
    /// Full tree path of the session's node.
    pub node: String,
    /// The node's create revision: the fencing token once it holds.
    pub fencing_token: u64,
    /// True when the node is first in the queue.
    pub held: bool,
    /// False when an earlier acquire had already queued this node.
    pub created: bool,
}

/// A node removed by a command, so the node layer can wake exactly the
/// waiter queued behind it and the waiter that owned it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeletedNode {
    /// Its full path.
    pub path: String,
    /// The session that owned it, if it was ephemeral.
    pub owner: Option<SessionId>,
}

/// Side effects of one applied command, for the layer that wakes waiters
/// and feeds watchers. Empty when the command failed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Effects {
    /// Nodes deleted, in deletion order.
    pub deleted: Vec<DeletedNode>,
    /// Queue nodes that became holders (the head of their queue).
    pub granted: Vec<String>,
    /// Nodes created or whose data changed.
    pub written: Vec<String>,
    /// Sessions that ended (closed or expired).
    pub ended_sessions: Vec<SessionId>,
    /// Lock nodes held off by their session's end (`lock_delay.rs`): the
    /// leader times each and then proposes `EndLockDelays`.
    pub held_off: Vec<HeldOff>,
}

/// A lock held off after its holder's session ended: nobody is granted
/// it until the leader ends the delay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldOff {
    /// The held-off node's full path (the former holder's node).
    pub node: String,
    /// The lock's delay in milliseconds.
    pub delay_ms: u64,
}

/// The outcome of applying one command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    /// The answer for the client that proposed the command.
    pub result: Result<Response, CoreError>,
    /// Global revision after the command (unchanged on error or no-op).
    pub revision: u64,
    /// What changed, for waiters and watchers.
    pub effects: Effects,
}

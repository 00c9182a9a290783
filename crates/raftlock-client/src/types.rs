//! Values the client hands back, the same for both transports.

use std::time::Duration;

pub use raftlock_core::SessionId;

use crate::error::{ClientError, Result};

/// Checks a lock or election name before use. Names go into URL paths,
/// so anything the server would refuse is refused before it can change a
/// path's meaning (`?`, `#`, `..`); the embedded client checks the same.
pub(crate) fn checked(name: &str) -> Result<&str> {
    raftlock_core::path::validate_lock_name(name)
        .map(|()| name)
        .map_err(|e| ClientError::BadRequest(e.to_string()))
}

/// A session as opened: its id and the TTL the cluster granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// The session's id (32 hex digits when printed).
    pub id: SessionId,
    /// Time to live without a keepalive.
    pub ttl: Duration,
}

/// How one acquire or campaign request waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Poll {
    /// Longest wait for the grant; zero is a try-lock.
    pub wait: Duration,
    /// On timeout, keep the session's waiting node queued, so the next
    /// poll waits in the same place in line. Whoever sets it must release
    /// the lock when it gives up waiting.
    pub keep_queued: bool,
    /// Locks only: the lock's lock-delay (docs/api.md, "Lock-delay"). The
    /// acquire that creates the lock's queue fixes it; `None` takes the
    /// lock's.
    pub lock_delay: Option<Duration>,
}

impl From<Duration> for Poll {
    /// A wait whose timeout withdraws the node.
    fn from(wait: Duration) -> Self {
        Poll {
            wait,
            keep_queued: false,
            lock_delay: None,
        }
    }
}

/// A granted lock, or a won election.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The lock (or election) name.
    pub name: String,
    /// Full tree path of the session's queue node
    /// (`/locks/orders/42/lock-0000000007`).
    pub node: String,
    /// The node's create revision: strictly increasing across all grants
    /// of all locks. Pass it to the storage you protect.
    pub fencing_token: u64,
    /// The session that holds it.
    pub session: SessionId,
}

/// The holder of a lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The holding session; `None` when it belongs to another principal
    /// of a cluster with bearer tokens (docs/security.md).
    pub session: Option<SessionId>,
    /// That session's owner label.
    pub owner: String,
    /// The token name that opened it; `None` without tokens.
    pub principal: Option<String>,
    /// Its queue node.
    pub node: String,
    /// Its fencing token.
    pub fencing_token: u64,
    /// The revision at which it was granted.
    pub since_revision: u64,
}

/// A session queued behind the holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiter {
    /// The waiting session; `None` when it belongs to another principal.
    pub session: Option<SessionId>,
    /// That session's owner label.
    pub owner: String,
    /// The token name that opened it; `None` without tokens.
    pub principal: Option<String>,
    /// Its queue node.
    pub node: String,
}

/// A lock's queue as of a linearizable read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockState {
    /// The lock name.
    pub name: String,
    /// Who holds it, if anyone.
    pub holder: Option<Holder>,
    /// Who waits, in queue order.
    pub waiters: Vec<Waiter>,
    /// The lock's lock-delay (`Mutex::with_lock_delay`), if it has one.
    pub lock_delay: Option<Duration>,
    /// True while the lock is held off: its holder's session ended and
    /// nobody is granted it until the delay has passed (`holder` is then
    /// `None`).
    pub held_off: bool,
}

/// Answer of a fencing check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FencingCheck {
    /// True when the token is the current holder's.
    pub valid: bool,
    /// The current holder's token, if the lock is held.
    pub current_token: Option<u64>,
}

/// An election's leader and its proclaimed value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leader {
    /// The leading session; `None` when it belongs to another principal.
    pub session: Option<SessionId>,
    /// The token name that opened it; `None` without tokens.
    pub principal: Option<String>,
    /// The value it campaigned with or last proclaimed (e.g. `host-a:8080`).
    pub value: String,
    /// Its queue node.
    pub node: String,
    /// Its fencing token (increases with every new leader).
    pub fencing_token: u64,
}

/// The cluster as the member that answered sees it (`GET /v1/cluster`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct ClusterInfo {
    /// The member that answered.
    pub node_id: u64,
    /// The leader that member knows, if any.
    pub leader_id: Option<u64>,
    /// Its current Raft term.
    pub term: u64,
    /// Every member of the Raft membership, learners included.
    pub members: Vec<MemberInfo>,
}

/// One member in a [`ClusterInfo`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct MemberInfo {
    /// Its node id.
    pub id: u64,
    /// Where it serves the client API.
    pub api_addr: String,
    /// Where it serves the Raft routes.
    pub raft_addr: String,
    /// `leader`, `follower`, `candidate` or `learner`.
    pub role: String,
    /// False for a learner (being added: receives the log, does not vote).
    pub voter: bool,
    /// Its applied log index: known for the answering member, and for the
    /// others only when the answering member leads.
    pub applied_index: Option<u64>,
}

/// One lock of a listing (`GET /v1/locks?prefix=`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockSummary {
    /// The lock's name.
    pub name: String,
    /// Who holds it; `None` when free.
    pub holder: Option<Holder>,
    /// How many sessions wait behind the holder.
    pub waiters: u64,
    /// The lock's lock-delay, if it has one (as in [`LockState`]).
    pub lock_delay: Option<Duration>,
    /// True while the lock is held off (as in [`LockState`]).
    pub held_off: bool,
}

/// A holder of a read-write lock, with what it holds it for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RwHolder {
    /// [`Mode::Read`](crate::Mode::Read) or
    /// [`Mode::Write`](crate::Mode::Write).
    pub mode: crate::Mode,
    /// The holder.
    pub holder: Holder,
}

/// One read-write lock of a listing (`GET /v1/rwlocks?prefix=`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RwLockSummary {
    /// The read-write lock's name.
    pub name: String,
    /// Who holds it (several readers, or one writer), first in line first.
    pub holders: Vec<RwHolder>,
    /// How many sessions wait behind the holders.
    pub waiters: u64,
}

/// One semaphore of a listing (`GET /v1/semaphores?prefix=`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SemaphoreSummary {
    /// The semaphore's name.
    pub name: String,
    /// The number of places in force; `None` while nobody is queued.
    pub permits: Option<u64>,
    /// Who holds a place, first in line first.
    pub holders: Vec<Holder>,
    /// How many sessions wait behind the holders.
    pub waiters: u64,
}

/// A node written by [`LockClient::put_node`](crate::LockClient::put_node)
/// or a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeWritten {
    /// Its full tree path (with the counter, for a sequential create).
    pub path: String,
    /// True when this write created it.
    pub created: bool,
    /// Its version after the write.
    pub version: u64,
    /// The revision that created it.
    pub create_revision: u64,
    /// The revision of this write.
    pub mod_revision: u64,
}

/// What one operation of a transaction did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnOpResult {
    /// A put.
    Put(NodeWritten),
    /// A delete, of this path.
    Delete(String),
}

/// A transaction's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnOutcome {
    /// True when every compare held and the `success` branch ran.
    pub succeeded: bool,
    /// One result per operation of the branch that ran.
    pub responses: Vec<TxnOpResult>,
}

/// A transaction: compares, then `success` writes if they all hold, else
/// `failure` writes, in one log entry (docs/api.md, Transactions).
/// Paths are tree paths (`/config/db`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Txn {
    /// Conditions, all of which must hold for `success`.
    pub compare: Vec<raftlock_core::Compare>,
    /// Writes when every compare holds.
    pub success: Vec<raftlock_core::TxnOp>,
    /// Writes otherwise.
    pub failure: Vec<raftlock_core::TxnOp>,
}

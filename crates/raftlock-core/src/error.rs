//! Typed errors of the state machine. Every error leaves the state exactly
//! as it was; the HTTP edge maps each variant to one API error code.

use serde::{Deserialize, Serialize};

use crate::types::SessionId;

/// Why a command was refused. Carried inside the Raft response, so it is
/// serializable and deterministic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum CoreError {
    /// A lock name or node path breaks the naming rules.
    #[error("invalid name {name:?}: {reason}")]
    BadName {
        /// The name as given.
        name: String,
        /// Which rule it breaks.
        reason: String,
    },
    /// A well-formed request that makes no sense (TTL 0, writing the root,
    /// writing inside the lock recipe's reserved prefixes, …).
    #[error("invalid request: {0}")]
    Invalid(String),
    /// The session is unknown: never opened, closed or expired.
    #[error("session {0} not found")]
    SessionNotFound(SessionId),
    /// An open-session retry reused an id with different parameters.
    #[error("session {0} already exists with other parameters")]
    SessionConflict(SessionId),
    /// The node (or the session's node in a lock) does not exist.
    #[error("{0} not found")]
    NotFound(String),
    /// Releasing a lock that another session holds.
    #[error("{lock} is held by another session")]
    NotOwner {
        /// The lock's name.
        lock: String,
    },
    /// A try-lock found the lock held.
    #[error("{lock} is held by session {holder}")]
    LockHeld {
        /// The lock's name.
        lock: String,
        /// The session holding it.
        holder: SessionId,
    },
    /// Compare-and-set failed.
    #[error("version mismatch on {path}: expected {expected}, found {actual}")]
    VersionMismatch {
        /// The node's path.
        path: String,
        /// The version the request expected (0: must not exist).
        expected: u64,
        /// The version it has (0: it does not exist).
        actual: u64,
    },
    /// A withdrawal found its node already granted: the grant stands.
    #[error("{node} was granted before it could be withdrawn")]
    AlreadyGranted {
        /// The granted node's path.
        node: String,
    },
    /// Proclaim by a session that does not lead the election.
    #[error("session is not the leader of election {election}")]
    NotLeader {
        /// The election's name.
        election: String,
    },
    /// Deleting a node that still has children.
    #[error("{0} has children")]
    NotEmpty(String),
    /// Creating a child under an ephemeral node (it would outlive nothing
    /// sensible when the session ends).
    #[error("{0} is ephemeral and cannot have children")]
    EphemeralParent(String),
    /// A counter would overflow u64 (after ~10^19 operations).
    #[error("sequence counter of {0} is exhausted")]
    SequenceExhausted(String),
    /// A semaphore acquire asked for another limit than the one its
    /// first acquire fixed.
    #[error("semaphore {semaphore} has {limit} permits, not {requested}")]
    LimitMismatch {
        /// The semaphore's name.
        semaphore: String,
        /// The limit it has.
        limit: u64,
        /// The limit the acquire asked for.
        requested: u64,
    },
    /// A guarded write's fencing token is not the lock's current holder
    /// (the lock was released, expired or granted on): nothing written.
    #[error(
        "fencing token {fencing_token} is not the current holder of {lock} (current: {current:?})"
    )]
    NotHolder {
        /// The lock's name.
        lock: String,
        /// The token the write carried.
        fencing_token: u64,
        /// The current holder's token, `None` when nobody holds it.
        current: Option<u64>,
    },
    /// An operation of a transaction failed; the ones before it were
    /// rolled back and nothing changed.
    #[error("transaction operation {index} failed: {error}")]
    TxnOpFailed {
        /// The operation's position in its branch, from 0.
        index: usize,
        /// Why it failed.
        error: Box<CoreError>,
    },
    /// A key-space read or compaction named a revision after the newest.
    #[error("required revision {requested} is a future revision (current {current})")]
    FutureRevision {
        /// The revision asked for.
        requested: u64,
        /// The state's revision.
        current: u64,
    },
    /// A key-space read or watch named a revision below the compaction
    /// floor: its history is gone.
    #[error("required revision has been compacted (compact revision {compact_revision})")]
    Compacted {
        /// The oldest revision still kept.
        compact_revision: u64,
    },
    /// A key-space put kept a value or lease of a key that does not exist.
    #[error("key not found")]
    KeyNotFound,
}

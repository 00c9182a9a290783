//! Errors of node operations. Serializable because a follower forwards
//! operations to the leader and relays its answer unchanged.

use raftlock_core::CoreError;

pub use crate::replica::membership::MembershipError;
use raftlock_api::ErrorCode;
use serde::{Deserialize, Serialize};

/// Why an operation did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum NodeError {
    /// The state machine refused the command; nothing changed.
    #[error(transparent)]
    Core(#[from] CoreError),
    /// No leader is reachable right now. Nothing was applied: safe to retry.
    #[error("no leader is reachable right now; retry")]
    NoLeader,
    /// The request reached the leader but its answer was lost: it may or
    /// may not have been applied.
    #[error("outcome unknown: {0}")]
    OutcomeUnknown(String),
    /// An acquire's wait elapsed before the lock was granted.
    #[error("timed out waiting for the lock")]
    Timeout,
    /// The waited-for node was deleted by another request of the session.
    #[error("the queued node was withdrawn by another request")]
    Withdrawn,
    /// A membership change was refused (see its kind).
    #[error(transparent)]
    Membership(#[from] MembershipError),
    /// The node is shutting down.
    #[error("the node is shutting down")]
    ShuttingDown,
    /// A bug or an IO failure; see the node's log.
    #[error("internal error: {0}")]
    Internal(String),
    /// This member's log disk failed a durability barrier (`fdatasync`
    /// returned an error): it refuses every request that needs the Raft
    /// log until it is restarted. Nothing was applied: another member can
    /// serve the request.
    #[error("this member's log storage failed ({0}); it accepts no writes until restarted: use another member")]
    StorageFailed(String),
    /// This member's log disk is full (`ENOSPC`): like `StorageFailed`,
    /// the member left the Raft group and refuses requests that need the
    /// log, until its disk has room again; then it reopens its log and
    /// rejoins by itself, without a restart. Nothing was applied.
    #[error("this member's disk is full ({0}); it accepts no writes until space is freed (it then rejoins by itself): use another member")]
    DiskFull(String),
}

impl NodeError {
    pub(crate) fn internal(e: impl std::fmt::Display) -> Self {
        NodeError::Internal(e.to_string())
    }

    /// The contract's code for this error: the one the HTTP API answers
    /// with, and the one the embedded client classifies by.
    pub fn code(&self) -> ErrorCode {
        match self {
            NodeError::Core(core) => core_code(core),
            NodeError::NoLeader => ErrorCode::NoLeader,
            NodeError::OutcomeUnknown(_) => ErrorCode::OutcomeUnknown,
            NodeError::Timeout => ErrorCode::Timeout,
            NodeError::Withdrawn => ErrorCode::Withdrawn,
            NodeError::ShuttingDown => ErrorCode::ShuttingDown,
            NodeError::Internal(_) => ErrorCode::Internal,
            NodeError::StorageFailed(_) => ErrorCode::StorageFailed,
            NodeError::DiskFull(_) => ErrorCode::DiskFull,
            NodeError::Membership(m) => match m {
                MembershipError::MemberExists { .. } => ErrorCode::MemberExists,
                MembershipError::UnknownMember { .. } => ErrorCode::NotFound,
                MembershipError::LastVoter { .. } => ErrorCode::LastVoter,
                MembershipError::InProgress(_) => ErrorCode::MembershipChanging,
                MembershipError::NotCaughtUp { .. } => ErrorCode::NotCaughtUp,
                MembershipError::Invalid(_) => ErrorCode::BadRequest,
                MembershipError::Replaced { .. } => ErrorCode::MemberReplaced,
                MembershipError::OtherCluster { .. } => ErrorCode::OtherCluster,
                MembershipError::Unreachable { .. } => ErrorCode::MemberUnreachable,
            },
        }
    }
}

/// The contract's code for a refusal of the state machine. A failed
/// transaction operation has its own error's code (the message names the
/// operation).
pub fn core_code(error: &CoreError) -> ErrorCode {
    match error {
        CoreError::BadName { .. } | CoreError::Invalid(_) => ErrorCode::BadRequest,
        CoreError::SessionNotFound(_) => ErrorCode::SessionNotFound,
        CoreError::NotFound(_) => ErrorCode::NotFound,
        CoreError::NotOwner { .. } => ErrorCode::NotOwner,
        CoreError::LockHeld { .. } => ErrorCode::LockHeld,
        CoreError::VersionMismatch { .. } => ErrorCode::VersionMismatch,
        CoreError::NotLeader { .. } => ErrorCode::NotLeader,
        CoreError::NotEmpty(_) => ErrorCode::NotEmpty,
        CoreError::EphemeralParent(_) => ErrorCode::EphemeralParent,
        CoreError::SessionConflict(_) => ErrorCode::SessionConflict,
        CoreError::SequenceExhausted(_) => ErrorCode::SequenceExhausted,
        // The node turns this into the grant; mapped for completeness.
        CoreError::AlreadyGranted { .. } => ErrorCode::AlreadyGranted,
        CoreError::LimitMismatch { .. } => ErrorCode::LimitMismatch,
        CoreError::NotHolder { .. } => ErrorCode::NotHolder,
        CoreError::TxnOpFailed { error, .. } => core_code(error),
        // The key space's (etcd door): a request the state cannot answer.
        CoreError::FutureRevision { .. } | CoreError::Compacted { .. } => ErrorCode::BadRequest,
        CoreError::KeyNotFound => ErrorCode::NotFound,
    }
}

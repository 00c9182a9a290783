//! One error type for both transports, mapped once from the API's error
//! codes (HTTP) or from `NodeError` (embedded).
//!
//! The split that matters to a caller is [`ClientError::outcome_unknown`]:
//! every other variant is a *definite* answer (the cluster said no, or the
//! request was never delivered), so nothing changed; an unknown outcome
//! means a write may or may not have been applied.

use crate::session::LostReason;

/// Why a client operation did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// Malformed request: bad lock name, TTL out of range, wait too long
    /// (`bad_request`).
    #[error("bad request: {0}")]
    BadRequest(String),
    /// The session is unknown: never opened, closed, or expired
    /// (`session_not_found`). Its locks are gone.
    #[error("session not found: {0}")]
    SessionNotFound(String),
    /// The lock, election or node does not exist (`not_found`); for a
    /// release: the session has no node there and nobody holds the lock.
    #[error("not found: {0}")]
    NotFound(String),
    /// Releasing a lock another session holds (`not_owner`).
    #[error("not the owner: {0}")]
    NotOwner(String),
    /// A try-lock found the lock held (`lock_held`).
    #[error("lock held: {0}")]
    LockHeld(String),
    /// The wait elapsed before the grant (`timeout`); the node this
    /// request queued was withdrawn.
    #[error("timed out waiting: {0}")]
    Timeout(String),
    /// Proclaim by a session that does not lead the election (`not_leader`).
    #[error("not the election leader: {0}")]
    NotLeader(String),
    /// The queued node was deleted by another request of the same session
    /// while this one waited (a release racing an acquire).
    #[error("queued node withdrawn: {0}")]
    Withdrawn(String),
    /// No leader was reachable, retries included (`no_leader`). Nothing
    /// was applied; safe to retry later.
    #[error("no leader: {0}")]
    NoLeader(String),
    /// No endpoint could be reached; the request was never delivered.
    #[error("no endpoint reachable: {0}")]
    Unavailable(String),
    /// The recipe's session was lost while the operation waited.
    #[error("session lost ({0:?})")]
    SessionLost(LostReason),
    /// The node is shutting down (`shutting_down`; over HTTP another
    /// endpoint is tried first).
    #[error("node shutting down")]
    ShuttingDown,
    /// Any other refusal the server answered with (`too_large`,
    /// `version_mismatch`, …): definite, nothing changed.
    #[error("{code}: {message}")]
    Rejected {
        /// The API error code.
        code: String,
        /// The server's human text.
        message: String,
    },
    /// The request may have been applied, but its answer was lost
    /// (timeout or connection reset after sending, on every retry).
    #[error("outcome unknown: {0}")]
    OutcomeUnknown(String),
    /// The answer could not be understood (not raftlock, or a version
    /// mismatch). For a write, the outcome is unknown.
    #[error("unexpected answer: {0}")]
    Protocol(String),
    /// A bug or IO failure inside the embedded node; outcome unknown.
    #[error("internal error: {0}")]
    Internal(String),
}

impl ClientError {
    /// True when a write may or may not have taken effect. Every other
    /// error is definite: the state did not change.
    pub fn outcome_unknown(&self) -> bool {
        matches!(
            self,
            ClientError::OutcomeUnknown(_) | ClientError::Protocol(_) | ClientError::Internal(_)
        )
    }

    /// True for errors that say "try again later" and nothing else
    /// (no leader right now, no endpoint reachable).
    pub fn is_transient(&self) -> bool {
        matches!(self, ClientError::NoLeader(_) | ClientError::Unavailable(_))
    }

    /// Maps an API error body's code (see `docs/api.md`) to a variant.
    pub(crate) fn from_api(code: &str, message: String) -> ClientError {
        match code {
            "bad_request" => ClientError::BadRequest(message),
            "session_not_found" => ClientError::SessionNotFound(message),
            "not_found" => ClientError::NotFound(message),
            "not_owner" => ClientError::NotOwner(message),
            "lock_held" => ClientError::LockHeld(message),
            "timeout" => ClientError::Timeout(message),
            "not_leader" => ClientError::NotLeader(message),
            "withdrawn" => ClientError::Withdrawn(message),
            "no_leader" => ClientError::NoLeader(message),
            "outcome_unknown" => ClientError::OutcomeUnknown(message),
            "shutting_down" => ClientError::ShuttingDown,
            "internal" | "internal_error" => ClientError::Internal(message),
            _ => ClientError::Rejected {
                code: code.to_string(),
                message,
            },
        }
    }
}

/// Shorthand for this crate's results.
pub type Result<T, E = ClientError> = std::result::Result<T, E>;

#[cfg(feature = "embedded")]
mod from_node {
    use raftlock_core::CoreError;
    use raftlock_node::NodeError;

    use super::ClientError;

    impl From<NodeError> for ClientError {
        fn from(e: NodeError) -> Self {
            let text = e.to_string();
            match e {
                NodeError::Core(core) => core.into(),
                NodeError::NoLeader => ClientError::NoLeader(text),
                NodeError::OutcomeUnknown(_) => ClientError::OutcomeUnknown(text),
                NodeError::Timeout => ClientError::Timeout(text),
                NodeError::Withdrawn => ClientError::Withdrawn(text),
                NodeError::ShuttingDown => ClientError::ShuttingDown,
                NodeError::Internal(_) => ClientError::Internal(text),
                NodeError::StorageFailed(_) => ClientError::Rejected {
                    code: "storage_failed".to_string(),
                    message: text,
                },
                NodeError::DiskFull(_) => ClientError::Rejected {
                    code: "disk_full".to_string(),
                    message: text,
                },
                // Membership changes are not a client operation; mapped
                // for completeness, with the API's codes.
                NodeError::Membership(m) => {
                    use raftlock_node::MembershipError as M;
                    let code = match m {
                        M::UnknownMember { .. } => return ClientError::NotFound(text),
                        M::Invalid(_) => return ClientError::BadRequest(text),
                        M::MemberExists { .. } => "member_exists",
                        M::LastVoter { .. } => "last_voter",
                        M::InProgress(_) => "membership_changing",
                        M::NotCaughtUp { .. } => "not_caught_up",
                        M::Replaced { .. } => "member_replaced",
                        M::OtherCluster { .. } => "other_cluster",
                        M::Unreachable { .. } => "member_unreachable",
                    };
                    ClientError::Rejected {
                        code: code.to_string(),
                        message: text,
                    }
                }
            }
        }
    }

    impl From<CoreError> for ClientError {
        fn from(e: CoreError) -> Self {
            let text = e.to_string();
            let code = match e {
                CoreError::BadName { .. } | CoreError::Invalid(_) => "bad_request",
                CoreError::SessionNotFound(_) => "session_not_found",
                CoreError::NotFound(_) => "not_found",
                CoreError::NotOwner { .. } => "not_owner",
                CoreError::LockHeld { .. } => "lock_held",
                CoreError::NotLeader { .. } => "not_leader",
                CoreError::VersionMismatch { .. } => "version_mismatch",
                CoreError::SessionConflict(_) => "session_conflict",
                CoreError::NotEmpty(_) => "not_empty",
                CoreError::EphemeralParent(_) => "ephemeral_parent",
                CoreError::SequenceExhausted(_) => "sequence_exhausted",
                CoreError::AlreadyGranted { .. } => "already_granted",
                CoreError::LimitMismatch { .. } => "limit_mismatch",
            };
            ClientError::from_api(code, text)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_codes_map_to_variants() {
        let e = ClientError::from_api("session_not_found", "gone".into());
        assert_eq!(e, ClientError::SessionNotFound("gone".into()));
        assert!(!e.outcome_unknown());
        assert!(ClientError::from_api("no_leader", String::new()).is_transient());
        let other = ClientError::from_api("too_large", "big".into());
        assert!(matches!(other, ClientError::Rejected { ref code, .. } if code == "too_large"));
        assert!(ClientError::OutcomeUnknown("x".into()).outcome_unknown());
    }
}

//! One error type for both transports, mapped once from the API's error
//! codes (HTTP) or from `NodeError` (embedded).
//!
//! The split that matters to a caller is [`ClientError::outcome_unknown`]:
//! every other variant is a *definite* answer (the cluster said no, or the
//! request was never delivered), so nothing changed; an unknown outcome
//! means a write may or may not have been applied.

pub use raftlock_api::ErrorCode;

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

    /// The contract's code of this error, when it has one (a local
    /// failure such as [`ClientError::Unavailable`] has none).
    pub fn code(&self) -> Option<ErrorCode> {
        use ErrorCode as C;
        Some(match self {
            ClientError::BadRequest(_) => C::BadRequest,
            ClientError::SessionNotFound(_) => C::SessionNotFound,
            ClientError::NotFound(_) => C::NotFound,
            ClientError::NotOwner(_) => C::NotOwner,
            ClientError::LockHeld(_) => C::LockHeld,
            ClientError::Timeout(_) => C::Timeout,
            ClientError::NotLeader(_) => C::NotLeader,
            ClientError::Withdrawn(_) => C::Withdrawn,
            ClientError::NoLeader(_) => C::NoLeader,
            ClientError::ShuttingDown => C::ShuttingDown,
            ClientError::OutcomeUnknown(_) => C::OutcomeUnknown,
            ClientError::Internal(_) => C::Internal,
            ClientError::Rejected { code, .. } => return ErrorCode::parse(code),
            ClientError::Unavailable(_)
            | ClientError::SessionLost(_)
            | ClientError::Protocol(_) => return None,
        })
    }

    /// The text that came with the error (the server's message, or why
    /// the transport failed), without the variant's own words; empty for
    /// the variants that carry none.
    pub fn message(&self) -> &str {
        match self {
            ClientError::BadRequest(m)
            | ClientError::SessionNotFound(m)
            | ClientError::NotFound(m)
            | ClientError::NotOwner(m)
            | ClientError::LockHeld(m)
            | ClientError::Timeout(m)
            | ClientError::NotLeader(m)
            | ClientError::Withdrawn(m)
            | ClientError::NoLeader(m)
            | ClientError::Unavailable(m)
            | ClientError::OutcomeUnknown(m)
            | ClientError::Protocol(m)
            | ClientError::Internal(m)
            | ClientError::Rejected { message: m, .. } => m,
            ClientError::SessionLost(_) | ClientError::ShuttingDown => "",
        }
    }

    /// Maps an API error body's code (see `docs/api.md`) to a variant.
    pub(crate) fn from_api(code: &str, message: String) -> ClientError {
        use ErrorCode as C;
        match ErrorCode::parse(code) {
            Some(C::BadRequest) => ClientError::BadRequest(message),
            Some(C::SessionNotFound) => ClientError::SessionNotFound(message),
            Some(C::NotFound) => ClientError::NotFound(message),
            Some(C::NotOwner) => ClientError::NotOwner(message),
            Some(C::LockHeld) => ClientError::LockHeld(message),
            Some(C::Timeout) => ClientError::Timeout(message),
            Some(C::NotLeader) => ClientError::NotLeader(message),
            Some(C::Withdrawn) => ClientError::Withdrawn(message),
            Some(C::NoLeader) => ClientError::NoLeader(message),
            Some(C::OutcomeUnknown) => ClientError::OutcomeUnknown(message),
            Some(C::ShuttingDown) => ClientError::ShuttingDown,
            Some(C::Internal) => ClientError::Internal(message),
            // An older server's spelling of `internal`.
            None if code == "internal_error" => ClientError::Internal(message),
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
        /// The variant the HTTP transport would give for the code the API
        /// answers this error with (`NodeError::code`).
        fn from(e: NodeError) -> Self {
            ClientError::from_api(e.code().as_str(), e.to_string())
        }
    }

    impl From<CoreError> for ClientError {
        fn from(e: CoreError) -> Self {
            ClientError::from_api(raftlock_node::core_code(&e).as_str(), e.to_string())
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
        assert_eq!(e.message(), "gone");
        assert_eq!(other.message(), "big");
        assert_eq!(ClientError::ShuttingDown.message(), "");
    }
}

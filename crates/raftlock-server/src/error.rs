//! The one place where an error becomes an HTTP response.
//!
//! Every failure of the API, whether refused by the state machine, by the
//! node layer, by an extractor or by the router itself, ends up as an
//! [`ApiError`] and leaves as `{"error": "<code>", "message": "<text>"}`
//! with the status of its code. The mapping from node and core errors is
//! written once, in the `From<NodeError>` and `From<CoreError>` impls.

use axum::http::header::{CONTENT_TYPE, RETRY_AFTER};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use raftlock_core::{CoreError, SessionId};
use raftlock_node::NodeError;

/// An API error: a stable machine-readable code, its HTTP status and a
/// human message. Codes are listed in `docs/api.md`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code} ({status}): {message}")]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    /// The error code (`bad_request`, `lock_held`, …).
    pub fn code(&self) -> &'static str {
        self.code
    }

    /// The HTTP status the code maps to.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The human-readable message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// 400: the request is malformed or breaks a rule.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// 408: an acquire with `keep_queued` timed out; its node stays queued.
    pub(crate) fn timeout_still_queued() -> Self {
        Self::new(
            StatusCode::REQUEST_TIMEOUT,
            "timeout",
            "wait_ms elapsed before the grant; the session's node stays queued \
             (keep_queued): acquire again to keep waiting in place, release to cancel",
        )
    }

    /// 401: no bearer token, or one the cluster does not know, while the
    /// API requires tokens (docs/security.md).
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    /// 403: the token is valid but lacks the permission (on that name,
    /// or over that session).
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    /// 404: the session is unknown, closed or expired.
    pub fn session_not_found(session: impl std::fmt::Display) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "session_not_found",
            format!("session {session} not found (unknown, closed or expired)"),
        )
    }

    /// 404: no such node, lock or route.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 413: a body or node data over the configured limit.
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", message)
    }

    /// 429: a limit that protects the cluster (sessions, waiters per
    /// lock) is reached; answered with `Retry-After`.
    pub fn too_many_requests(message: impl Into<String>) -> Self {
        Self::new(StatusCode::TOO_MANY_REQUESTS, "too_many_requests", message)
    }

    /// 408: the request body did not arrive within the configured time
    /// (a slow or stalled client); the connection is closed after it.
    pub(crate) fn request_timeout(message: impl Into<String>) -> Self {
        Self::new(StatusCode::REQUEST_TIMEOUT, "request_timeout", message)
    }

    /// 415: a body that is not `application/json`.
    pub fn unsupported_media_type() -> Self {
        Self::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "the request body must be JSON, sent with Content-Type: application/json",
        )
    }

    /// 405: the route exists, the method does not.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            message,
        )
    }

    /// 503: the server is shutting down; retry on another node.
    pub fn shutting_down() -> Self {
        Self::from(NodeError::ShuttingDown)
    }

    /// 503: the node has a leader but has not applied its whole log yet.
    pub fn not_caught_up(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "not_caught_up", message)
    }

    /// Any other status that reached the router's safety net (a response
    /// produced below the handlers without a JSON body).
    pub(crate) fn from_status(status: StatusCode) -> Self {
        match status {
            StatusCode::NOT_FOUND => Self::not_found("no such route"),
            StatusCode::UNAUTHORIZED => Self::unauthorized("a valid bearer token is required"),
            StatusCode::FORBIDDEN => Self::forbidden("permission denied"),
            StatusCode::METHOD_NOT_ALLOWED => {
                Self::method_not_allowed("method not allowed on this route")
            }
            StatusCode::PAYLOAD_TOO_LARGE => Self::too_large("request body too large"),
            StatusCode::UNSUPPORTED_MEDIA_TYPE => Self::unsupported_media_type(),
            s if s.is_client_error() => Self::bad_request(
                s.canonical_reason()
                    .unwrap_or("bad request")
                    .to_ascii_lowercase(),
            ),
            s => Self::new(
                s,
                "internal",
                s.canonical_reason().unwrap_or("internal error"),
            ),
        }
    }
}

/// A 405 for a path whose last component names no action (`POST
/// /v1/locks/x/frobnicate`): the path is a resource that only `allow` reads.
pub(crate) fn no_such_action(action: &str, allow: &'static str, actions: &str) -> Response {
    let shown: String = action.chars().take(64).collect();
    let mut response = ApiError::method_not_allowed(format!(
        "{shown:?} is not an action here; POST one of {actions}"
    ))
    .into_response();
    response
        .headers_mut()
        .insert(axum::http::header::ALLOW, HeaderValue::from_static(allow));
    response
}

impl From<CoreError> for ApiError {
    fn from(error: CoreError) -> Self {
        use StatusCode as S;
        let message = error.to_string();
        let (status, code) = match &error {
            CoreError::BadName { .. } | CoreError::Invalid(_) => (S::BAD_REQUEST, "bad_request"),
            CoreError::SessionNotFound(_) => (S::NOT_FOUND, "session_not_found"),
            CoreError::NotFound(_) => (S::NOT_FOUND, "not_found"),
            CoreError::NotOwner { .. } => (S::FORBIDDEN, "not_owner"),
            CoreError::LockHeld { .. } => (S::CONFLICT, "lock_held"),
            CoreError::VersionMismatch { .. } => (S::CONFLICT, "version_mismatch"),
            CoreError::NotLeader { .. } => (S::CONFLICT, "not_leader"),
            CoreError::NotEmpty(_) => (S::CONFLICT, "not_empty"),
            CoreError::EphemeralParent(_) => (S::CONFLICT, "ephemeral_parent"),
            CoreError::SessionConflict(_) => (S::CONFLICT, "session_conflict"),
            CoreError::SequenceExhausted(_) => (S::CONFLICT, "sequence_exhausted"),
            // The node turns this into the grant; mapped for completeness.
            CoreError::AlreadyGranted { .. } => (S::CONFLICT, "already_granted"),
        };
        ApiError::new(status, code, message)
    }
}

impl From<NodeError> for ApiError {
    fn from(error: NodeError) -> Self {
        use StatusCode as S;
        let message = error.to_string();
        let (status, code) = match error {
            NodeError::Core(core) => return core.into(),
            NodeError::NoLeader => (S::SERVICE_UNAVAILABLE, "no_leader"),
            NodeError::OutcomeUnknown(_) => (S::SERVICE_UNAVAILABLE, "outcome_unknown"),
            NodeError::Timeout => (S::REQUEST_TIMEOUT, "timeout"),
            NodeError::Withdrawn => (S::CONFLICT, "withdrawn"),
            NodeError::ShuttingDown => (S::SERVICE_UNAVAILABLE, "shutting_down"),
            NodeError::Internal(_) => (S::INTERNAL_SERVER_ERROR, "internal"),
            NodeError::StorageFailed(_) => (S::SERVICE_UNAVAILABLE, "storage_failed"),
            NodeError::DiskFull(_) => (S::SERVICE_UNAVAILABLE, "disk_full"),
            NodeError::Membership(m) => {
                use raftlock_node::MembershipError as M;
                match m {
                    M::MemberExists { .. } => (S::CONFLICT, "member_exists"),
                    M::UnknownMember { .. } => (S::NOT_FOUND, "not_found"),
                    M::LastVoter { .. } => (S::CONFLICT, "last_voter"),
                    M::InProgress(_) => (S::SERVICE_UNAVAILABLE, "membership_changing"),
                    M::NotCaughtUp { .. } => (S::SERVICE_UNAVAILABLE, "not_caught_up"),
                    M::Invalid(_) => (S::BAD_REQUEST, "bad_request"),
                    M::Replaced { .. } => (S::SERVICE_UNAVAILABLE, "member_replaced"),
                    M::OtherCluster { .. } => (S::CONFLICT, "other_cluster"),
                    M::Unreachable { .. } => (S::SERVICE_UNAVAILABLE, "member_unreachable"),
                }
            }
        };
        ApiError::new(status, code, message)
    }
}

impl From<SessionId> for ApiError {
    /// The session is unknown.
    fn from(session: SessionId) -> Self {
        ApiError::session_not_found(session)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.code, "message": self.message });
        let mut response = (self.status, body.to_string()).into_response();
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if matches!(
            self.code,
            "no_leader" | "shutting_down" | "membership_changing" | "not_caught_up"
        ) {
            // All are safe to retry; a short pause lets an election settle
            // (or a loaded member apply its log).
            headers.insert(RETRY_AFTER, HeaderValue::from_static("1"));
        }
        if self.code == "too_many_requests" {
            // Room comes back as sessions close or expire and locks are
            // released, at the pace of TTLs (1 s at least): clients
            // retrying every few seconds is enough, not a tight loop.
            headers.insert(RETRY_AFTER, HeaderValue::from_static("2"));
        }
        if self.code == "request_timeout" {
            // The rest of a half-sent body would be read as the next
            // request: the connection cannot be reused.
            headers.insert(
                axum::http::header::CONNECTION,
                HeaderValue::from_static("close"),
            );
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_node_error_has_a_code_and_status() {
        let cases: Vec<(NodeError, u16, &str)> = vec![
            (NodeError::NoLeader, 503, "no_leader"),
            (
                NodeError::OutcomeUnknown("x".into()),
                503,
                "outcome_unknown",
            ),
            (NodeError::Timeout, 408, "timeout"),
            (NodeError::Withdrawn, 409, "withdrawn"),
            (NodeError::ShuttingDown, 503, "shutting_down"),
            (NodeError::Internal("x".into()), 500, "internal"),
            (NodeError::StorageFailed("x".into()), 503, "storage_failed"),
            (NodeError::DiskFull("x".into()), 503, "disk_full"),
            (
                raftlock_node::MembershipError::LastVoter { id: 1 }.into(),
                409,
                "last_voter",
            ),
            (
                raftlock_node::MembershipError::UnknownMember { id: 9 }.into(),
                404,
                "not_found",
            ),
            (
                raftlock_node::MembershipError::MemberExists {
                    id: 2,
                    existing: "x".into(),
                }
                .into(),
                409,
                "member_exists",
            ),
            (CoreError::Invalid("x".into()).into(), 400, "bad_request"),
            (
                CoreError::SessionNotFound(SessionId(1)).into(),
                404,
                "session_not_found",
            ),
            (CoreError::NotFound("/a".into()).into(), 404, "not_found"),
            (
                CoreError::NotOwner { lock: "a".into() }.into(),
                403,
                "not_owner",
            ),
            (
                CoreError::LockHeld {
                    lock: "a".into(),
                    holder: SessionId(1),
                }
                .into(),
                409,
                "lock_held",
            ),
            (
                CoreError::NotLeader {
                    election: "e".into(),
                }
                .into(),
                409,
                "not_leader",
            ),
        ];
        for (error, status, code) in cases {
            let api = ApiError::from(error);
            assert_eq!((api.status().as_u16(), api.code()), (status, code));
        }
    }
}

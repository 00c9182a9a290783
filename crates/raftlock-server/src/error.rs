//! The one place where an error becomes an HTTP response.
//!
//! Every failure of the API, whether refused by the state machine, by the
//! node layer, by an extractor or by the router itself, ends up as an
//! [`ApiError`] and leaves as `{"error": "<code>", "message": "<text>"}`
//! with the status of its code. The codes, their statuses and their
//! `Retry-After` are the contract's (`raftlock_api::ErrorCode`); which
//! code a node or core error has is the node's (`NodeError::code`), the
//! same for the embedded client.

use axum::http::header::{CONTENT_TYPE, RETRY_AFTER};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use raftlock_core::{CoreError, SessionId};
use raftlock_node::NodeError;

pub(crate) use raftlock_api::{ErrorBody, ErrorCode};

/// An API error: a stable machine-readable code, its HTTP status and a
/// human message. Codes are listed in `docs/api.md`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code} ({status}): {message}")]
pub struct ApiError {
    status: StatusCode,
    code: ErrorCode,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    /// An error with its code's status (`ErrorCode::status`).
    fn of(code: ErrorCode, message: impl Into<String>) -> Self {
        let status =
            StatusCode::from_u16(code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        Self::new(status, code, message)
    }

    /// The error code (`bad_request`, `lock_held`, …).
    pub fn code(&self) -> &'static str {
        self.code.as_str()
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
        Self::of(ErrorCode::BadRequest, message)
    }

    /// 408: an acquire with `keep_queued` timed out; its node stays queued.
    pub(crate) fn timeout_still_queued() -> Self {
        Self::of(
            ErrorCode::Timeout,
            "wait_ms elapsed before the grant; the session's node stays queued \
             (keep_queued): acquire again to keep waiting in place, release to cancel",
        )
    }

    /// 401: no bearer token, or one the cluster does not know, while the
    /// API requires tokens (docs/security.md).
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::of(ErrorCode::Unauthorized, message)
    }

    /// 403: the token is valid but lacks the permission (on that name,
    /// or over that session).
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::of(ErrorCode::Forbidden, message)
    }

    /// 404: the session is unknown, closed or expired.
    pub fn session_not_found(session: impl std::fmt::Display) -> Self {
        Self::of(
            ErrorCode::SessionNotFound,
            format!("session {session} not found (unknown, closed or expired)"),
        )
    }

    /// 404: no such node, lock or route.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::of(ErrorCode::NotFound, message)
    }

    /// 413: a body or node data over the configured limit.
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::of(ErrorCode::TooLarge, message)
    }

    /// 429: a limit that protects the cluster (sessions, waiters per
    /// lock) is reached; answered with `Retry-After`.
    pub fn too_many_requests(message: impl Into<String>) -> Self {
        Self::of(ErrorCode::TooManyRequests, message)
    }

    /// 408: the request body did not arrive within the configured time
    /// (a slow or stalled client); the connection is closed after it.
    pub(crate) fn request_timeout(message: impl Into<String>) -> Self {
        Self::of(ErrorCode::RequestTimeout, message)
    }

    /// 415: a body that is not `application/json`.
    pub fn unsupported_media_type() -> Self {
        Self::of(
            ErrorCode::UnsupportedMediaType,
            "the request body must be JSON, sent with Content-Type: application/json",
        )
    }

    /// 405: the route exists, the method does not.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::of(ErrorCode::MethodNotAllowed, message)
    }

    /// 503: this member has as many requests in flight as it may, and
    /// this one waited its time for a slot (`admission.rs`); nothing was
    /// done. Answered with `Retry-After`.
    pub(crate) fn overloaded(message: impl Into<String>) -> Self {
        Self::of(ErrorCode::Overloaded, message)
    }

    /// 503: the server is shutting down; retry on another node.
    pub fn shutting_down() -> Self {
        Self::from(NodeError::ShuttingDown)
    }

    /// 503: the node has a leader but has not applied its whole log yet.
    pub fn not_caught_up(message: impl Into<String>) -> Self {
        Self::of(ErrorCode::NotCaughtUp, message)
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
                ErrorCode::Internal,
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
        ApiError::of(raftlock_node::core_code(&error), error.to_string())
    }
}

impl From<NodeError> for ApiError {
    fn from(error: NodeError) -> Self {
        ApiError::of(error.code(), error.to_string())
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
        let body = ErrorBody {
            error: self.code,
            message: &self.message,
        };
        let body = serde_json::to_string(&body)
            .unwrap_or_else(|_| format!("{{\"error\":\"{}\",\"message\":\"\"}}", self.code));
        let mut response = (self.status, body).into_response();
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(secs) = self.code.retry_after_secs() {
            // All are safe to retry after a pause (`ErrorCode::retry_after_secs`).
            headers.insert(RETRY_AFTER, HeaderValue::from(secs));
        }
        if self.code == ErrorCode::RequestTimeout {
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
            (
                CoreError::NotHolder {
                    lock: "a".into(),
                    fencing_token: 3,
                    current: Some(9),
                }
                .into(),
                409,
                "not_holder",
            ),
            (
                CoreError::TxnOpFailed {
                    index: 1,
                    error: Box::new(CoreError::VersionMismatch {
                        path: "/a".into(),
                        expected: 1,
                        actual: 2,
                    }),
                }
                .into(),
                409,
                "version_mismatch",
            ),
        ];
        for (error, status, code) in cases {
            let api = ApiError::from(error);
            assert_eq!((api.status().as_u16(), api.code()), (status, code));
        }
    }
}

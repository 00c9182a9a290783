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

/// Declares [`ErrorCode`] and its list [`ErrorCode::ALL`] from one table,
/// so no code can exist without being listed: the OpenAPI document
/// (`openapi.rs`) and its test take the list from here.
macro_rules! error_codes {
    ($($(#[$doc:meta])* $variant:ident = $code:literal,)*) => {
        /// Every machine-readable error code the API answers with
        /// (docs/api.md, "Errors").
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub(crate) enum ErrorCode {
            $($(#[$doc])* $variant,)*
        }

        impl ErrorCode {
            /// Every code, in declaration order.
            pub(crate) const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)*];

            /// The code as it appears in the body's `error` field.
            pub(crate) fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $code,)*
                }
            }
        }
    };
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for ErrorCode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// The body of every error response (the OpenAPI document's `ErrorBody`).
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub(crate) struct ErrorBody<'a> {
    /// The stable machine-readable code.
    error: ErrorCode,
    /// A human-readable explanation; not stable.
    message: &'a str,
}

error_codes! {
    BadRequest = "bad_request",
    SessionNotFound = "session_not_found",
    NotFound = "not_found",
    NotOwner = "not_owner",
    LockHeld = "lock_held",
    Timeout = "timeout",
    NoLeader = "no_leader",
    TooLarge = "too_large",
    VersionMismatch = "version_mismatch",
    NotLeader = "not_leader",
    UnsupportedMediaType = "unsupported_media_type",
    MethodNotAllowed = "method_not_allowed",
    Unauthorized = "unauthorized",
    Forbidden = "forbidden",
    Withdrawn = "withdrawn",
    NotEmpty = "not_empty",
    EphemeralParent = "ephemeral_parent",
    SessionConflict = "session_conflict",
    SequenceExhausted = "sequence_exhausted",
    AlreadyGranted = "already_granted",
    OutcomeUnknown = "outcome_unknown",
    ShuttingDown = "shutting_down",
    NotCaughtUp = "not_caught_up",
    MemberExists = "member_exists",
    MemberReplaced = "member_replaced",
    OtherCluster = "other_cluster",
    MemberUnreachable = "member_unreachable",
    LastVoter = "last_voter",
    MembershipChanging = "membership_changing",
    StorageFailed = "storage_failed",
    DiskFull = "disk_full",
    Internal = "internal",
    TooManyRequests = "too_many_requests",
    RequestTimeout = "request_timeout",
    LimitMismatch = "limit_mismatch",
    NotHolder = "not_holder",
    /// Written below hyper by `overflow.rs`, never by an `ApiError`.
    Overloaded = "overloaded",
}

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
        Self::new(StatusCode::BAD_REQUEST, ErrorCode::BadRequest, message)
    }

    /// 408: an acquire with `keep_queued` timed out; its node stays queued.
    pub(crate) fn timeout_still_queued() -> Self {
        Self::new(
            StatusCode::REQUEST_TIMEOUT,
            ErrorCode::Timeout,
            "wait_ms elapsed before the grant; the session's node stays queued \
             (keep_queued): acquire again to keep waiting in place, release to cancel",
        )
    }

    /// 401: no bearer token, or one the cluster does not know, while the
    /// API requires tokens (docs/security.md).
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, ErrorCode::Unauthorized, message)
    }

    /// 403: the token is valid but lacks the permission (on that name,
    /// or over that session).
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, ErrorCode::Forbidden, message)
    }

    /// 404: the session is unknown, closed or expired.
    pub fn session_not_found(session: impl std::fmt::Display) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            ErrorCode::SessionNotFound,
            format!("session {session} not found (unknown, closed or expired)"),
        )
    }

    /// 404: no such node, lock or route.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, ErrorCode::NotFound, message)
    }

    /// 413: a body or node data over the configured limit.
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, ErrorCode::TooLarge, message)
    }

    /// 429: a limit that protects the cluster (sessions, waiters per
    /// lock) is reached; answered with `Retry-After`.
    pub fn too_many_requests(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::TooManyRequests,
            message,
        )
    }

    /// 408: the request body did not arrive within the configured time
    /// (a slow or stalled client); the connection is closed after it.
    pub(crate) fn request_timeout(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::REQUEST_TIMEOUT,
            ErrorCode::RequestTimeout,
            message,
        )
    }

    /// 415: a body that is not `application/json`.
    pub fn unsupported_media_type() -> Self {
        Self::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorCode::UnsupportedMediaType,
            "the request body must be JSON, sent with Content-Type: application/json",
        )
    }

    /// 405: the route exists, the method does not.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::MethodNotAllowed,
            message,
        )
    }

    /// 503: this member has as many requests in flight as it may, and
    /// this one waited its time for a slot (`admission.rs`); nothing was
    /// done. Answered with `Retry-After`.
    pub(crate) fn overloaded(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::Overloaded,
            message,
        )
    }

    /// 503: the server is shutting down; retry on another node.
    pub fn shutting_down() -> Self {
        Self::from(NodeError::ShuttingDown)
    }

    /// 503: the node has a leader but has not applied its whole log yet.
    pub fn not_caught_up(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::NotCaughtUp,
            message,
        )
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
        let (status, code) = core_status(&error);
        ApiError::new(status, code, error.to_string())
    }
}

/// A core error's status and code. A failed transaction operation answers
/// with its own error's code (the message names the operation).
fn core_status(error: &CoreError) -> (StatusCode, ErrorCode) {
    use StatusCode as S;
    match error {
        CoreError::BadName { .. } | CoreError::Invalid(_) => {
            (S::BAD_REQUEST, ErrorCode::BadRequest)
        }
        CoreError::SessionNotFound(_) => (S::NOT_FOUND, ErrorCode::SessionNotFound),
        CoreError::NotFound(_) => (S::NOT_FOUND, ErrorCode::NotFound),
        CoreError::NotOwner { .. } => (S::FORBIDDEN, ErrorCode::NotOwner),
        CoreError::LockHeld { .. } => (S::CONFLICT, ErrorCode::LockHeld),
        CoreError::VersionMismatch { .. } => (S::CONFLICT, ErrorCode::VersionMismatch),
        CoreError::NotLeader { .. } => (S::CONFLICT, ErrorCode::NotLeader),
        CoreError::NotEmpty(_) => (S::CONFLICT, ErrorCode::NotEmpty),
        CoreError::EphemeralParent(_) => (S::CONFLICT, ErrorCode::EphemeralParent),
        CoreError::SessionConflict(_) => (S::CONFLICT, ErrorCode::SessionConflict),
        CoreError::SequenceExhausted(_) => (S::CONFLICT, ErrorCode::SequenceExhausted),
        // The node turns this into the grant; mapped for completeness.
        CoreError::AlreadyGranted { .. } => (S::CONFLICT, ErrorCode::AlreadyGranted),
        CoreError::LimitMismatch { .. } => (S::CONFLICT, ErrorCode::LimitMismatch),
        CoreError::NotHolder { .. } => (S::CONFLICT, ErrorCode::NotHolder),
        CoreError::TxnOpFailed { error, .. } => core_status(error),
    }
}

impl From<NodeError> for ApiError {
    fn from(error: NodeError) -> Self {
        use StatusCode as S;
        let message = error.to_string();
        let (status, code) = match error {
            NodeError::Core(core) => return core.into(),
            NodeError::NoLeader => (S::SERVICE_UNAVAILABLE, ErrorCode::NoLeader),
            NodeError::OutcomeUnknown(_) => (S::SERVICE_UNAVAILABLE, ErrorCode::OutcomeUnknown),
            NodeError::Timeout => (S::REQUEST_TIMEOUT, ErrorCode::Timeout),
            NodeError::Withdrawn => (S::CONFLICT, ErrorCode::Withdrawn),
            NodeError::ShuttingDown => (S::SERVICE_UNAVAILABLE, ErrorCode::ShuttingDown),
            NodeError::Internal(_) => (S::INTERNAL_SERVER_ERROR, ErrorCode::Internal),
            NodeError::StorageFailed(_) => (S::SERVICE_UNAVAILABLE, ErrorCode::StorageFailed),
            NodeError::DiskFull(_) => (S::SERVICE_UNAVAILABLE, ErrorCode::DiskFull),
            NodeError::Membership(m) => {
                use raftlock_node::MembershipError as M;
                match m {
                    M::MemberExists { .. } => (S::CONFLICT, ErrorCode::MemberExists),
                    M::UnknownMember { .. } => (S::NOT_FOUND, ErrorCode::NotFound),
                    M::LastVoter { .. } => (S::CONFLICT, ErrorCode::LastVoter),
                    M::InProgress(_) => (S::SERVICE_UNAVAILABLE, ErrorCode::MembershipChanging),
                    M::NotCaughtUp { .. } => (S::SERVICE_UNAVAILABLE, ErrorCode::NotCaughtUp),
                    M::Invalid(_) => (S::BAD_REQUEST, ErrorCode::BadRequest),
                    M::Replaced { .. } => (S::SERVICE_UNAVAILABLE, ErrorCode::MemberReplaced),
                    M::OtherCluster { .. } => (S::CONFLICT, ErrorCode::OtherCluster),
                    M::Unreachable { .. } => (S::SERVICE_UNAVAILABLE, ErrorCode::MemberUnreachable),
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
        let body = ErrorBody {
            error: self.code,
            message: &self.message,
        };
        let body = serde_json::to_string(&body)
            .unwrap_or_else(|_| format!("{{\"error\":\"{}\",\"message\":\"\"}}", self.code));
        let mut response = (self.status, body).into_response();
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if matches!(
            self.code,
            ErrorCode::NoLeader
                | ErrorCode::ShuttingDown
                | ErrorCode::MembershipChanging
                | ErrorCode::NotCaughtUp
                | ErrorCode::Overloaded
                | ErrorCode::DiskFull
        ) {
            // All are safe to retry; a short pause lets an election settle
            // (or a loaded member apply its log, or a full one find room:
            // it looks for free space every 250 ms).
            headers.insert(RETRY_AFTER, HeaderValue::from_static("1"));
        }
        if self.code == ErrorCode::TooManyRequests {
            // Room comes back as sessions close or expire and locks are
            // released, at the pace of TTLs (1 s at least): clients
            // retrying every few seconds is enough, not a tight loop.
            headers.insert(RETRY_AFTER, HeaderValue::from_static("2"));
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

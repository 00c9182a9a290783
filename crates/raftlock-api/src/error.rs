//! Error codes, their HTTP status, and what each says about retrying.
//!
//! Every front door answers a refusal with one [`ErrorCode`]; the HTTP API
//! sends it as `{"error": "<code>", "message": "<text>"}` (docs/api.md,
//! "Errors"). Whoever reads an answer classifies it with the methods here
//! rather than with a list of its own:
//!
//! | method | true for | the caller |
//! |---|---|---|
//! | [`ErrorCode::not_applied`] | a definite refusal: nothing changed | may report a failure |
//! | [`ErrorCode::outcome_unknown`] | a write may or may not have been applied | retries only what is idempotent |
//! | [`ErrorCode::retry_elsewhere`] | this member cannot serve now, another can | moves on to the next member |
//! | [`ErrorCode::retry_later`] | nothing was done and the cause passes by itself | retries after a pause, on any member |

use serde::{Deserialize, Serialize};

/// Declares [`ErrorCode`], its list [`ErrorCode::ALL`] and its HTTP
/// statuses from one table, so no code can exist without being listed.
macro_rules! error_codes {
    ($($(#[$doc:meta])* $variant:ident = $code:literal, $status:literal;)*) => {
        /// Every machine-readable error code the API answers with
        /// (docs/api.md, "Errors").
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorCode {
            $($(#[$doc])* $variant,)*
        }

        impl ErrorCode {
            /// Every code, in declaration order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)*];

            /// The code as it appears in the body's `error` field.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $code,)*
                }
            }

            /// The code named `code`, if the contract has it.
            pub fn parse(code: &str) -> Option<ErrorCode> {
                match code {
                    $($code => Some(ErrorCode::$variant),)*
                    _ => None,
                }
            }

            /// The HTTP status the code is answered with. `internal` is
            /// 500 here; a server may answer it with another 5xx that
            /// reached its router without a body.
            pub fn status(self) -> u16 {
                match self {
                    $(ErrorCode::$variant => $status,)*
                }
            }
        }
    };
}

error_codes! {
    /// Malformed JSON, a missing field, a bad name, a value out of range.
    BadRequest = "bad_request", 400;
    /// An unknown, closed or expired session.
    SessionNotFound = "session_not_found", 404;
    /// No such node, lock or route.
    NotFound = "not_found", 404;
    /// Releasing a node the session does not own.
    NotOwner = "not_owner", 403;
    /// A try-lock found the lock held.
    LockHeld = "lock_held", 409;
    /// The wait elapsed before the grant.
    Timeout = "timeout", 408;
    /// No leader reachable right now.
    NoLeader = "no_leader", 503;
    /// A body or node data over the configured limit.
    TooLarge = "too_large", 413;
    /// `expected_version` does not match the node's version.
    VersionMismatch = "version_mismatch", 409;
    /// Proclaim by a session that does not lead the election.
    NotLeader = "not_leader", 409;
    /// A body that is not `application/json`.
    UnsupportedMediaType = "unsupported_media_type", 415;
    /// The route exists, the method does not.
    MethodNotAllowed = "method_not_allowed", 405;
    /// No bearer token, or one the cluster does not know.
    Unauthorized = "unauthorized", 401;
    /// The token lacks the permission.
    Forbidden = "forbidden", 403;
    /// A waiting acquire whose node another request of its session released.
    Withdrawn = "withdrawn", 409;
    /// Deleting a node that has children.
    NotEmpty = "not_empty", 409;
    /// Creating a node under an ephemeral node.
    EphemeralParent = "ephemeral_parent", 409;
    /// An open-session retry reused an id with other parameters.
    SessionConflict = "session_conflict", 409;
    /// A sequence counter would overflow.
    SequenceExhausted = "sequence_exhausted", 409;
    /// Internal: a timed-out acquire found its node granted first.
    AlreadyGranted = "already_granted", 409;
    /// The leader got the write but its answer was lost.
    OutcomeUnknown = "outcome_unknown", 503;
    /// The member or its API server is shutting down.
    ShuttingDown = "shutting_down", 503;
    /// A leader is known but this member has not applied its log yet, or a
    /// member being added did not catch up in time (it stays a learner).
    NotCaughtUp = "not_caught_up", 503;
    /// Adding a member id that is already a member elsewhere.
    MemberExists = "member_exists", 409;
    /// This member's data was replaced: it serves nothing until re-added.
    MemberReplaced = "member_replaced", 503;
    /// The member to add belongs to another cluster.
    OtherCluster = "other_cluster", 409;
    /// The leader could not reach the member to add.
    MemberUnreachable = "member_unreachable", 503;
    /// Removing the only voter.
    LastVoter = "last_voter", 409;
    /// Another membership change is being committed.
    MembershipChanging = "membership_changing", 503;
    /// This member's log disk failed a durability barrier.
    StorageFailed = "storage_failed", 503;
    /// This member's data disk is full.
    DiskFull = "disk_full", 503;
    /// A bug or an IO failure.
    Internal = "internal", 500;
    /// A limit that protects the cluster is reached.
    TooManyRequests = "too_many_requests", 429;
    /// The request body did not arrive in time; the connection is closed.
    RequestTimeout = "request_timeout", 408;
    /// A semaphore acquire named another number of permits than in force.
    LimitMismatch = "limit_mismatch", 409;
    /// A guarded write whose fencing token is not the current holder's.
    NotHolder = "not_holder", 409;
    /// This member is full (connections, or requests in flight).
    Overloaded = "overloaded", 503;
}

impl ErrorCode {
    /// A definite refusal: the request changed nothing. False only for the
    /// codes that may follow a write the cluster applied
    /// ([`outcome_unknown`](Self::outcome_unknown)) and for
    /// `not_caught_up`, which a member add answers after the member became
    /// a learner.
    pub fn not_applied(self) -> bool {
        !self.outcome_unknown() && self != ErrorCode::NotCaughtUp
    }

    /// A write may or may not have been applied: its answer was lost
    /// (`outcome_unknown`), the member failed inside (`internal`), or it
    /// went down while handling it (`shutting_down`). Retry only what is
    /// idempotent.
    pub fn outcome_unknown(self) -> bool {
        matches!(
            self,
            ErrorCode::OutcomeUnknown | ErrorCode::Internal | ErrorCode::ShuttingDown
        )
    }

    /// This member cannot serve the request now and another one can: it is
    /// shutting down, its disk failed or is full, its data was replaced,
    /// or it is at its connection or request limit. A client moves on to
    /// the next member (a sticky one too); a write answered
    /// `shutting_down` may still have been applied
    /// ([`outcome_unknown`](Self::outcome_unknown)).
    pub fn retry_elsewhere(self) -> bool {
        matches!(
            self,
            ErrorCode::ShuttingDown
                | ErrorCode::StorageFailed
                | ErrorCode::DiskFull
                | ErrorCode::MemberReplaced
                | ErrorCode::Overloaded
        )
    }

    /// Nothing was done and the cause passes by itself (an election, a
    /// membership change, a member still starting, a full member or
    /// cluster): the same request may be sent again after a pause, to any
    /// member.
    pub fn retry_later(self) -> bool {
        matches!(
            self,
            ErrorCode::NoLeader
                | ErrorCode::MembershipChanging
                | ErrorCode::MemberUnreachable
                | ErrorCode::Overloaded
                | ErrorCode::DiskFull
                | ErrorCode::TooManyRequests
        )
    }

    /// The `Retry-After` seconds the HTTP API sends with the code, if any.
    pub fn retry_after_secs(self) -> Option<u32> {
        match self {
            // A short pause lets an election settle (or a loaded member
            // apply its log, or a full one find room: it looks for free
            // space every 250 ms).
            ErrorCode::NoLeader
            | ErrorCode::ShuttingDown
            | ErrorCode::MembershipChanging
            | ErrorCode::NotCaughtUp
            | ErrorCode::Overloaded
            | ErrorCode::DiskFull => Some(1),
            // Room comes back as sessions close or expire and locks are
            // released, at the pace of TTLs (1 s at least).
            ErrorCode::TooManyRequests => Some(2),
            _ => None,
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ErrorCode {
    type Err = UnknownCode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ErrorCode::parse(s).ok_or_else(|| UnknownCode(s.to_string()))
    }
}

/// A code the contract does not have (from a newer server, or not raftlock).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownCode(pub String);

impl std::fmt::Display for UnknownCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown error code {:?}", self.0)
    }
}

impl std::error::Error for UnknownCode {}

impl Serialize for ErrorCode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ErrorCode {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        ErrorCode::parse(&text).ok_or_else(|| serde::de::Error::custom(UnknownCode(text.into())))
    }
}

#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for ErrorCode {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::schema::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .description(Some(
                "A stable error code; its HTTP status and meaning are listed \
                 in docs/api.md (Errors).",
            ))
            .enum_values(Some(ErrorCode::ALL.iter().map(|c| c.as_str())))
            .into()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for ErrorCode {}

/// The body of every error response (the OpenAPI document's `ErrorBody`).
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody<'a> {
    /// The stable machine-readable code.
    pub error: ErrorCode,
    /// A human-readable explanation; not stable.
    pub message: &'a str,
}

/// An error body as a client reads it: the code as sent, known to this
/// version of the contract or not.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ErrorReply {
    /// The code as sent.
    pub error: String,
    /// The server's human text (empty when absent).
    #[serde(default)]
    pub message: String,
}

impl ErrorReply {
    /// The code, if this version of the contract knows it.
    pub fn code(&self) -> Option<ErrorCode> {
        ErrorCode::parse(&self.error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_through_its_text() {
        for &code in ErrorCode::ALL {
            assert_eq!(ErrorCode::parse(code.as_str()), Some(code));
            let json = serde_json::to_string(&code).expect("serializes");
            assert_eq!(json, format!("\"{code}\""));
            let back: ErrorCode = serde_json::from_str(&json).expect("parses");
            assert_eq!(back, code);
        }
        assert_eq!(ErrorCode::parse("frobnicated"), None);
        assert!(serde_json::from_str::<ErrorCode>("\"frobnicated\"").is_err());
    }

    #[test]
    fn the_retry_classes_are_the_documented_ones() {
        use ErrorCode as C;
        let unknown: Vec<_> = C::ALL.iter().filter(|c| c.outcome_unknown()).collect();
        assert_eq!(
            unknown,
            [&C::OutcomeUnknown, &C::ShuttingDown, &C::Internal]
        );
        for &code in C::ALL {
            // No code is both a definite refusal and an unknown outcome.
            assert!(!(code.not_applied() && code.outcome_unknown()), "{code}");
            // What may be retried later changed nothing.
            assert!(!code.retry_later() || code.not_applied(), "{code}");
        }
        assert!(!C::NotCaughtUp.not_applied());
        assert!(C::NoLeader.not_applied() && !C::NoLeader.retry_elsewhere());
        for code in [
            C::StorageFailed,
            C::DiskFull,
            C::MemberReplaced,
            C::Overloaded,
        ] {
            assert!(code.retry_elsewhere() && code.not_applied(), "{code}");
        }
        assert!(C::ShuttingDown.retry_elsewhere() && C::ShuttingDown.outcome_unknown());
    }

    #[test]
    fn statuses_and_retry_after_follow_the_table() {
        assert_eq!(ErrorCode::BadRequest.status(), 400);
        assert_eq!(ErrorCode::NotOwner.status(), 403);
        assert_eq!(ErrorCode::Timeout.status(), 408);
        assert_eq!(ErrorCode::TooManyRequests.status(), 429);
        assert_eq!(ErrorCode::Internal.status(), 500);
        assert_eq!(ErrorCode::StorageFailed.status(), 503);
        assert_eq!(ErrorCode::StorageFailed.retry_after_secs(), None);
        assert_eq!(ErrorCode::DiskFull.retry_after_secs(), Some(1));
        assert_eq!(ErrorCode::TooManyRequests.retry_after_secs(), Some(2));
    }

    #[test]
    fn an_error_reply_keeps_codes_it_does_not_know() {
        let reply: ErrorReply =
            serde_json::from_str(r#"{"error":"new_code","message":"m","extra":1}"#)
                .expect("parses");
        assert_eq!(reply.error, "new_code");
        assert_eq!(reply.code(), None);
        let reply: ErrorReply = serde_json::from_str(r#"{"error":"no_leader"}"#).expect("parses");
        assert_eq!(reply.code(), Some(ErrorCode::NoLeader));
        let body = ErrorBody {
            error: ErrorCode::LockHeld,
            message: "held",
        };
        assert_eq!(
            serde_json::to_string(&body).expect("serializes"),
            r#"{"error":"lock_held","message":"held"}"#
        );
    }
}

# Code generated from ErrorCode (crates/raftlock-api/src/error.rs) by `cargo run -p raftlock-api --bin raftlock-codes`. DO NOT EDIT.
"""The API's error codes (docs/api.md, "Errors"): each one's HTTP status,
``Retry-After`` seconds and retry classes, as raftlock-api's ``ErrorCode``
defines them for every client.

- ``NOT_APPLIED``: a definite refusal, nothing changed;
- ``OUTCOME_UNKNOWN``: a write may or may not have been applied;
- ``RETRY_ELSEWHERE``: this member cannot serve now, another can;
- ``RETRY_LATER``: nothing was done and the cause passes by itself.
"""

from typing import Dict, FrozenSet

STATUS: Dict[str, int] = {
    "bad_request": 400,
    "session_not_found": 404,
    "not_found": 404,
    "not_owner": 403,
    "lock_held": 409,
    "timeout": 408,
    "no_leader": 503,
    "too_large": 413,
    "version_mismatch": 409,
    "not_leader": 409,
    "unsupported_media_type": 415,
    "method_not_allowed": 405,
    "unauthorized": 401,
    "forbidden": 403,
    "withdrawn": 409,
    "not_empty": 409,
    "ephemeral_parent": 409,
    "session_conflict": 409,
    "sequence_exhausted": 409,
    "already_granted": 409,
    "outcome_unknown": 503,
    "shutting_down": 503,
    "not_caught_up": 503,
    "member_exists": 409,
    "member_replaced": 503,
    "other_cluster": 409,
    "member_unreachable": 503,
    "last_voter": 409,
    "membership_changing": 503,
    "storage_failed": 503,
    "disk_full": 503,
    "internal": 500,
    "too_many_requests": 429,
    "request_timeout": 408,
    "limit_mismatch": 409,
    "not_holder": 409,
    "overloaded": 503,
}
"""Every code the API answers with, and its HTTP status."""

RETRY_AFTER_SECS: Dict[str, int] = {
    "no_leader": 1,
    "shutting_down": 1,
    "not_caught_up": 1,
    "membership_changing": 1,
    "disk_full": 1,
    "too_many_requests": 2,
    "overloaded": 1,
}
"""The ``Retry-After`` the API sends with a code, if any."""

NOT_APPLIED: FrozenSet[str] = frozenset(
    {
        "bad_request",
        "session_not_found",
        "not_found",
        "not_owner",
        "lock_held",
        "timeout",
        "no_leader",
        "too_large",
        "version_mismatch",
        "not_leader",
        "unsupported_media_type",
        "method_not_allowed",
        "unauthorized",
        "forbidden",
        "withdrawn",
        "not_empty",
        "ephemeral_parent",
        "session_conflict",
        "sequence_exhausted",
        "already_granted",
        "member_exists",
        "member_replaced",
        "other_cluster",
        "member_unreachable",
        "last_voter",
        "membership_changing",
        "storage_failed",
        "disk_full",
        "too_many_requests",
        "request_timeout",
        "limit_mismatch",
        "not_holder",
        "overloaded",
    }
)

OUTCOME_UNKNOWN: FrozenSet[str] = frozenset(
    {
        "outcome_unknown",
        "shutting_down",
        "internal",
    }
)

RETRY_ELSEWHERE: FrozenSet[str] = frozenset(
    {
        "shutting_down",
        "member_replaced",
        "storage_failed",
        "disk_full",
        "overloaded",
    }
)

RETRY_LATER: FrozenSet[str] = frozenset(
    {
        "no_leader",
        "member_unreachable",
        "membership_changing",
        "disk_full",
        "too_many_requests",
        "overloaded",
    }
)

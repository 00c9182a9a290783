"""Typed errors: one class per API error code (docs/api.md), under one base.

Every error carries the API ``code``, the HTTP ``status`` of the answer
(``None`` when the error was decided on this side of the wire) and the
``message``; each class also names the status the API uses for its code
(``http_status``).

The split a caller most often needs is :attr:`RaftlockError.outcome_unknown`:
every other error is *definite* (the cluster said no, or the request never
reached it), so nothing changed; an unknown outcome means a write may or may
not have been applied.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Optional, Type

from . import _codes
from .types import LostReason


class RaftlockError(Exception):
    """Base of every error this client raises.

    An answer with a code this client does not know yet is raised as a
    plain ``RaftlockError`` carrying that code, so newer servers never
    break older clients.
    """

    code: str = "error"
    """The API error code (``"lock_held"``, ``"no_leader"``, ...)."""
    http_status: Optional[int] = None
    """The status the API answers this code with (docs/api.md)."""
    outcome_unknown: bool = False
    """True when a write may or may not have taken effect."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # An API code's status and retry class come from the contract's
        # table (``_codes``, generated from raftlock-api's ErrorCode), not
        # from each class.
        super().__init_subclass__(**kwargs)
        if cls.code in _codes.STATUS:
            cls.http_status = _codes.STATUS[cls.code]
            cls.outcome_unknown = cls.code in _codes.OUTCOME_UNKNOWN

    def __init__(
        self,
        message: str = "",
        *,
        code: Optional[str] = None,
        status: Optional[int] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        """The server's human text (or this client's)."""
        self.status = status
        """The HTTP status of the answer; ``None`` when decided on this side."""
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        where = f" (HTTP {self.status})" if self.status is not None else ""
        return f"{self.code}{where}: {self.message}"


# -- the documented codes, one class each ------------------------------------


class BadRequest(RaftlockError):
    """Malformed request: bad lock name, TTL out of range, wait too long."""

    code = "bad_request"


class SessionNotFound(RaftlockError):
    """The session is unknown: never opened, closed, or expired. Its locks are gone."""

    code = "session_not_found"


class NotFound(RaftlockError):
    """The node, lock or election does not exist."""

    code = "not_found"


class NotOwner(RaftlockError):
    """Releasing a node the session does not own."""

    code = "not_owner"


class LockHeld(RaftlockError):
    """A try-lock (or a try-campaign) found the lock held."""

    code = "lock_held"


class LimitMismatch(RaftlockError):
    """A semaphore acquire named another number of permits than the one in
    force (the message says which)."""

    code = "limit_mismatch"


class Timeout(RaftlockError):
    """The wait elapsed before the grant; the client left no node queued."""

    code = "timeout"


class NoLeader(RaftlockError):
    """No leader reachable right now (after this client's retries); nothing changed."""

    code = "no_leader"


class TooLarge(RaftlockError):
    """Body or node data over the configured limit."""

    code = "too_large"


class VersionMismatch(RaftlockError):
    """``expected_version`` does not match the node's version."""

    code = "version_mismatch"


class NotLeader(RaftlockError):
    """Proclaim by a session that is not the election's leader."""

    code = "not_leader"


class UnsupportedMediaType(RaftlockError):
    """A body that is not ``application/json`` (a bug in this client if seen)."""

    code = "unsupported_media_type"


class MethodNotAllowed(RaftlockError):
    """Wrong method on a known route."""

    code = "method_not_allowed"


class Withdrawn(RaftlockError):
    """A waiting acquire/campaign whose node another request of the session released."""

    code = "withdrawn"


class Unauthorized(RaftlockError):
    """No bearer token, or one the cluster does not know (a cluster with
    ``[[auth.tokens]]``); pass ``token=`` or set ``$RAFTLOCK_TOKEN``."""

    code = "unauthorized"


class Forbidden(RaftlockError):
    """The token lacks the permission on that name, or the session belongs
    to another principal."""

    code = "forbidden"


class NotEmpty(RaftlockError):
    """Deleting a node that has children."""

    code = "not_empty"


class EphemeralParent(RaftlockError):
    """Creating a node under an ephemeral node."""

    code = "ephemeral_parent"


class SessionConflict(RaftlockError):
    """An open-session retry reused an id with other parameters."""

    code = "session_conflict"


class SequenceExhausted(RaftlockError):
    """A sequence counter would overflow."""

    code = "sequence_exhausted"


class AlreadyGranted(RaftlockError):
    """Internal to the server; listed so that every documented code has a class."""

    code = "already_granted"


class OutcomeUnknown(RaftlockError):
    """The request may or may not have been applied: its answer was lost.

    Raised for the API's ``outcome_unknown`` answer, and on this side for a
    request whose connection dropped or timed out after it was sent.
    """

    code = "outcome_unknown"


class ShuttingDown(RaftlockError):
    """The node is shutting down; the client tries another one first."""

    code = "shutting_down"


class NotCaughtUp(RaftlockError):
    """``GET /v1/health`` only: a leader is known but this node lags."""

    code = "not_caught_up"


class Internal(RaftlockError):
    """A bug or an IO failure in the server; the outcome is unknown."""

    code = "internal"


# -- decided on this side of the wire ----------------------------------------


class Unavailable(RaftlockError):
    """No endpoint could be reached: the request was never delivered."""

    code = "unavailable"


class TlsError(Unavailable):
    """The TLS handshake failed: the server's certificate is not signed by
    the trusted CA (``cacert``), or the server refused this client's
    certificate (or its lack of one). Nothing was applied, and it is not
    retried: the same handshake fails again on every member."""

    code = "tls"


class ProtocolError(RaftlockError):
    """An answer this client cannot understand (not raftlock, or a version skew)."""

    code, outcome_unknown = "protocol_error", True


class SessionLost(RaftlockError):
    """The session was lost (or closed) before or while the operation waited."""

    code = "session_lost"

    def __init__(self, reason: LostReason) -> None:
        super().__init__(f"session lost: {reason.value}")
        self.reason = reason


def _by_code() -> Dict[str, Type[RaftlockError]]:
    """Every API error class, by the code it stands for."""
    found: Dict[str, Type[RaftlockError]] = {}
    pending = list(RaftlockError.__subclasses__())
    while pending:
        cls = pending.pop()
        found[cls.code] = cls
        pending.extend(cls.__subclasses__())
    for local in (Unavailable, TlsError, ProtocolError, SessionLost):
        del found[local.code]
    return found


ERRORS_BY_CODE: Dict[str, Type[RaftlockError]] = _by_code()
"""The class raised for each API error code."""


def from_answer(status: int, body: bytes) -> RaftlockError:
    """The error an answer with a non-2xx ``status`` stands for.

    A body that is not the API's error JSON (a proxy's page, another
    service) is a protocol error, or an unknown outcome for a 5xx since the
    request may have gone through.
    """
    try:
        parsed = json.loads(body)
        code, message = parsed["error"], parsed.get("message", "")
        if not isinstance(code, str) or not isinstance(message, str):
            raise TypeError("error and message must be strings")
    except (ValueError, TypeError, KeyError, AttributeError):
        text = body[:200].decode("utf-8", "replace")
        if status >= 500:
            return OutcomeUnknown(f"HTTP {status}: {text}", status=status)
        return ProtocolError(f"HTTP {status}: {text}", status=status)
    cls = ERRORS_BY_CODE.get(code)
    if cls is None:
        return RaftlockError(message, code=code, status=status)
    return cls(message, status=status)

"""raftlock: a Python client for the raftlock distributed lock service.

Blocking (:class:`Client`, two background threads per session for its
keepalives) and asyncio (:class:`raftlock.aio.AsyncClient`) flavours, over
the same HTTP API and the same rules.
"""

from ._failover import RetryPolicy
from ._lease import lost_margin
from .aio import AsyncClient, AsyncElection, AsyncLockGuard, AsyncSession
from .client import Client
from .election import Election
from .errors import (
    ERRORS_BY_CODE,
    RaftlockError,
    BadRequest,
    SessionNotFound,
    NotFound,
    NotOwner,
    LockHeld,
    Timeout,
    NoLeader,
    TooLarge,
    VersionMismatch,
    NotLeader,
    UnsupportedMediaType,
    MethodNotAllowed,
    Withdrawn,
    Unauthorized,
    Forbidden,
    NotEmpty,
    EphemeralParent,
    SessionConflict,
    SequenceExhausted,
    AlreadyGranted,
    OutcomeUnknown,
    ShuttingDown,
    NotCaughtUp,
    Internal,
    TlsError,
    Unavailable,
    ProtocolError,
    SessionLost,
)
from .lock import LockGuard
from .session import Session
from .types import (
    ClusterState,
    FencingCheck,
    Grant,
    Holder,
    Leader,
    LockState,
    LostReason,
    Member,
    Node,
    Waiter,
)

__version__ = "0.1.0"

__all__ = [
    "AsyncClient",
    "AsyncElection",
    "AsyncLockGuard",
    "AsyncSession",
    "AlreadyGranted",
    "BadRequest",
    "Client",
    "ClusterState",
    "Election",
    "EphemeralParent",
    "ERRORS_BY_CODE",
    "FencingCheck",
    "Grant",
    "Holder",
    "Internal",
    "Leader",
    "LockGuard",
    "LockHeld",
    "LockState",
    "lost_margin",
    "LostReason",
    "Member",
    "MethodNotAllowed",
    "Node",
    "NoLeader",
    "NotCaughtUp",
    "NotEmpty",
    "NotFound",
    "NotLeader",
    "NotOwner",
    "OutcomeUnknown",
    "ProtocolError",
    "RaftlockError",
    "RetryPolicy",
    "SequenceExhausted",
    "Session",
    "SessionConflict",
    "SessionLost",
    "SessionNotFound",
    "ShuttingDown",
    "Timeout",
    "TooLarge",
    "TlsError",
    "Unavailable",
    "UnsupportedMediaType",
    "VersionMismatch",
    "Waiter",
    "Withdrawn",
    "Unauthorized",
    "Forbidden",
]

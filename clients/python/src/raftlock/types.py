"""The values the API answers with, as plain immutable dataclasses."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import List, Optional


class LostReason(enum.Enum):
    """Why a session's ``lost`` event fired."""

    EXPIRED = "expired"
    """The cluster answered ``session_not_found``: it expired or was closed
    elsewhere, and its locks are released."""
    KEEPALIVE_FAILED = "keepalive_failed"
    """No keepalive succeeded in time: the cluster may expire the session
    (and grant its locks to others) from a safety margin after this."""
    CLOSED = "closed"
    """The session was closed by its owner."""


@dataclass(frozen=True)
class Grant:
    """A granted lock (or won election): the session's node and its token."""

    name: str
    """The lock or election name."""
    node: str
    """The session's queue node, e.g. ``/locks/orders/42/lock-0000000042``."""
    fencing_token: int
    """The node's create revision: strictly greater than every token granted
    before it, on any lock. Storage can refuse writes carrying older ones."""
    session_id: str
    """The holding session."""


@dataclass(frozen=True)
class Holder:
    """The session holding a lock."""

    session_id: Optional[str]
    """``None`` when the session belongs to another principal (a cluster
    with bearer tokens shows a session's id only to its own token and to
    cluster admins)."""
    owner: str
    node: str
    fencing_token: int
    since_revision: int
    """The revision at which the holder was granted."""
    principal: Optional[str] = None
    """The token name that opened the session; ``None`` without tokens."""


@dataclass(frozen=True)
class Waiter:
    """A session queued on a lock."""

    session_id: Optional[str]
    """``None`` when the session belongs to another principal."""
    owner: str
    node: str
    principal: Optional[str] = None
    """The token name that opened the session; ``None`` without tokens."""


@dataclass(frozen=True)
class LockState:
    """A lock's holder and its waiters in queue order."""

    name: str
    holder: Optional[Holder]
    waiters: List[Waiter]


@dataclass(frozen=True)
class FencingCheck:
    """Whether a token is the current holder's (what a storage service asks)."""

    valid: bool
    current_token: Optional[int]


@dataclass(frozen=True)
class Leader:
    """An election's leader and the value it proclaims."""

    session_id: Optional[str]
    """``None`` when the session belongs to another principal."""
    value: str
    node: str
    fencing_token: int
    principal: Optional[str] = None
    """The token name that opened the session; ``None`` without tokens."""


@dataclass(frozen=True)
class Node:
    """A node of the coordination tree."""

    path: str
    data: bytes
    version: int
    create_revision: int
    mod_revision: int
    ephemeral_owner: Optional[str]
    """The owning session of an ephemeral node, else ``None``."""


@dataclass(frozen=True)
class Member:
    """One member of the cluster, as ``GET /v1/cluster`` lists it."""

    id: int
    api_addr: str
    role: str


@dataclass(frozen=True)
class ClusterState:
    """Who leads, and the members."""

    node_id: Optional[int]
    """The member that answered."""
    leader_id: Optional[int]
    term: int
    members: List[Member]


@dataclass(frozen=True)
class SessionLease:
    """What opening a session answers: its id and the TTL the cluster granted."""

    session_id: str
    ttl: float
    """Seconds."""

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
    lock_delay: Optional[float] = None
    """The lock's lock-delay in seconds; ``None`` for none."""
    held_off: bool = False
    """True while the lock is held off: its holder's session ended and
    nobody is granted it until the delay has passed (``holder`` is then
    ``None``)."""


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


@dataclass(frozen=True)
class SharedHolder:
    """A session holding a read-write lock or a semaphore place."""

    session_id: Optional[str]
    """``None`` when the session belongs to another principal."""
    owner: str
    node: str
    fencing_token: int
    since_revision: int
    mode: Optional[str] = None
    """``"read"`` or ``"write"`` for a read-write lock; ``None`` for a semaphore."""
    principal: Optional[str] = None


@dataclass(frozen=True)
class SharedWaiter:
    """A session queued behind a read-write lock's or semaphore's holders."""

    session_id: Optional[str]
    owner: str
    node: str
    mode: Optional[str] = None
    principal: Optional[str] = None


@dataclass(frozen=True)
class RwLockState:
    """A read-write lock's holders (several readers, or one writer) and
    waiters, each in queue order."""

    name: str
    holders: List[SharedHolder]
    waiters: List[SharedWaiter]


@dataclass(frozen=True)
class SemaphoreState:
    """A semaphore's limit (``None`` while nobody is queued), holders and
    waiters."""

    name: str
    permits: Optional[int]
    holders: List[SharedHolder]
    waiters: List[SharedWaiter]


@dataclass(frozen=True)
class WatchEvent:
    """One item of :meth:`raftlock.Client.watch`."""

    kind: str
    """``"put"``, ``"delete"`` or ``"compacted"`` (the last item: the member
    no longer keeps the changes after the requested revision; read afresh
    with :meth:`~raftlock.Client.read_node` and watch from its revision)."""
    revision: int
    """The change's revision (0 for ``compacted``)."""
    path: str
    """The changed node's path (``""`` for ``compacted``)."""
    node: Optional[Node] = None
    """The node after a ``put``."""
    floor: Optional[int] = None
    """For ``compacted``: the oldest revision a watch may start after."""


@dataclass(frozen=True)
class RwLockSummary:
    """One read-write lock of :meth:`raftlock.Client.rwlocks`."""

    name: str
    holders: List[SharedHolder]
    waiters: int
    """How many sessions wait behind the holders."""


@dataclass(frozen=True)
class SemaphoreSummary:
    """One semaphore of :meth:`raftlock.Client.semaphores`."""

    name: str
    permits: Optional[int]
    holders: List[SharedHolder]
    waiters: int

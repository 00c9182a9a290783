"""Read-write locks, semaphores and multi-locks through a session, and the
guards that hold them. Waiting, retries, failover and the cleanup of an
abandoned wait are the lock's (:func:`raftlock.lock.take`)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, List, Optional, Sequence

from . import _api
from .lock import LockGuard, take
from .types import Grant

if TYPE_CHECKING:
    import threading

    from .session import Session

log = logging.getLogger("raftlock")

READ = "read"
WRITE = "write"


class RwLockGuard(LockGuard):
    """Proof of holding a read-write lock (``mode`` ``"read"`` or
    ``"write"``); a context manager, as :class:`~raftlock.LockGuard`."""

    def __init__(self, session: Session, grant: Grant, turn: threading.Lock, mode: str) -> None:
        key = _rw_key(grant.name)
        super().__init__(session, grant, turn, _api.release_rwlock(grant.name, session.id), key)
        self.mode = mode

    @property
    def node(self) -> str:
        """The session's queue node (``/rwlocks/{name}/lock-0000000042``)."""
        return self.grant.node


class SemaphorePermit(LockGuard):
    """Proof of holding one of a semaphore's places; a context manager."""

    def __init__(self, session: Session, grant: Grant, turn: threading.Lock, permits: int) -> None:
        key = _semaphore_key(grant.name)
        super().__init__(session, grant, turn, _api.release_semaphore(grant.name, session.id), key)
        self.permits = permits


class MultiLockGuard(LockGuard):
    """Proof of holding every lock of a multi-lock; a context manager that
    releases them together. :attr:`grants` has one grant per lock, in the
    order named, all with the same fencing token."""

    def __init__(self, session: Session, grants: List[Grant], turn: threading.Lock, names: List[str]) -> None:
        super().__init__(session, grants[0], turn, _api.release_multi(names, session.id), _multi_key(names))
        self.grants = grants
        self.names = names


def _rw_key(name: str) -> str:
    return f"rwlock:{name}"


def _semaphore_key(name: str) -> str:
    return f"semaphore:{name}"


def _multi_key(names: Sequence[str]) -> str:
    return "multilock:" + ",".join(names)


def acquire_rwlock(session: Session, name: str, mode: str, timeout: Optional[float]) -> RwLockGuard:
    """Takes read-write lock ``name`` to ``mode`` (see :meth:`Session.read_lock`)."""
    if mode not in (READ, WRITE):
        raise ValueError(f"mode must be {READ!r} or {WRITE!r}, not {mode!r}")
    grant, turn = take(
        session,
        _rw_key(name),
        name,
        timeout,
        lambda piece: _api.acquire_rwlock(name, session.id, mode, piece.wait, piece.keep_queued),
        _api.release_rwlock(name, session.id),
    )
    log.debug("%s-locked %s with token %d", mode, name, grant.fencing_token)
    return RwLockGuard(session, grant, turn, mode)


def acquire_semaphore(session: Session, name: str, permits: int, timeout: Optional[float]) -> SemaphorePermit:
    """Takes a place of semaphore ``name`` (see :meth:`Session.semaphore`)."""
    if permits < 1:
        raise ValueError(f"permits must be at least 1, not {permits}")
    grant, turn = take(
        session,
        _semaphore_key(name),
        name,
        timeout,
        lambda piece: _api.acquire_semaphore(name, session.id, permits, piece.wait, piece.keep_queued),
        _api.release_semaphore(name, session.id),
    )
    return SemaphorePermit(session, grant, turn, permits)


def acquire_multi(session: Session, names: Sequence[str], timeout: Optional[float]) -> MultiLockGuard:
    """Takes every lock of ``names`` or none (see :meth:`Session.multi_lock`)."""
    locks = list(names)
    if not locks:
        raise ValueError("a multi-lock names at least one lock")
    grants, turn = take(
        session,
        _multi_key(locks),
        ",".join(locks),
        timeout,
        lambda piece: _api.acquire_multi(locks, session.id, piece.wait, piece.keep_queued),
        _api.release_multi(locks, session.id),
    )
    return MultiLockGuard(session, grants, turn, locks)

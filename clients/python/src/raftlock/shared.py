# Generated from raftlock/aio/shared.py by clients/python/gen_sync.py:
# do not edit; edit the asyncio module and run the script again.
"""Read-write locks, semaphores and multi-locks through a session, and the
guards that hold them. Waiting, retries, failover and the cleanup of an
abandoned wait are the lock's (:func:`raftlock.lock.take`)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, List, Optional, Sequence

from . import _acquires, _api
from ._acquires import READ as READ, WRITE as WRITE  # this module's names too
from ._acquires import multi_key, rw_key, semaphore_key
from .types import Grant
from .lock import LockGuard, take

if TYPE_CHECKING:
    import threading

    from .session import Session

log = logging.getLogger("raftlock")


class RwLockGuard(LockGuard):
    """Proof of holding a read-write lock (``mode`` ``"read"`` or
    ``"write"``); a context manager, as :class:`~raftlock.LockGuard`."""

    def __init__(self, session: Session, grant: Grant, turn: threading.Lock, mode: str) -> None:
        key = rw_key(grant.name)
        super().__init__(session, grant, turn, _api.release_rwlock(grant.name, session.id), key)
        self.mode = mode

    @property
    def node(self) -> str:
        """The session's queue node (``/rwlocks/{name}/lock-0000000042``)."""
        return self.grant.node


class SemaphorePermit(LockGuard):
    """Proof of holding one of a semaphore's places; a context manager."""

    def __init__(self, session: Session, grant: Grant, turn: threading.Lock, permits: int) -> None:
        key = semaphore_key(grant.name)
        super().__init__(session, grant, turn, _api.release_semaphore(grant.name, session.id), key)
        self.permits = permits


class MultiLockGuard(LockGuard):
    """Proof of holding every lock of a multi-lock; a context manager that
    releases them together. :attr:`grants` has one grant per lock, in the
    order named, all with the same fencing token."""

    def __init__(self, session: Session, grants: List[Grant], turn: threading.Lock, names: List[str]) -> None:
        super().__init__(session, grants[0], turn, _api.release_multi(names, session.id), multi_key(names))
        self.grants = grants
        self.names = names


def acquire_rwlock(session: Session, name: str, mode: str, timeout: Optional[float]) -> RwLockGuard:
    """Takes read-write lock ``name`` to ``mode`` (see :meth:`Session.read_lock`)."""
    grant, turn = take(session, _acquires.rwlock(name, session.id, mode), timeout)
    log.debug("%s-locked %s with token %d", mode, name, grant.fencing_token)
    return RwLockGuard(session, grant, turn, mode)


def acquire_semaphore(
    session: Session, name: str, permits: int, timeout: Optional[float]
) -> SemaphorePermit:
    """Takes a place of semaphore ``name`` (see :meth:`Session.semaphore`)."""
    grant, turn = take(session, _acquires.semaphore(name, session.id, permits), timeout)
    return SemaphorePermit(session, grant, turn, permits)


def acquire_multi(session: Session, names: Sequence[str], timeout: Optional[float]) -> MultiLockGuard:
    """Takes every lock of ``names`` or none (see :meth:`Session.multi_lock`)."""
    locks = list(names)
    grants, turn = take(session, _acquires.multi(locks, session.id), timeout)
    return MultiLockGuard(session, grants, turn, locks)

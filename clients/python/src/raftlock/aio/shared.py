"""Read-write locks, semaphores and multi-locks over asyncio: the twins of
:mod:`raftlock.shared`."""
#> """Read-write locks, semaphores and multi-locks through a session, and the
#> guards that hold them. Waiting, retries, failover and the cleanup of an
#> abandoned wait are the lock's (:func:`raftlock.lock.take`)."""

from __future__ import annotations

import asyncio  # [async]
import logging
from typing import TYPE_CHECKING, List, Optional, Sequence

from .. import _acquires, _api
#> from ._acquires import READ as READ, WRITE as WRITE  # this module's names too
from .._acquires import multi_key, rw_key, semaphore_key
from ..types import Grant
from .lock import AsyncLockGuard, take

if TYPE_CHECKING:
    #> import threading

    from .session import AsyncSession

log = logging.getLogger("raftlock")


class AsyncRwLockGuard(AsyncLockGuard):
    """Proof of holding a read-write lock (``mode``); ``async with``
    releases it. See :class:`raftlock.RwLockGuard`."""
    #> """Proof of holding a read-write lock (``mode`` ``"read"`` or
    #> ``"write"``); a context manager, as :class:`~raftlock.LockGuard`."""

    def __init__(self, session: AsyncSession, grant: Grant, turn: asyncio.Lock, mode: str) -> None:
        key = rw_key(grant.name)
        super().__init__(session, grant, turn, _api.release_rwlock(grant.name, session.id), key)
        self.mode = mode
    #>
    #> @property
    #> def node(self) -> str:
    #>     """The session's queue node (``/rwlocks/{name}/lock-0000000042``)."""
    #>     return self.grant.node


class AsyncSemaphorePermit(AsyncLockGuard):
    """Proof of holding a semaphore place; see :class:`raftlock.SemaphorePermit`."""
    #> """Proof of holding one of a semaphore's places; a context manager."""

    def __init__(self, session: AsyncSession, grant: Grant, turn: asyncio.Lock, permits: int) -> None:
        key = semaphore_key(grant.name)
        super().__init__(session, grant, turn, _api.release_semaphore(grant.name, session.id), key)
        self.permits = permits


class AsyncMultiLockGuard(AsyncLockGuard):
    """Proof of holding every lock of a multi-lock; see
    :class:`raftlock.MultiLockGuard`."""
    #> """Proof of holding every lock of a multi-lock; a context manager that
    #> releases them together. :attr:`grants` has one grant per lock, in the
    #> order named, all with the same fencing token."""

    def __init__(self, session: AsyncSession, grants: List[Grant], turn: asyncio.Lock, names: List[str]) -> None:
        super().__init__(session, grants[0], turn, _api.release_multi(names, session.id), multi_key(names))
        self.grants = grants
        self.names = names


async def acquire_rwlock(session: AsyncSession, name: str, mode: str, timeout: Optional[float]) -> AsyncRwLockGuard:
    """See :meth:`raftlock.Session.read_lock`."""
    #> """Takes read-write lock ``name`` to ``mode`` (see :meth:`Session.read_lock`)."""
    grant, turn = await take(session, _acquires.rwlock(name, session.id, mode), timeout)
    log.debug("%s-locked %s with token %d", mode, name, grant.fencing_token)
    return AsyncRwLockGuard(session, grant, turn, mode)


async def acquire_semaphore(
    session: AsyncSession, name: str, permits: int, timeout: Optional[float]
) -> AsyncSemaphorePermit:
    """See :meth:`raftlock.Session.semaphore`."""
    #> """Takes a place of semaphore ``name`` (see :meth:`Session.semaphore`)."""
    grant, turn = await take(session, _acquires.semaphore(name, session.id, permits), timeout)
    return AsyncSemaphorePermit(session, grant, turn, permits)


async def acquire_multi(session: AsyncSession, names: Sequence[str], timeout: Optional[float]) -> AsyncMultiLockGuard:
    """See :meth:`raftlock.Session.multi_lock`."""
    #> """Takes every lock of ``names`` or none (see :meth:`Session.multi_lock`)."""
    locks = list(names)
    grants, turn = await take(session, _acquires.multi(locks, session.id), timeout)
    return AsyncMultiLockGuard(session, grants, turn, locks)

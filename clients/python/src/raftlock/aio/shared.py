"""Read-write locks, semaphores and multi-locks over asyncio: the twins of
:mod:`raftlock.shared`."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, List, Optional, Sequence

from .. import _acquires, _api
from .._acquires import multi_key, rw_key, semaphore_key
from ..types import Grant
from .lock import AsyncLockGuard, take

if TYPE_CHECKING:
    from .session import AsyncSession


class AsyncRwLockGuard(AsyncLockGuard):
    """Proof of holding a read-write lock (``mode``); ``async with``
    releases it. See :class:`raftlock.RwLockGuard`."""

    def __init__(self, session: AsyncSession, grant: Grant, turn: asyncio.Lock, mode: str) -> None:
        key = rw_key(grant.name)
        super().__init__(session, grant, turn, _api.release_rwlock(grant.name, session.id), key)
        self.mode = mode


class AsyncSemaphorePermit(AsyncLockGuard):
    """Proof of holding a semaphore place; see :class:`raftlock.SemaphorePermit`."""

    def __init__(self, session: AsyncSession, grant: Grant, turn: asyncio.Lock, permits: int) -> None:
        key = semaphore_key(grant.name)
        super().__init__(session, grant, turn, _api.release_semaphore(grant.name, session.id), key)
        self.permits = permits


class AsyncMultiLockGuard(AsyncLockGuard):
    """Proof of holding every lock of a multi-lock; see
    :class:`raftlock.MultiLockGuard`."""

    def __init__(self, session: AsyncSession, grants: List[Grant], turn: asyncio.Lock, names: List[str]) -> None:
        super().__init__(session, grants[0], turn, _api.release_multi(names, session.id), multi_key(names))
        self.grants = grants
        self.names = names


async def acquire_rwlock(session: AsyncSession, name: str, mode: str, timeout: Optional[float]) -> AsyncRwLockGuard:
    """See :meth:`raftlock.Session.read_lock`."""
    grant, turn = await take(session, _acquires.rwlock(name, session.id, mode), timeout)
    return AsyncRwLockGuard(session, grant, turn, mode)


async def acquire_semaphore(
    session: AsyncSession, name: str, permits: int, timeout: Optional[float]
) -> AsyncSemaphorePermit:
    """See :meth:`raftlock.Session.semaphore`."""
    grant, turn = await take(session, _acquires.semaphore(name, session.id, permits), timeout)
    return AsyncSemaphorePermit(session, grant, turn, permits)


async def acquire_multi(session: AsyncSession, names: Sequence[str], timeout: Optional[float]) -> AsyncMultiLockGuard:
    """See :meth:`raftlock.Session.multi_lock`."""
    locks = list(names)
    grants, turn = await take(session, _acquires.multi(locks, session.id), timeout)
    return AsyncMultiLockGuard(session, grants, turn, locks)

"""Read-write locks, semaphores and multi-locks over asyncio: the twins of
:mod:`raftlock.shared`."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, List, Optional, Sequence

from .. import _api
from ..shared import READ, WRITE, _multi_key, _rw_key, _semaphore_key
from ..types import Grant
from .lock import AsyncLockGuard, take

if TYPE_CHECKING:
    from .session import AsyncSession


class AsyncRwLockGuard(AsyncLockGuard):
    """Proof of holding a read-write lock (``mode``); ``async with``
    releases it. See :class:`raftlock.RwLockGuard`."""

    def __init__(self, session: AsyncSession, grant: Grant, turn: asyncio.Lock, mode: str) -> None:
        key = _rw_key(grant.name)
        super().__init__(session, grant, turn, _api.release_rwlock(grant.name, session.id), key)
        self.mode = mode


class AsyncSemaphorePermit(AsyncLockGuard):
    """Proof of holding a semaphore place; see :class:`raftlock.SemaphorePermit`."""

    def __init__(self, session: AsyncSession, grant: Grant, turn: asyncio.Lock, permits: int) -> None:
        key = _semaphore_key(grant.name)
        super().__init__(session, grant, turn, _api.release_semaphore(grant.name, session.id), key)
        self.permits = permits


class AsyncMultiLockGuard(AsyncLockGuard):
    """Proof of holding every lock of a multi-lock; see
    :class:`raftlock.MultiLockGuard`."""

    def __init__(self, session: AsyncSession, grants: List[Grant], turn: asyncio.Lock, names: List[str]) -> None:
        super().__init__(session, grants[0], turn, _api.release_multi(names, session.id), _multi_key(names))
        self.grants = grants
        self.names = names


async def acquire_rwlock(session: AsyncSession, name: str, mode: str, timeout: Optional[float]) -> AsyncRwLockGuard:
    """See :meth:`raftlock.Session.read_lock`."""
    if mode not in (READ, WRITE):
        raise ValueError(f"mode must be {READ!r} or {WRITE!r}, not {mode!r}")
    grant, turn = await take(
        session,
        _rw_key(name),
        name,
        timeout,
        lambda piece: _api.acquire_rwlock(name, session.id, mode, piece.wait, piece.keep_queued),
        _api.release_rwlock(name, session.id),
    )
    return AsyncRwLockGuard(session, grant, turn, mode)


async def acquire_semaphore(
    session: AsyncSession, name: str, permits: int, timeout: Optional[float]
) -> AsyncSemaphorePermit:
    """See :meth:`raftlock.Session.semaphore`."""
    if permits < 1:
        raise ValueError(f"permits must be at least 1, not {permits}")
    grant, turn = await take(
        session,
        _semaphore_key(name),
        name,
        timeout,
        lambda piece: _api.acquire_semaphore(name, session.id, permits, piece.wait, piece.keep_queued),
        _api.release_semaphore(name, session.id),
    )
    return AsyncSemaphorePermit(session, grant, turn, permits)


async def acquire_multi(session: AsyncSession, names: Sequence[str], timeout: Optional[float]) -> AsyncMultiLockGuard:
    """See :meth:`raftlock.Session.multi_lock`."""
    locks = list(names)
    if not locks:
        raise ValueError("a multi-lock names at least one lock")
    grants, turn = await take(
        session,
        _multi_key(locks),
        ",".join(locks),
        timeout,
        lambda piece: _api.acquire_multi(locks, session.id, piece.wait, piece.keep_queued),
        _api.release_multi(locks, session.id),
    )
    return AsyncMultiLockGuard(session, grants, turn, locks)

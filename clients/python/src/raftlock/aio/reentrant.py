"""The asyncio twin of :mod:`raftlock.reentrant`: a lock the holding task
may acquire again without queueing, released when every hold has been
given back. The count is per lock object and task (``asyncio.current_task``),
kept in the client for the reasons given there."""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Optional, Type

from ..types import Grant
from ._pending import Pending
from .lock import AsyncLockGuard
from .session import AsyncSession


class AsyncReentrantLock:
    """The lock ``name`` taken through ``session``, reentrant per task.

    ``acquire`` by the holding task returns a new hold at once; by any
    other task it waits as :meth:`AsyncSession.lock` does. The last hold
    given back releases the lock::

        lock = AsyncReentrantLock(session, "orders/42")
        async with lock.acquire(timeout=5):
            async with lock.acquire():  # the same task: no request
                ...
    """

    def __init__(self, session: AsyncSession, name: str) -> None:
        self.session = session
        self.name = name
        # One event loop runs every task: no lock needed around these.
        self._owner: Optional[asyncio.Task[object]] = None
        self._count = 0
        self._guard: Optional[AsyncLockGuard] = None

    def acquire(self, timeout: Optional[float] = None) -> Pending[AsyncReentrantHold]:
        """One more hold at once if this task holds the lock; otherwise
        takes it, waiting up to ``timeout`` seconds (``None``: until
        granted; 0: a try). Await it, or ``async with`` it."""
        return Pending(lambda: self._acquire(timeout))

    def try_acquire(self) -> Pending[AsyncReentrantHold]:
        """As :meth:`acquire` with ``timeout=0``."""
        return self.acquire(0)

    @property
    def hold_count(self) -> int:
        """How many holds are outstanding (0: not held through this object)."""
        return self._count

    async def _acquire(self, timeout: Optional[float]) -> AsyncReentrantHold:
        me = asyncio.current_task()
        if self._guard is not None and me is not None and self._owner is me:
            self._count += 1
            return AsyncReentrantHold(self, self._guard.grant)
        guard = await self.session.lock(self.name, timeout)
        self._owner, self._count, self._guard = me, 1, guard
        return AsyncReentrantHold(self, guard.grant)

    async def _give_back(self) -> None:
        self._count -= 1
        if self._count > 0:
            return
        # From here nothing re-enters: the next acquire queues.
        guard, self._guard, self._owner = self._guard, None, None
        if guard is not None:
            await guard.release()

    def __repr__(self) -> str:
        return f"AsyncReentrantLock({self.name!r}, hold_count={self._count})"


class AsyncReentrantHold:
    """One hold of an :class:`AsyncReentrantLock`; an async context manager."""

    def __init__(self, lock: AsyncReentrantLock, grant: Grant) -> None:
        self.lock = lock
        self.grant = grant
        self._released = False

    @property
    def fencing_token(self) -> int:
        """The grant's fencing token, the same for every hold of one grant."""
        return self.grant.fencing_token

    async def release(self) -> None:
        """Gives this hold back (once); the last one releases the lock."""
        if self._released:
            return
        self._released = True
        await self.lock._give_back()

    async def __aenter__(self) -> AsyncReentrantHold:
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self.release()

    def __repr__(self) -> str:
        return f"AsyncReentrantHold({self.lock.name!r}, fencing_token={self.fencing_token})"

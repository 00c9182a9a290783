"""The asyncio twin of :mod:`raftlock.reentrant`: a lock the holding task
may acquire again without queueing, released when every hold has been
given back. The count is per lock object and task (``asyncio.current_task``),
kept in the client for the reasons given there."""
#> """A lock in reentrant mode: the thread that holds it may acquire it again
#> without queueing, and the lock is released only when every hold has been
#> given back (Redisson's and Curator's semantics, as the Rust client's
#> ``ReentrantMutex``; docs/adr/0010).
#>
#> The hold count lives here, in the client, per lock object and holding
#> thread, as ``threading.RLock`` and Curator's ``InterProcessMutex`` count:
#> the cluster keeps one node per session and lock as before. Not in the
#> cluster, because an acquire is resent after a lost answer (it is
#> idempotent per session, docs/api.md), so a count kept there would count
#> such a retry as a hold that nobody gives back; and a re-entry then costs
#> no Raft write. The count does not survive a process restart, which loses
#> its holders anyway."""

from __future__ import annotations

import asyncio  # [async]
#> import threading
from types import TracebackType
from typing import Optional, Type

from ..types import Grant  # [async]
from ._pending import Pending  # [async]
from .lock import AsyncLockGuard
from .session import AsyncSession
#> from .types import Grant


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
    #> """The lock ``name`` taken through ``session``, reentrant per thread.
    #>
    #> ``acquire`` by the holding thread returns a new hold at once; by any
    #> other thread it waits as :meth:`raftlock.Session.lock` does (the
    #> session queues it locally behind the holder). Each hold is given back
    #> once, by :meth:`ReentrantHold.release` or by leaving its ``with``
    #> block; the last one releases the lock::
    #>
    #>     lock = raftlock.ReentrantLock(session, "orders/42")
    #>     with lock.acquire(timeout=5):
    #>         with lock.acquire():  # the same thread: no request, no wait
    #>             ...
    #>         # still held here
    #> """

    def __init__(self, session: AsyncSession, name: str) -> None:
        self.session = session
        self.name = name
        # <async>
        # One event loop runs every task: no lock needed around these.
        self._owner: Optional[asyncio.Task[object]] = None
        # </async>
        #> self._state = threading.Lock()  # guards the three fields below
        #> self._owner: Optional[int] = None  # threading.get_ident() of the holder
        self._count = 0
        self._guard: Optional[AsyncLockGuard] = None
    # <async>

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
    # </async>
    #>
    #> def acquire(self, timeout: Optional[float] = None) -> ReentrantHold:
    #>     """One more hold at once if this thread holds the lock; otherwise
    #>     takes it, waiting up to ``timeout`` seconds (``None``: until
    #>     granted; 0: a try), with :meth:`raftlock.Session.lock`'s errors."""
    #>     me = threading.get_ident()
    #>     hold = self._reenter(me)
    #>     if hold is not None:
    #>         return hold
    #>     guard = self.session.lock(self.name, timeout)
    #>     with self._state:
    #>         self._owner, self._count, self._guard = me, 1, guard
    #>     return ReentrantHold(self, guard.grant)
    #>
    #> def try_acquire(self) -> ReentrantHold:
    #>     """As :meth:`acquire` with ``timeout=0``: ``LockHeld`` unless this
    #>     thread holds the lock or it is free right now."""
    #>     return self.acquire(0)
    #>
    #> @property
    #> def hold_count(self) -> int:
    #>     """How many holds are outstanding (0: not held through this object)."""
    #>     with self._state:
    #>         return self._count
    #>
    #> def _reenter(self, me: int) -> Optional[ReentrantHold]:
    #>     with self._state:
    #>         if self._guard is None or self._owner != me:
    #>             return None
    #>         self._count += 1
    #>         return ReentrantHold(self, self._guard.grant)

    async def _give_back(self) -> None:
        # <async>
        self._count -= 1
        if self._count > 0:
            return
        # From here nothing re-enters: the next acquire queues.
        guard, self._guard, self._owner = self._guard, None, None
        # </async>
        #> with self._state:
        #>     self._count -= 1
        #>     if self._count > 0:
        #>         return
        #>     # From here nothing re-enters: the next acquire queues.
        #>     guard, self._guard, self._owner = self._guard, None, None
        if guard is not None:
            await guard.release()

    def __repr__(self) -> str:
        return f"AsyncReentrantLock({self.name!r}, hold_count={self.hold_count})"


class AsyncReentrantHold:
    """One hold of an :class:`AsyncReentrantLock`; an async context manager."""
    #> """One hold of a :class:`ReentrantLock`; a context manager."""

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
        #> """Gives this hold back (once; later calls do nothing). The last
        #> hold releases the lock, with :meth:`raftlock.LockGuard.release`'s
        #> errors."""
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

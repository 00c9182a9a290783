"""``AsyncSession``: the asyncio twin of :class:`raftlock.Session`.

The same loss rule (:mod:`raftlock._lease`), with two tasks instead of two
threads: a keepalive task and a watchdog task that fires ``lost`` at the
deadline. ``lost`` is an :class:`asyncio.Event`, so a task can race its
work against ``session.lost.wait()``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from types import TracebackType
from typing import TYPE_CHECKING, Awaitable, Callable, List, Optional, Sequence, Type, TypeVar

from .. import _api
from .._lease import LeaseClock, LeaseHolder
from .._turns import Turns
from .._waiting import Slice, WaitPlan, must_release
from ..errors import NotFound, NotOwner, RaftlockError, SessionLost, SessionNotFound
from .._acquires import READ, WRITE
from ..types import LostReason
from .election import AsyncElection
from .lock import AsyncLockGuard, acquire
from .shared import (
    AsyncMultiLockGuard,
    AsyncRwLockGuard,
    AsyncSemaphorePermit,
    acquire_multi,
    acquire_rwlock,
    acquire_semaphore,
)

if TYPE_CHECKING:
    from .client import AsyncClient

T = TypeVar("T")
G = TypeVar("G")
log = logging.getLogger("raftlock")


class AsyncSession(LeaseHolder):
    """A session kept alive by a background task; see :class:`raftlock.Session`
    for the rules. Open one with :meth:`AsyncClient.session`."""

    def __init__(
        self,
        client: AsyncClient,
        session_id: str,
        owner: str,
        clock: LeaseClock,
        on_lost: Optional[Callable[[LostReason], None]],
    ) -> None:
        self.client = client
        self.id = session_id
        self.owner = owner
        self.lost = asyncio.Event()
        self.lost_reason = None
        self._clock = clock
        self._on_lost = on_lost
        self._closed = False
        self._turns: Turns[asyncio.Lock] = Turns(asyncio.Lock)
        self._tasks: List["asyncio.Task[None]"] = []

    @classmethod
    async def open(
        cls,
        client: AsyncClient,
        ttl: float,
        owner: str,
        on_lost: Optional[Callable[[LostReason], None]] = None,
    ) -> AsyncSession:
        """Opens a session on the cluster and starts keeping it alive."""
        sent = time.monotonic()
        lease = await client._call(_api.open_session(owner, ttl))
        session = cls(client, lease.session_id, owner, LeaseClock(lease.ttl, sent), on_lost)
        session._tasks = [
            asyncio.ensure_future(session._keep_alive()),
            asyncio.ensure_future(session._watch()),
        ]
        return session

    # -- recipes -----------------------------------------------------------

    async def lock(
        self, name: str, timeout: Optional[float] = None, lock_delay: Optional[float] = None
    ) -> AsyncLockGuard:
        """Takes the lock ``name``; see :meth:`raftlock.Session.lock`
        (``lock_delay`` as there). Cancelling the wait releases whatever it
        queued."""
        return await acquire(self, name, timeout, lock_delay)

    async def try_lock(self, name: str) -> AsyncLockGuard:
        """Takes the lock only if it is free now, else raises ``LockHeld``."""
        return await self.lock(name, 0)

    async def read_lock(self, name: str, timeout: Optional[float] = None) -> AsyncRwLockGuard:
        """See :meth:`raftlock.Session.read_lock`."""
        return await acquire_rwlock(self, name, READ, timeout)

    async def write_lock(self, name: str, timeout: Optional[float] = None) -> AsyncRwLockGuard:
        """See :meth:`raftlock.Session.write_lock`."""
        return await acquire_rwlock(self, name, WRITE, timeout)

    async def try_read_lock(self, name: str) -> AsyncRwLockGuard:
        """See :meth:`raftlock.Session.try_read_lock`."""
        return await self.read_lock(name, 0)

    async def try_write_lock(self, name: str) -> AsyncRwLockGuard:
        """See :meth:`raftlock.Session.try_write_lock`."""
        return await self.write_lock(name, 0)

    async def semaphore(self, name: str, permits: int, timeout: Optional[float] = None) -> AsyncSemaphorePermit:
        """See :meth:`raftlock.Session.semaphore`."""
        return await acquire_semaphore(self, name, permits, timeout)

    async def try_semaphore(self, name: str, permits: int) -> AsyncSemaphorePermit:
        """See :meth:`raftlock.Session.try_semaphore`."""
        return await self.semaphore(name, permits, 0)

    async def multi_lock(self, names: Sequence[str], timeout: Optional[float] = None) -> AsyncMultiLockGuard:
        """See :meth:`raftlock.Session.multi_lock`."""
        return await acquire_multi(self, names, timeout)

    async def try_multi_lock(self, names: Sequence[str]) -> AsyncMultiLockGuard:
        """See :meth:`raftlock.Session.try_multi_lock`."""
        return await self.multi_lock(names, 0)

    def election(self, name: str) -> AsyncElection:
        """The election ``name``, to campaign in through this session."""
        return AsyncElection(self, name)

    async def keepalive(self) -> float:
        """Renews the session now; returns the TTL."""
        sent = time.monotonic()
        ttl = await self._call(_api.keepalive(self.id), deadline=self._clock.lost_at())
        self._clock.renew(sent, ttl)
        return ttl

    # -- plumbing for the recipes ---------------------------------------------

    async def _call(self, op: _api.Op[T], deadline: Optional[float] = None) -> T:
        """Runs ``op``; a ``session_not_found`` answer fires ``lost``."""
        try:
            return await self.client._call(op, deadline)
        except SessionNotFound:
            self._mark_lost(LostReason.EXPIRED)
            raise

    async def _wait(self, plan: WaitPlan, request: Callable[[Slice], _api.Op[G]], cleanup: _api.Op[None]) -> G:
        """Waits for a grant in slices, giving up as soon as the session is
        lost; on failure or cancellation sends ``cleanup`` first if a node
        may be left (shielded, so a cancelled wait still cleans up)."""
        try:
            while True:
                piece = plan.next()
                try:
                    return await self._unless_lost(self._call(request(piece)))
                except RaftlockError as e:
                    plan.failed(e)
        except BaseException as error:
            if must_release(plan, error):
                await asyncio.shield(self._cleanup(cleanup))
            raise

    async def _unless_lost(self, work: Awaitable[T]) -> T:
        """``work``, abandoned with ``SessionLost`` if the session is lost first."""
        task = asyncio.ensure_future(work)
        lost = asyncio.ensure_future(self.lost.wait())
        try:
            await asyncio.wait({task, lost}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            lost.cancel()
            if not task.done():
                task.cancel()
        if task.cancelled() or not task.done():
            raise SessionLost(self.lost_reason or LostReason.CLOSED)
        return task.result()

    async def _cleanup(self, op: _api.Op[None]) -> None:
        """Best-effort release after an abandoned wait."""
        try:
            await self._call(op)
        except (NotFound, NotOwner) as e:
            log.debug("session %s: nothing left to clean up at %s: %s", self.id, op.call.path, e)
        except RaftlockError as e:
            log.warning("session %s: cleanup %s failed: %s", self.id, op.call.path, e)

    # -- the two tasks -------------------------------------------------------

    async def _keep_alive(self) -> None:
        next_at = self._clock.next_keepalive()
        while await self._sleep_until(next_at):
            try:
                await self.keepalive()
            except SessionNotFound:
                return  # lost fired
            except RaftlockError as e:
                log.warning("session %s: keepalive failed: %s", self.id, e)
                next_at = time.monotonic() + self._clock.retry_interval()
                continue
            next_at = self._clock.next_keepalive()

    async def _watch(self) -> None:
        while self.lost_reason is None:
            if not await self._sleep_until(self._clock.lost_at()):
                return  # lost otherwise, or closed
            if time.monotonic() >= self._clock.lost_at():  # no renewal meanwhile
                self._mark_lost(LostReason.KEEPALIVE_FAILED)

    async def _sleep_until(self, instant: float) -> bool:
        """Sleeps until ``instant``; False (at once) if the session is lost."""
        left = instant - time.monotonic()
        if left > 0:
            try:
                await asyncio.wait_for(self.lost.wait(), left)
            except asyncio.TimeoutError:
                pass
        return self.lost_reason is None

    def _mark_lost(self, reason: LostReason) -> None:
        """Fires ``lost`` (once) and the callback (not for a close)."""
        if self.lost_reason is not None:
            return
        self.lost_reason = reason
        self.lost.set()
        self._announce_lost(reason)

    # -- lifetime ----------------------------------------------------------------

    async def close(self) -> None:
        """Stops the keepalive and closes the session, releasing its locks;
        see :meth:`raftlock.Session.close`."""
        if self._closed:
            return
        self._closed = True
        self._mark_lost(LostReason.CLOSED)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        try:
            await self.client._call(_api.close_session(self.id))
        except SessionNotFound:
            pass  # expired already: its locks are gone, as a close wants

    async def close_quietly(self) -> None:
        """:meth:`close`, logging rather than raising a failure."""
        try:
            await self.close()
        except RaftlockError as e:
            log.warning("session %s: close failed: %s", self.id, e)

    async def __aenter__(self) -> AsyncSession:
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        if exc is None:
            await self.close()
        else:
            await self.close_quietly()

"""Locks over asyncio: acquiring one through a session, and its guard."""

from __future__ import annotations

import asyncio
import logging
from types import TracebackType
from typing import TYPE_CHECKING, Optional, Type

from .. import _api
from .._waiting import WaitPlan
from ..errors import LockHeld, Timeout
from ..lock import BUSY, GuardBase
from ..types import Grant

if TYPE_CHECKING:
    from .session import AsyncSession

log = logging.getLogger("raftlock")


async def acquire(session: AsyncSession, name: str, timeout: Optional[float]) -> AsyncLockGuard:
    """Takes ``name`` for ``session`` within ``timeout`` (see :meth:`raftlock.Session.lock`)."""
    plan = WaitPlan(
        name, timeout, session.client.settings, keep_queued=True, lost=lambda: session.lost_reason
    )
    turn = session._turns.enter(name)
    try:
        await _take_turn(turn, plan)
        try:
            grant = await session._wait(
                plan,
                lambda piece: _api.acquire(name, session.id, piece.wait, piece.keep_queued),
                cleanup=_api.release(name, session.id),
            )
        except BaseException:
            turn.release()
            raise
    except BaseException:
        session._turns.leave(name)
        raise
    log.debug("locked %s with token %d", name, grant.fencing_token)
    return AsyncLockGuard(session, grant, turn)


async def _take_turn(turn: asyncio.Lock, plan: WaitPlan) -> None:
    """Takes the session's local turn on the lock within the caller's patience."""
    if plan.try_only:
        if turn.locked():
            raise LockHeld(BUSY)
        await turn.acquire()  # free: returns without yielding
        return
    left = plan.time_left()
    try:
        await asyncio.wait_for(turn.acquire(), left)
    except asyncio.TimeoutError:
        raise Timeout(BUSY) from None


class AsyncLockGuard(GuardBase):
    """Proof of holding a lock; ``async with`` releases it at the end. See
    :class:`raftlock.LockGuard`."""

    def __init__(self, session: AsyncSession, grant: Grant, turn: asyncio.Lock) -> None:
        self.session = session
        self.grant = grant
        self._turn = turn
        self._released = False

    @property
    def lost(self) -> asyncio.Event:
        """The holding session's ``lost`` event."""
        return self.session.lost

    async def release(self) -> None:
        """Releases the lock (once); see :meth:`raftlock.LockGuard.release`."""
        if self._released:
            return
        self._released = True
        try:
            await self.session._call(_api.release(self.name, self.session.id))
        finally:
            self._turn.release()
            self.session._turns.leave(self.name)

    async def __aenter__(self) -> AsyncLockGuard:
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        if exc is None:
            await self.release()
            return
        try:
            await self.release()
        except Exception as e:  # do not hide the block's own error
            log.warning("releasing %s after an error failed: %s", self.name, e)

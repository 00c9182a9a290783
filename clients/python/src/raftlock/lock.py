# Generated from raftlock/aio/lock.py by clients/python/gen_sync.py:
# do not edit; edit the asyncio module and run the script again.
"""Locks: acquiring one through a session, and the guard that holds it."""

from __future__ import annotations

import logging
import threading
from types import TracebackType
from typing import TYPE_CHECKING, Optional, Tuple, Type, TypeVar

from . import _acquires
from ._acquires import Acquire
from ._guard import BUSY as BUSY, GuardBase as GuardBase  # this module's names too
from ._waiting import WaitPlan
from .errors import LockHeld, Timeout

if TYPE_CHECKING:
    from .session import Session

G = TypeVar("G")
log = logging.getLogger("raftlock")


def acquire(
    session: Session, name: str, timeout: Optional[float], lock_delay: Optional[float] = None
) -> LockGuard:
    """Takes ``name`` for ``session`` within ``timeout`` (see :meth:`Session.lock`)."""
    grant, turn = take(session, _acquires.lock(name, session.id, lock_delay), timeout)
    log.debug("locked %s with token %d", name, grant.fencing_token)
    return LockGuard(session, grant, turn)


def take(session: Session, acquire: Acquire[G], timeout: Optional[float]) -> Tuple[G, threading.Lock]:
    """What every primitive's acquire does: takes the session's local turn
    on ``acquire.key`` (one caller per session and queue at a time), then
    waits in long-poll slices (``acquire.request``), sending
    ``acquire.cleanup`` (a release) before raising if the wait ended with
    an entry maybe left queued. Returns the grant and the turn, which the
    guard gives back on release."""
    settings = session.client.settings
    plan = WaitPlan(acquire.label, timeout, settings, keep_queued=True, lost=lambda: session.lost_reason)
    turn = session._turns.enter(acquire.key)
    try:
        _take_turn(turn, plan)
        try:
            grant = session._wait(plan, acquire.request, cleanup=acquire.cleanup)
        except BaseException:
            turn.release()
            raise
    except BaseException:
        session._turns.leave(acquire.key)
        raise
    return grant, turn


def _take_turn(turn: threading.Lock, plan: WaitPlan) -> None:
    """Takes the session's local turn on the lock within the caller's patience."""
    if plan.try_only:
        if not turn.acquire(blocking=False):
            raise LockHeld(BUSY)
        return
    left = plan.time_left()
    if not turn.acquire(timeout=-1 if left is None else left):
        raise Timeout(BUSY)


class LockGuard(GuardBase["Session", threading.Lock]):
    """Proof of holding a lock, valid while its session lives.

    A context manager: leaving the ``with`` block releases the lock. The
    guard cannot know the instant the cluster lets go of the lock (a lost
    session): watch :attr:`lost`, and pass :attr:`fencing_token` to
    storage that checks it.
    """

    @property
    def lost(self) -> threading.Event:
        """The holding session's ``lost`` event: once set, the lock may be
        granted to someone else."""
        return self.session.lost

    def release(self) -> None:
        """Releases the lock (once; later calls do nothing). Raises
        ``NotFound``/``NotOwner``/``SessionNotFound`` when the lock had
        already been lost."""
        if self._released:
            return
        self._released = True
        try:
            self.session._call(self._release)
        finally:
            self._turn.release()
            self.session._turns.leave(self._key)

    def __enter__(self) -> LockGuard:
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        if exc is None:
            self.release()
            return
        try:
            self.release()
        except Exception as e:  # do not hide the block's own error
            log.warning("releasing %s after an error failed: %s", self.name, e)

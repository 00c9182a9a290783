"""Locks: acquiring one through a session, and the guard that holds it."""

from __future__ import annotations

import logging
import threading
from types import TracebackType
from typing import TYPE_CHECKING, Optional, Type

from . import _api
from ._waiting import WaitPlan
from .errors import LockHeld, Timeout
from .types import Grant

if TYPE_CHECKING:
    from .session import Session

BUSY = "another caller of this session holds or is taking this lock"
log = logging.getLogger("raftlock")


def acquire(session: Session, name: str, timeout: Optional[float]) -> LockGuard:
    """Takes ``name`` for ``session`` within ``timeout`` (see :meth:`Session.lock`)."""
    plan = WaitPlan(
        name, timeout, session.client.settings, keep_queued=True, lost=lambda: session.lost_reason
    )
    turn = session._turns.enter(name)
    try:
        _take_turn(turn, plan)
        try:
            grant = session._wait(
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
    return LockGuard(session, grant, turn)


def _take_turn(turn: threading.Lock, plan: WaitPlan) -> None:
    """Takes the session's local turn on the lock within the caller's patience."""
    if plan.try_only:
        if not turn.acquire(blocking=False):
            raise LockHeld(BUSY)
        return
    left = plan.time_left()
    if not turn.acquire(timeout=-1 if left is None else left):
        raise Timeout(BUSY)


class GuardBase:
    """The grant a guard stands for; shared by the blocking and asyncio guards."""

    grant: Grant

    @property
    def name(self) -> str:
        """The lock's name."""
        return self.grant.name

    @property
    def fencing_token(self) -> int:
        """Strictly greater than every token granted before, on any lock."""
        return self.grant.fencing_token

    @property
    def node(self) -> str:
        """The session's queue node (``/locks/{name}/lock-0000000042``)."""
        return self.grant.node

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, fencing_token={self.fencing_token}, node={self.node!r})"


class LockGuard(GuardBase):
    """Proof of holding a lock, valid while its session lives.

    A context manager: leaving the ``with`` block releases the lock. The
    guard cannot know the instant the cluster lets go of the lock (a lost
    session): watch :attr:`lost`, and pass :attr:`fencing_token` to
    storage that checks it.
    """

    def __init__(self, session: Session, grant: Grant, turn: threading.Lock) -> None:
        self.session = session
        self.grant = grant
        self._turn = turn
        self._released = False

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
            self.session._call(_api.release(self.name, self.session.id))
        finally:
            self._turn.release()
            self.session._turns.leave(self.name)

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

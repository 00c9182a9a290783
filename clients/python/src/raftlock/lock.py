"""Locks: acquiring one through a session, and the guard that holds it."""

from __future__ import annotations

import logging
import threading
from types import TracebackType
from typing import TYPE_CHECKING, Generic, Optional, Tuple, Type, TypeVar

from . import _acquires, _api
from ._acquires import Acquire
from ._lease import LeaseHolder
from ._waiting import WaitPlan
from .errors import LockHeld, Timeout
from .types import Grant

if TYPE_CHECKING:
    from .session import Session

G = TypeVar("G")
S = TypeVar("S", bound=LeaseHolder)
L = TypeVar("L")
BUSY = "another caller of this session holds or is taking this lock"
log = logging.getLogger("raftlock")


def acquire(session: Session, name: str, timeout: Optional[float], lock_delay: Optional[float] = None) -> LockGuard:
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


class GuardBase(Generic[S, L]):
    """What a guard holds, shared by the blocking and asyncio guards: the
    grant, the session (``S``) and its local turn on the lock (``L``), and
    the request that releases it."""

    def __init__(
        self,
        session: S,
        grant: Grant,
        turn: L,
        release: Optional[_api.Op[None]] = None,
        key: Optional[str] = None,
    ) -> None:
        self.session = session
        self.grant = grant
        self._turn = turn
        self._release = release or _api.release(grant.name, session.id)
        self._key = key or grant.name
        self._released = False

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

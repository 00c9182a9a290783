# Generated from raftlock/aio/session.py by clients/python/gen_sync.py:
# do not edit; edit the asyncio module and run the script again.
"""``Session``: a lease on the cluster, kept alive by a background thread,
that tells its owner when it may be gone (``lost``).

Two daemon threads per session, each with one job:

- the *keepalive* thread renews the session every ttl / 3 (sooner after a
  failure) and records the send time of each renewal that succeeded;
- the *watchdog* thread sleeps until the loss deadline (see
  :mod:`raftlock._lease`) and fires ``lost`` if no renewal moved it.

They are apart so that ``lost`` fires on time even while a keepalive is
stuck in a slow request: a blocking HTTP call cannot be interrupted.
"""

from __future__ import annotations

import logging
import threading
import time
from types import TracebackType
from typing import TYPE_CHECKING, Callable, Optional, Sequence, Type, TypeVar

from . import _api
from ._acquires import READ, WRITE
from ._lease import LeaseClock, LeaseHolder
from ._turns import Turns
from ._waiting import Slice, WaitPlan, must_release
from .errors import NotFound, NotOwner, RaftlockError, SessionNotFound
from .types import LostReason
from .election import Election
from .lock import LockGuard, acquire
from .shared import (
    MultiLockGuard,
    RwLockGuard,
    SemaphorePermit,
    acquire_multi,
    acquire_rwlock,
    acquire_semaphore,
)

if TYPE_CHECKING:
    from .client import Client

T = TypeVar("T")
G = TypeVar("G")
log = logging.getLogger("raftlock")


class Session(LeaseHolder):
    """A session: opened with a TTL, kept alive in the background, closed
    by :meth:`close` or at the end of a ``with`` block (which releases
    every lock it holds). Open one with :meth:`Client.session`.

    ``lost`` (a :class:`threading.Event`) is set when the session is, or
    may soon be, gone, *before* the cluster can have expired it: at
    (send time of the last successful keepalive) + ttl − margin, with
    margin = max(ttl / 10, 0.5 s) capped at ttl / 2; or at once when the
    cluster answers ``session_not_found``. From then on its locks may be
    granted to others: stop the work they protect. ``lost`` is final; open
    a new session. ``on_lost`` is called once, with the reason, from the
    thread that noticed; it is not called for a deliberate :meth:`close`
    (which sets ``lost`` with :attr:`LostReason.CLOSED`).
    """

    def __init__(
        self,
        client: Client,
        ttl: float,
        owner: str,
        on_lost: Optional[Callable[[LostReason], None]] = None,
    ) -> None:
        sent = time.monotonic()
        lease = client._call(_api.open_session(owner, ttl))
        self.client = client
        self.id = lease.session_id
        self.owner = owner
        self.lost = threading.Event()
        self.lost_reason = None
        self._on_lost = on_lost
        self._clock = LeaseClock(lease.ttl, sent)
        # Guards lost_reason and _closed; wakes both threads when lost.
        self._wake = threading.Condition()
        self._closed = False
        self._turns: Turns[threading.Lock] = Turns(threading.Lock)
        self._threads = [
            threading.Thread(target=self._keep_alive, name=f"raftlock-keepalive-{self.id[:8]}", daemon=True),
            threading.Thread(target=self._watch, name=f"raftlock-watchdog-{self.id[:8]}", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    # -- recipes -----------------------------------------------------------

    def lock(
        self, name: str, timeout: Optional[float] = None, lock_delay: Optional[float] = None
    ) -> LockGuard:
        """Takes the lock ``name``, waiting up to ``timeout`` seconds
        (``None``: until granted; 0: a try). Returns the guard, which is a
        context manager: ``with session.lock("orders/42", timeout=5) as
        guard``. Raises :class:`~raftlock.errors.Timeout` when time runs
        out, :class:`~raftlock.errors.SessionLost` when the session is
        lost first. However the wait ends without a grant (an error, an
        answer lost in flight, ``KeyboardInterrupt``) no queued node is
        left behind.

        A wait longer than the client's ``long_poll`` is a series of long
        polls; all but the last ask the server to ``keep_queued``, so the
        session keeps its place in line between them. (Servers from before
        ``keep_queued`` get plain polls, which re-queue at the back.)

        ``lock_delay`` (seconds): the lock's lock-delay. After a holder's
        session expires or is closed, nobody is granted the lock for that
        long, so a holder that lost its session but still writes does not
        overlap its successor; a release skips it. The acquire that
        creates the lock's queue fixes it (at most 60 s); another value
        raises :class:`~raftlock.errors.BadRequest` while anyone is queued.
        ``None`` asks for none and takes the lock's own (docs/api.md)."""
        return acquire(self, name, timeout, lock_delay)

    def try_lock(self, name: str) -> LockGuard:
        """Takes the lock only if it is free right now, else raises
        :class:`~raftlock.errors.LockHeld`."""
        return self.lock(name, 0)

    def read_lock(self, name: str, timeout: Optional[float] = None) -> RwLockGuard:
        """Takes read-write lock ``name`` to read, shared with the other
        readers at the head of its queue; waits (and cleans up) as
        :meth:`lock` does. A reader that arrives while a writer waits
        queues behind the writer."""
        return acquire_rwlock(self, name, READ, timeout)

    def write_lock(self, name: str, timeout: Optional[float] = None) -> RwLockGuard:
        """Takes read-write lock ``name`` to write, alone."""
        return acquire_rwlock(self, name, WRITE, timeout)

    def try_read_lock(self, name: str) -> RwLockGuard:
        """Reads ``name`` only if that is possible right now, else raises
        :class:`~raftlock.errors.LockHeld`."""
        return self.read_lock(name, 0)

    def try_write_lock(self, name: str) -> RwLockGuard:
        """Writes ``name`` only if it is free right now."""
        return self.write_lock(name, 0)

    def semaphore(self, name: str, permits: int, timeout: Optional[float] = None) -> SemaphorePermit:
        """Takes one of the ``permits`` places of semaphore ``name``, waiting
        as :meth:`lock` does. Every holder must name the same ``permits``
        while anyone holds or waits (:class:`~raftlock.errors.LimitMismatch`
        otherwise)."""
        return acquire_semaphore(self, name, permits, timeout)

    def try_semaphore(self, name: str, permits: int) -> SemaphorePermit:
        """Takes a place only if one is free right now."""
        return self.semaphore(name, permits, 0)

    def multi_lock(self, names: Sequence[str], timeout: Optional[float] = None) -> MultiLockGuard:
        """Takes every lock of ``names`` (ordinary locks) or none, queued as
        one entry: two overlapping sets, named in any order, cannot
        deadlock. Waits as :meth:`lock` does; the guard releases them
        together."""
        return acquire_multi(self, names, timeout)

    def try_multi_lock(self, names: Sequence[str]) -> MultiLockGuard:
        """Takes the locks only if all are free right now."""
        return self.multi_lock(names, 0)

    def election(self, name: str) -> Election:
        """The election ``name``, to campaign in through this session."""
        return Election(self, name)

    def keepalive(self) -> float:
        """Renews the session now (the keepalive thread does this by itself);
        returns the TTL."""
        sent = time.monotonic()
        ttl = self._call(_api.keepalive(self.id), deadline=self._clock.lost_at())
        self._clock.renew(sent, ttl)
        return ttl

    # -- plumbing for the recipes ---------------------------------------------

    def _call(self, op: _api.Op[T], deadline: Optional[float] = None) -> T:
        """Runs ``op``; a ``session_not_found`` answer fires ``lost``."""
        try:
            return self.client._call(op, deadline)
        except SessionNotFound:
            self._mark_lost(LostReason.EXPIRED)
            raise

    def _wait(self, plan: WaitPlan, request: Callable[[Slice], _api.Op[G]], cleanup: _api.Op[None]) -> G:
        """Waits for a grant in the slices ``plan`` hands out; on failure
        sends ``cleanup`` (a release or resign) first if a node may be left."""
        try:
            while True:
                piece = plan.next()
                try:
                    return self._call(request(piece))
                except RaftlockError as e:
                    plan.failed(e)
        except BaseException as error:
            if must_release(plan, error):
                self._cleanup(cleanup)
            raise

    def _cleanup(self, op: _api.Op[None]) -> None:
        """Best-effort release after an abandoned wait: its failure must not
        hide the error that ended the wait (the session's end cleans up)."""
        try:
            self._call(op)
        except (NotFound, NotOwner) as e:
            log.debug("session %s: nothing left to clean up at %s: %s", self.id, op.call.path, e)
        except RaftlockError as e:
            log.warning("session %s: cleanup %s failed: %s", self.id, op.call.path, e)

    # -- the two threads -------------------------------------------------------

    def _keep_alive(self) -> None:
        next_at = self._clock.next_keepalive()
        while self._sleep_until(next_at):
            try:
                self.keepalive()
            except SessionNotFound:
                return  # lost fired
            except RaftlockError as e:
                log.warning("session %s: keepalive failed: %s", self.id, e)
                next_at = time.monotonic() + self._clock.retry_interval()
                continue
            except RuntimeError:
                if self._closed:
                    return  # the client's connections closed under us
                raise
            next_at = self._clock.next_keepalive()

    def _watch(self) -> None:
        with self._wake:
            while self.lost_reason is None:
                left = self._clock.lost_at() - time.monotonic()
                if left <= 0:
                    break
                self._wake.wait(left)
            if self.lost_reason is not None:
                return  # lost otherwise, or closed
        self._mark_lost(LostReason.KEEPALIVE_FAILED)

    def _sleep_until(self, instant: float) -> bool:
        """Sleeps until ``instant``; False (at once) if the session is lost."""
        with self._wake:
            while self.lost_reason is None:
                left = instant - time.monotonic()
                if left <= 0:
                    return True
                self._wake.wait(left)
            return False

    def _mark_lost(self, reason: LostReason) -> None:
        """Fires ``lost`` (once) and the callback (not for a close)."""
        with self._wake:
            if self.lost_reason is not None:
                return
            self.lost_reason = reason
            self.lost.set()
            self._wake.notify_all()
        self._announce_lost(reason)

    # -- lifetime ----------------------------------------------------------------

    def close(self) -> None:
        """Stops the keepalive and closes the session on the cluster,
        releasing its locks. Sets ``lost`` (reason ``CLOSED``) unless it
        was already lost. Closing twice, or a session that already
        expired, is not an error."""
        with self._wake:
            if self._closed:
                return
            self._closed = True
        self._mark_lost(LostReason.CLOSED)
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(self.client.settings.timeout)
        try:
            self.client._call(_api.close_session(self.id))
        except SessionNotFound:
            pass  # expired already: its locks are gone, as a close wants

    def close_quietly(self) -> None:
        """:meth:`close`, logging rather than raising a failure."""
        try:
            self.close()
        except RaftlockError as e:
            log.warning("session %s: close failed: %s", self.id, e)

    def __enter__(self) -> Session:
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        if exc is None:
            self.close()
        else:
            self.close_quietly()  # do not hide the block's own error

"""Waiting in a lock's (or an election's) queue, free of IO.

One acquire may not wait longer than the server's cap on ``wait_ms``
(5 minutes by default), so a long wait is a series of long-poll *slices*.
Every slice but the last asks the server to ``keep_queued``: on its
``timeout`` the session's node stays queued and the next slice finds it
again (acquire is idempotent per session), so the waiter keeps its FIFO
place. The last slice does not, so when the caller's patience runs out the
server withdraws the node itself.

Whatever ends a wait other than a grant or a definite refusal of a request
that queued nothing (an answer lost in flight, a kept node, the caller
giving up or being cancelled) leaves a node that only a release removes:
:func:`must_release` says when, and the lock and election code release
before reporting the error, so no node is ever orphaned. (An orphaned node
would block every later waiter until the session dies.)
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Optional

from .errors import (
    BadRequest,
    RaftlockError,
    SessionLost,
    SessionNotFound,
    Timeout,
)
from ._settings import Settings
from .types import LostReason


@dataclass(frozen=True)
class Slice:
    """One acquire (or campaign) request of a wait."""

    wait: float
    """Seconds the server may hold it; 0 is a try."""
    keep_queued: bool
    """Ask the server to keep the node queued on ``timeout``."""


class WaitPlan:
    """One caller's wait: which slice to send next, and which failures end it.

    Drive it as ``while True: s = plan.next(); try: return send(s)
    except RaftlockError as e: plan.failed(e)``; both raise when the wait is
    over.
    """

    def __init__(
        self,
        name: str,
        timeout: Optional[float],
        settings: Settings,
        *,
        keep_queued: bool,
        lost: Callable[[], Optional[LostReason]],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if timeout is not None and timeout < 0:
            raise ValueError(f"timeout must be None or >= 0, not {timeout}")
        self.name = name
        self.try_only = timeout == 0
        self.keep_queued = keep_queued
        """False once the server said it does not know ``keep_queued``."""
        self.maybe_queued = False
        """True once a node of this wait may be queued that no answer
        withdrew: the server kept it on a slice's timeout, or an answer
        was lost."""
        self._deadline = None if timeout is None else clock() + timeout
        self._long_poll = settings.long_poll
        self._lost = lost
        self._unknown_left = settings.retry.attempts
        self._clock = clock
        self._sent = 0
        self._current = Slice(0.0, False)

    def time_left(self) -> Optional[float]:
        """Seconds until the caller's deadline (``None``: no deadline)."""
        if self._deadline is None:
            return None
        return max(self._deadline - self._clock(), 0.0)

    def next(self) -> Slice:
        """The next slice to send; raises when the wait is over."""
        reason = self._lost()
        if reason is not None:
            raise SessionLost(reason)
        first, self._sent = self._sent == 0, self._sent + 1
        if self.try_only:
            if first:
                return self._sending(Slice(0.0, False))
            raise Timeout(f"could not take {self.name!r} at once")
        if self._deadline is None:
            return self._sending(Slice(self._long_poll, self.keep_queued))
        left = self._deadline - self._clock()
        if left <= 0 and not first:
            raise Timeout(f"waiting for {self.name!r}")
        if left > self._long_poll:
            return self._sending(Slice(self._long_poll, self.keep_queued))
        # The last slice; at least a millisecond, so it is never a try.
        return self._sending(Slice(max(left, 0.001), False))

    def _sending(self, s: Slice) -> Slice:
        self._current = s
        return s

    def failed(self, error: RaftlockError) -> None:
        """A slice failed with ``error``: returns to go on, raises to stop."""
        if isinstance(error, Timeout) and not self.try_only:
            if self._current.keep_queued:
                self.maybe_queued = True  # the server kept the node
            return
        if self.keep_queued and is_keep_queued_rejection(error):
            # A server from before keep_queued: wait as it allows (each
            # slice re-queues at the back) rather than not at all.
            self.keep_queued = False
            return
        if error.outcome_unknown:
            self.maybe_queued = True
            if self._unknown_left > 0:
                # Acquire is idempotent per session: a new slice finds the
                # node the lost one may have queued.
                self._unknown_left -= 1
                return
        raise error


def is_keep_queued_rejection(error: BaseException) -> bool:
    """Whether ``error`` is a server refusing the ``keep_queued`` field."""
    return isinstance(error, BadRequest) and "keep_queued" in error.message


def must_release(plan: WaitPlan, error: BaseException) -> bool:
    """Whether a wait that ended with ``error`` may have left a node behind."""
    if isinstance(error, SessionNotFound):
        return False  # the session's nodes went with it
    if isinstance(error, SessionLost):
        # Only a session that may still exist can still hold a node.
        return error.reason is LostReason.KEEPALIVE_FAILED
    if isinstance(error, RaftlockError) and not error.outcome_unknown:
        # A definite refusal withdrew what its own request queued.
        return plan.maybe_queued
    # An unknown outcome, or the caller cancelled (KeyboardInterrupt,
    # asyncio.CancelledError) or failed (a bug) mid-request.
    return True
